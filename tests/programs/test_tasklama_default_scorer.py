"""S&F's trained scorer ships beside the TaskLAMA programs and is found there by default."""
from decomp.programs.tasklama.handlers import DEFAULT_SCORER, _scorer


def test_the_default_scorer_is_the_bundled_file_and_loads():
    assert DEFAULT_SCORER.name == "scorer.npz" and DEFAULT_SCORER.parent.name == "tasklama"
    assert DEFAULT_SCORER.is_file()
    assert _scorer(str(DEFAULT_SCORER)) is not None
