"""`decomp.evaluate` (runtime/runs/notebook_evaluate.py): `decomp eval` from Python, on real run
directories, its figures the ones the command prints, as an `Evaluation` and a DataFrame."""
from __future__ import annotations

import json
import re

import pandas
import pytest

import decomp
from decomp.runtime.storage.layout import RunDirError
from tests.helpers import invoke, last_json

ROWS = [{"id": f"r{i}", "question": f"word{i}", "answer": f"word{i}" if i % 3 else f"word{i} word{i}"}
        for i in range(6)]


@pytest.fixture(autouse=True)
def folders(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "funcs.py").write_text("def same(question):\n    return question\n", encoding="utf-8")
    (tmp_path / "same.decomp").write_text('handler h = python(function="funcs:same")\nmain h\n', encoding="utf-8")
    (tmp_path / "gold.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")


@pytest.fixture
def run(tmp_path):
    return decomp.load("same.decomp").run_dataset(ROWS, run_dir=tmp_path / "run", output=tmp_path / "out.jsonl",
                                                  progress=False)


def test_the_figures_are_the_ones_decomp_eval_prints(run, tmp_path):
    found = decomp.evaluate("gold.jsonl", run)
    assert found.to_dict() == last_json(invoke("eval", "--gold", "gold.jsonl", "--pred", run.path, check=True))
    assert (found.metric, found.score, found.n, found.missing, found.metric_errors) == ("em", 4 / 6, 6, 0, 0)
    assert repr(found) == "Evaluation(metric='em', score=0.6667, n=6, missing=0)"
    assert found.warnings == ()


def test_gold_and_predictions_of_every_kind_give_the_same_figures(run, tmp_path):
    want = decomp.evaluate("gold.jsonl", run).to_dict()
    golds = (lambda: ROWS, lambda: pandas.DataFrame(ROWS), lambda: (row for row in ROWS),
             lambda: tmp_path / "gold.jsonl", lambda: "gold.jsonl")
    for gold in golds:
        for predictions in (run, run.result, run.path, str(run.path), tmp_path / "out.jsonl"):
            assert decomp.evaluate(gold(), predictions, progress=False).to_dict() == want


def test_a_metric_by_name_and_as_functions_of_both_forms(run):
    printed = invoke("eval", "--gold", "gold.jsonl", "--pred", run.path, "--metric", "f1", check=True)
    assert decomp.evaluate(ROWS, run, "f1").to_dict() == last_json(printed)

    def first_two(row, answer, trace):  # the row form: the gold file's row, the answer, the row's trace
        assert trace is not None and row["question"] == answer
        return float(row["id"] in ("r0", "r1"))

    def joined(answer, gold):  # the pair form: once per gold alternative (a list of spans)
        return float(answer == " ".join(gold))

    assert decomp.evaluate(ROWS, run, first_two).score == pytest.approx(2 / 6)
    found = decomp.evaluate(ROWS, run, joined)
    assert found.metric.endswith("joined") and found.score == pytest.approx(4 / 6)


def test_without_gold_the_success_rates(run):
    found = decomp.evaluate(None, run)
    assert found.to_dict() == last_json(invoke("eval", "--pred", run.path, check=True))
    assert (found.rows, found.errors, found.success_rate, found.score) == (6, 0, 1.0, None)
    assert "success_rate=1.0" in repr(found) and "score" not in repr(found)


def test_to_pandas_is_one_row_of_the_figures(run):
    frame = decomp.evaluate("gold.jsonl", run).to_pandas()
    assert list(frame.index) == ["all rows"]
    assert frame.loc["all rows", "score"] == pytest.approx(4 / 6) and frame.loc["all rows", "metric"] == "em"


def test_rows_the_metric_fails_on_are_counted_and_warned(run):
    def picky(answer, gold):
        if answer == "word0":
            raise ValueError("not this one")
        return 1.0

    found = decomp.evaluate(ROWS, run, picky)
    assert found.metric_errors == 1 and "metric_errors=1" in repr(found)
    assert len(found.warnings) == 1 and found.warnings[0].startswith("row r0: ") and "not this one" in found.warnings[0]


def test_a_bar_of_the_rows_scored(run, capsys):
    decomp.evaluate(ROWS, run, lambda answer, gold: 1.0, progress=True)
    err = capsys.readouterr().err
    assert "rows scored: 100%" in err and "6/6" in err
    decomp.evaluate(ROWS, run, "em", progress=True)  # decomp's own metric too
    assert "rows scored: 100%" in capsys.readouterr().err
    decomp.evaluate(ROWS, run, lambda answer, gold: 1.0)  # the default, outside a kernel and a terminal
    assert capsys.readouterr().err == ""


def test_what_cannot_be_evaluated_is_said(run, tmp_path):
    with pytest.raises(TypeError, match=re.escape("predictions are int; give a Run (Program.run_dataset or "
                                                  "decomp.open_run)")):
        decomp.evaluate(ROWS, 3)
    with pytest.raises(TypeError, match=re.escape("gold is one dict (a single row?); give a JSONL, CSV")):
        decomp.evaluate(ROWS[0], run)
    with pytest.raises(TypeError, match="gold row 1 is str"):
        decomp.evaluate([ROWS[0], "r1"], run)
    with pytest.raises(FileNotFoundError, match="predictions 'nope' does not exist"):
        decomp.evaluate(ROWS, "nope")
    with pytest.raises(FileNotFoundError, match="gold 'nope.jsonl' does not exist"):
        decomp.evaluate("nope.jsonl", run)
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        decomp.evaluate(ROWS, run, "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirError):
        decomp.evaluate(ROWS, tmp_path / "empty")
    with pytest.raises(ValueError, match="metric's timeout"):
        decomp.evaluate(ROWS, run, metric_timeout=0)
