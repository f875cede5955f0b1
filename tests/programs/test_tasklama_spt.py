"""TaskLAMA's soft-prompt tuned programs (tasklama/steps: spt, multseq_spt, sf_spt,
multseq_sf_spt, each with _noctx; tasklama/graphs: pairwise_spt) and the soft prompts shipped
for them in programs/tasklama/soft/: each trained for its handler's current prompt, bound to the
bundled model, and served by it; any other model refuses them as the row's error."""
import hashlib
import json

import pytest

from decomp import FakeModel, Session
from decomp.handlers.kinds.prompt import source_text
from decomp.handlers.kinds.soft_prompt_option import handler_soft_prompt
from decomp.runtime.cli import PROGRAMS_DIR

STEPS = PROGRAMS_DIR / "tasklama" / "steps.decomp"
GRAPHS = PROGRAMS_DIR / "tasklama" / "graphs.decomp"
STEP_MAINS = [f"{method}{variant}" for method in ("spt", "multseq_spt", "sf_spt", "multseq_sf_spt")
              for variant in ("", "_noctx")]


def _soft_handlers():
    """(program, handler) for every handler of the two programs that declares a soft prompt."""
    found = []
    for path in (STEPS, GRAPHS):
        module = Session(model=FakeModel()).load(path)
        found += [(path, h) for h in module.handlers.values() if getattr(h.options, "soft_prompt", None)]
    return found


def test_every_soft_prompt_was_trained_for_its_handlers_current_prompt():
    """A template edited after training would serve a soft prompt trained for other text: the
    metadata's sha256 of the prompt source must be the handler's own (retrain: docs/tasklama.md)."""
    handlers = _soft_handlers()
    assert {h.name for _, h in handlers} == {"write_spt", "write_spt_noctx", "sample3_spt", "sample4_spt",
                                            "sample3_spt_noctx", "sample4_spt_noctx", "before_spt"}
    for path, handler in handlers:
        soft = handler_soft_prompt(handler)
        trained = soft.meta["handler"]
        assert trained["program"] == f"tasklama/{path.stem}" and trained["kind"] == "prompt"
        assert trained["template_sha256"] == hashlib.sha256(source_text(handler).encode()).hexdigest(), handler.name
        assert soft.meta["training"]["validation_rows"] > 0 and soft.meta["training"]["chosen_by"] == "validation loss"


@pytest.mark.parametrize("main_name", STEP_MAINS)
def test_an_spt_program_on_a_model_that_cannot_take_a_soft_prompt_is_the_rows_error(main_name):
    session = Session(model=FakeModel(default="1. Boil water."), python_workers=False)
    module = session.load(STEPS)
    module.main = main_name
    result = session.run(module, {"id": "t", "task": "make tea", "assumptions": ""})
    assert result.error is not None and "cannot take a soft prompt" in str(result.error)


@pytest.mark.local_model
def test_the_shipped_soft_prompts_fit_the_bundled_model():
    from decomp.handlers.soft_prompts import mismatch
    from decomp.runtime.models.local import DEFAULT, gguf_identity, weights_path

    model, tokenizer = gguf_identity(weights_path(DEFAULT))
    for _, handler in _soft_handlers():
        assert mismatch(handler_soft_prompt(handler), model, tokenizer) is None, handler.name


@pytest.mark.local_model
def test_spt_and_pairwise_spt_run_on_the_bundled_model(tmp_path):
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "t", "task": "make a cup of tea", "assumptions": "",
                                "steps": ["Boil water.", "Pour the water on the tea."]}) + "\n")
    for program, main_name in (("tasklama/steps", "spt"), ("tasklama/graphs", "pairwise_spt")):
        out = tmp_path / main_name
        result = CliRunner().invoke(main, ["run", program, "--main", main_name, "--input", str(rows),
                                           "--run-dir", str(out), "--concurrency", "1"])
        assert result.exit_code == 0, result.output
        (line,) = (out / "results.jsonl").read_text().splitlines()
        answer = json.loads(line)["answer"]
        if main_name == "spt":
            assert isinstance(answer, list) and answer and all(isinstance(s, str) and s for s in answer)
        else:
            assert answer["steps"] == ["Boil water.", "Pour the water on the tea."]
            assert all(edge in ([0, 1], [1, 0]) for edge in answer["edges"])
