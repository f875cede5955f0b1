"""`optimize` on the bundled letter_cat_llm, on the mock server: a student whose str_position
answers depend on the demonstrations it is shown, a perfect teacher. The chosen program beats
the zero-shot one on the development rows, is an ordinary program folder, and reproduces its
score from the cache; a second run resumes; bad inputs get clear errors."""
from __future__ import annotations

import json
import shutil

import pytest

from decomp.learning.optimize import OptimizeError, optimize
from decomp.runtime.runs.api import PROGRAMS_DIR, RunOptions, run_dataset
from tests.learning.optimize.optimize_helpers import letter_rows, student

pytestmark = pytest.mark.network

PROGRAM = "decomp/letter_cat_llm"

MOCK_SERVER = {"responder": student}  # the `server` fixture (tests/conftest.py)


def _options(server, tmp_path, **kw):
    return RunOptions(base_url=server.base_url, cache_dir=tmp_path / "cache", **kw)


def _optimize(server, tmp_path, out="out", notes=None, **kw):
    train, dev = letter_rows(tmp_path)
    kw.setdefault("candidates", 3)
    return optimize(PROGRAM, train, dev, out=tmp_path / out, model="openai:student", teacher="openai:teacher",
                    options=_options(server, tmp_path), on_note=(notes.append if notes is not None else None), **kw)


def test_the_chosen_program_beats_zero_shot_and_reproduces_its_score(server, tmp_path):
    notes: list[str] = []
    done = _optimize(server, tmp_path, notes=notes)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report == done.report
    zero, chosen = report["candidates"][0], report["chosen"]
    assert zero["name"] == "zero-shot" and chosen["name"] != "zero-shot"
    assert chosen["dev_score"] > zero["dev_score"]
    assert report["bootstrap"]["passed"] == report["bootstrap"]["rows"] == 10
    assert report["teacher"] == "openai:teacher" and report["model"] == "openai:student"
    assert set(report["data"]) == {"train", "dev"} and len(report["data"]["dev"]["sha256"]) == 64
    assert report["projected"]["projected_calls"] >= report["calls"] > 0
    for entry in report["candidates"]:
        assert entry["complete"] and all(n <= 4 for n in entry["demos"].values())
    assert any(note.startswith("projected at most") for note in notes)
    # an ordinary program: only file= options changed, the new examples files beside it
    source = (tmp_path / "out" / "letter_cat_llm.decomp").read_text()
    assert 'file="optimized/' in source
    # run as any program, it gives the reported score, every call from the cache
    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    again = run_dataset(done.program, dev, model="openai:student", options=_options(server, tmp_path),
                        run_dir=tmp_path / "again")
    assert again.score == chosen["dev_score"] and again.summary["calls"] == 0
    assert again.summary["cache_hits"] > 0 and train.exists()


def test_the_same_command_again_resumes_without_new_calls(server, tmp_path):
    first = _optimize(server, tmp_path)
    notes: list[str] = []
    second = _optimize(server, tmp_path, notes=notes)
    assert any("resuming" in note for note in notes)
    assert second.report["chosen"] == first.report["chosen"]
    assert [c["dev_score"] for c in second.report["candidates"]] == [c["dev_score"] for c in first.report["candidates"]]


def test_other_settings_in_the_same_folder_are_refused_unless_forced(server, tmp_path):
    _optimize(server, tmp_path)
    with pytest.raises(OptimizeError, match="other inputs or settings.*settings.*--force"):
        _optimize(server, tmp_path, seed=5)
    assert _optimize(server, tmp_path, seed=5, force=True).report["seed"] == 5


def test_a_foreign_output_folder_is_refused(server, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep me")
    with pytest.raises(OptimizeError, match="holds something else"):
        _optimize(server, tmp_path)
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep me"


def test_no_row_passing_keeps_the_zero_shot_program(server, tmp_path):
    notes: list[str] = []
    train, dev = letter_rows(tmp_path)
    done = optimize(PROGRAM, train, dev, out=tmp_path / "out", model="openai:student", teacher="openai:student",
                    options=_options(server, tmp_path), threshold=2.0, on_note=notes.append)
    assert [c["name"] for c in done.report["candidates"]] == ["zero-shot"]
    assert done.report["chosen"]["name"] == "zero-shot"
    assert any("no training row passed the metric" in note for note in notes)
    original = PROGRAMS_DIR / "decomp" / "letter_cat_llm.decomp"
    assert done.program.read_text() == original.read_text()


def test_max_calls_too_small_is_refused_before_any_call(server, tmp_path):
    before = server.stats()["requests"]
    with pytest.raises(OptimizeError, match="--max-calls 10 is fewer than"):
        _optimize(server, tmp_path, max_calls=10)
    assert server.stats()["requests"] == before


def test_the_budget_stops_the_search_cleanly(server, tmp_path):
    notes: list[str] = []
    train, dev = letter_rows(tmp_path)
    done = _optimize(server, tmp_path, notes=notes, max_calls=300, candidates=6)
    assert done.report["calls"] <= 300
    assert done.report["stopped"].startswith("the call budget")
    assert any("not_scored" in c for c in done.report["candidates"])
    assert any("warning: the projection is over --max-calls" in note for note in notes)
    assert done.report["chosen"]["name"] in [c["name"] for c in done.report["candidates"] if c["complete"]]


def test_dev_rows_in_the_training_set_are_warned_and_give_nothing(server, tmp_path):
    train, dev = letter_rows(tmp_path)
    notes: list[str] = []
    done = optimize(PROGRAM, train, train, out=tmp_path / "out", model="openai:student", teacher="openai:teacher",
                    options=_options(server, tmp_path), candidates=1, on_note=notes.append)
    assert any("also development rows" in note for note in notes)
    assert [c["name"] for c in done.report["candidates"]] == ["zero-shot"]


def test_a_metric_that_raises_fails_its_rows_and_the_rest_go_on(server, tmp_path, monkeypatch):
    (tmp_path / "picky.py").write_text(
        "def score(row, answer, trace):\n"
        "    if row['id'] == 'row0':\n        raise RuntimeError('cannot judge this one')\n"
        "    if row['id'] == 'row1':\n        return 'yes'\n"
        "    assert trace['kind'] == 'row'\n"
        "    return 1.0 if answer == row['answer'] else 0.0\n")
    monkeypatch.chdir(tmp_path)
    done = _optimize(server, tmp_path, metric="picky:score")
    errors = done.report["bootstrap"]["metric_errors"]
    assert {e["row"] for e in errors} == {"row0", "row1"}
    assert "RuntimeError: cannot judge this one" in errors[0]["error"] and "'yes'" in errors[1]["error"]
    assert done.report["bootstrap"]["passed"] == 8


def test_empty_training_rows_are_refused(server, tmp_path):
    train, dev = letter_rows(tmp_path)
    train.write_text("")
    with pytest.raises(OptimizeError, match="--train .* has no rows"):
        optimize(PROGRAM, train, dev, out=tmp_path / "out", model="openai:student", options=_options(server, tmp_path))


def test_stopping_early_chooses_what_scoring_all_in_full_chooses(server, tmp_path):
    early = _optimize(server, tmp_path, out="early", candidates=6)
    full = _optimize(server, tmp_path, out="full", candidates=6, prune=False)
    assert early.report["chosen"] == {**full.report["chosen"], "calls": early.report["chosen"]["calls"],
                                      "tokens": early.report["chosen"]["tokens"]}
    pruned = [c for c in early.report["candidates"] if "pruned" in c]
    assert pruned and all(c["scored_rows"] < c["dev_rows"] for c in pruned)
    assert all(c["dev_score"] is None and not c["complete"] for c in pruned)
    scores = {c["name"]: c["dev_score"] for c in full.report["candidates"]}
    assert all(scores[c["name"]] <= c["dev_score_at_most"] < early.report["chosen"]["dev_score"] for c in pruned)
    assert all(c["complete"] for c in full.report["candidates"])


def test_a_second_round_reruns_the_rows_that_failed_as_a_new_rollout(server, tmp_path):
    train, dev = letter_rows(tmp_path)
    done = optimize(PROGRAM, train, dev, out=tmp_path / "out", model="openai:student", teacher="openai:student",
                    options=_options(server, tmp_path), candidates=1, rounds=2, teacher_temperature=0.8)
    first, second = done.report["bootstrap"]["rounds"]
    assert first["rows"] == 10 and second["rows"] == 10 - first["passed"] > 0
    recorded = json.loads((tmp_path / "out" / ".optimize" / "teacher-2" / "run.json").read_text())["options"]
    assert (recorded["temperature"], recorded["rollout"]) == (0.8, 1)
    rerun = [json.loads(line)["id"] for line in (tmp_path / "out" / ".optimize" / "teacher-2.jsonl").read_text().splitlines()]
    assert len(rerun) == second["rows"]
    assert "temperature" not in json.loads((tmp_path / "out" / ".optimize" / "teacher-1" / "run.json").read_text())["options"]


def test_an_interrupted_optimisation_finishes_where_it_stopped(server, tmp_path):
    first = _optimize(server, tmp_path)
    work = tmp_path / "out" / ".optimize"
    # as if stopped during the race: the last windows' run directories and the report never written
    for later in sorted(work.glob("evals/0[2-9]-*/rows-*"))[-3:]:
        shutil.rmtree(later)
    (tmp_path / "out" / "report.json").unlink()
    before = server.stats()["requests"]
    again = _optimize(server, tmp_path)
    assert server.stats()["requests"] == before  # what was lost is answered from the step cache
    assert [again.report["chosen"][k] for k in ("name", "dev_score", "demos")] == \
        [first.report["chosen"][k] for k in ("name", "dev_score", "demos")]
    assert [c["dev_score"] for c in again.report["candidates"]] == [c["dev_score"] for c in first.report["candidates"]]
