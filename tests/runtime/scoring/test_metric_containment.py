"""A metric of the user's (a plugin's, a `module:function`) is contained like a python handler's
function: it runs in a worker process under a deadline (`--metric-timeout`) and a memory cap
(`--metric-memory`), and a loop, `SystemExit(3)`, `KeyboardInterrupt`, a memory overrun, a dead
worker or a NaN becomes that row's worded metric error; the other rows are scored and the
command finishes: `decomp eval`, `decomp compare` and a run's own scores (`decomp run`).
`decomp optimize`: tests/learning/optimize/test_optimize_metric_containment.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.handlers import plugins
from decomp.handlers.registry import Registry
from decomp.runtime.cli import main
from decomp.runtime.scoring.metric_calls import ContainedMetric, MetricError, MetricLimits
from decomp.runtime.scoring.metrics import Scorer, score_predictions

from tests.runtime.scoring.compare_helpers import make_run

#: A metric that misbehaves on some predictions, as the prediction says, and else is exact match.
JUDGE = '''
import os

def judge(prediction, gold):
    if prediction == "loop":
        while True:
            pass
    if prediction == "exit":
        raise SystemExit(3)
    if prediction == "interrupt":
        raise KeyboardInterrupt
    if prediction == "hog":
        return len(bytearray(2 * 2**30))
    if prediction == "die":
        os._exit(9)
    if prediction == "nan":
        return float("nan")
    if prediction == "word":
        return "yes"
    return float(prediction == gold[0])
'''

PLUGIN = JUDGE + '''
from decomp import hookimpl

@hookimpl
def register_metrics(register):
    register("judge", judge)
'''

BAD = ["loop", "exit", "interrupt", "hog", "die", "nan", "word"]
WORDED = {
    "loop": "ran longer than its time limit of 1 s on the prediction \"loop\"",
    "exit": "failed on the prediction \"exit\" (gold [\"exit\"]): SystemExit: 3",
    "interrupt": "failed on the prediction \"interrupt\" (gold [\"interrupt\"]): KeyboardInterrupt",
    "hog": "used more than its memory limit of 64 MiB on the prediction \"hog\"",
    "die": "exited with code 9",
    "nan": "returned nan, not a finite number",
    "word": "returned 'yes', not a number",
}


def _rows(folder: Path) -> tuple[Path, Path]:
    """Gold and predictions: 4 right answers, 2 wrong ones, and each misbehaving prediction."""
    good = [(f"ok{i}", "right", "right") for i in range(4)] + [(f"no{i}", "wrong", "right") for i in range(2)]
    rows = good + [(word, word, word) for word in BAD]
    gold, pred = folder / "gold.jsonl", folder / "pred.jsonl"
    gold.write_text("".join(json.dumps({"id": i, "answer": g}) + "\n" for i, _, g in rows))
    pred.write_text("".join(json.dumps({"id": i, "answer": p}) + "\n" for i, p, _ in rows))
    return gold, pred


def _strict(text: str):
    """JSON as the standard has it: NaN and the infinities are no JSON."""
    def refuse(word):
        raise ValueError(f"not JSON: {word}")
    return json.loads(text, parse_constant=refuse)


def _check_errors(messages: list[str]) -> None:
    for word, said in WORDED.items():
        found = [m for m in messages if f"metric 'judge:judge'" in m and f'"{word}"' in m]
        assert len(found) == 1 and said in found[0], (word, messages)


def test_eval_names_each_rows_metric_error_and_scores_the_rest(tmp_path, monkeypatch):
    gold, pred = _rows(tmp_path)
    (tmp_path / "judge.py").write_text(JUDGE)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    done = CliRunner().invoke(main, ["eval", "--gold", str(gold), "--pred", str(pred), "--metric", "judge:judge",
                                     "--metric-timeout", "1", "--metric-memory", "64"])
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < 60
    summary = _strict(done.stdout)
    assert summary == {"metric": "judge:judge", "score": 4 / 13, "n": 13, "missing": 0, "metric_errors": 7}
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: row ")]
    assert len(warnings) == 7
    _check_errors(warnings)


def test_compare_rescoring_with_a_bad_metric_finishes_with_worded_errors(tmp_path, monkeypatch):
    answers = ["right", "right", "wrong"] + BAD
    records = [{"id": f"r{i}", "answer": a, "gold": [a if a in BAD else "right"], "score": 1.0, "outcome": "ok"}
               for i, a in enumerate(answers)]
    a, b = make_run(tmp_path, "a", records), make_run(tmp_path, "b", records)
    (tmp_path / "judge.py").write_text(JUDGE)
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(main, ["compare", str(a), str(b), "--metric", "judge:judge", "--json",
                                     "--resamples", "99", "--metric-timeout", "1", "--metric-memory", "64"])
    assert done.exit_code == 0, done.output
    result = _strict(done.stdout)
    errors = result["metric_errors"]
    assert {(e["run"], e["metric"]) for e in errors} == {("a", "judge:judge"), ("b", "judge:judge")}
    assert len(errors) == 14
    _check_errors([e["error"] for e in errors if e["run"] == "a"])
    scores = result["comparisons"][0]["scores"]
    assert [s["score"] for s in scores] == [2 / 10, 2 / 10] and [s["n"] for s in scores] == [10, 10]
    assert done.stderr.count("warning: a row r") == 7 and "(scored 0)" in done.stderr
    table = CliRunner().invoke(main, ["compare", str(a), str(b), "--metric", "judge:judge", "--resamples", "99",
                                      "--metric-timeout", "1", "--metric-memory", "64"])
    assert table.exit_code == 0, table.output
    assert "metric errors: 14 row(s) scored 0 (each named on stderr):" in table.stdout
    assert "  A: judge:judge failed on 7 row(s)" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_a_runs_own_plugin_metric_ends_only_its_rows_in_error(tmp_path):
    """`metric judge` of a plugin in `decomp run`: every misbehaving row ends in its worded error,
    the others are scored, the summary is written and the run exits 3 (rows in error), not with
    the metric's own SystemExit code."""
    (tmp_path / "judgeplug.py").write_text(PLUGIN)
    (tmp_path / "helpers.py").write_text("def same(query):\n    return query\n")
    (tmp_path / "p.decomp").write_text('handler up = python(function="helpers:same")\nmetric judge\nmain up\n')
    rows = ["right", "right", "wrong"] + BAD
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": f"r{i}", "question": q, "answer": q if q in BAD else "right"}) + "\n"
        for i, q in enumerate(rows)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    command = [str(Path(sys.executable).parent / "decomp"), "run", "p.decomp", "--plugin", "judgeplug", "--input",
               "data.jsonl", "--run-dir", "run", "--metric-timeout", "1", "--metric-memory", "64"]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    assert run.returncode == 3, run.stderr
    assert "error: 7 of 10 row(s) ended in an error" in run.stderr
    summary = _strict(run.stdout.strip().splitlines()[-1])
    assert (summary["rows"], summary["failed"], summary["metric"], summary["score"]) == (10, 7, "judge", 0.2)
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    errors = {r["answer"]: r["error"] for r in records if "error" in r}
    assert set(errors) == set(BAD)
    for word, said in WORDED.items():
        assert errors[word].startswith("metric 'judge' ") and said.replace("'judge:judge'", "'judge'") in errors[word]
    assert all(r["score"] == 0.0 for r in records if "error" in r)


@pytest.fixture
def fresh_plugins(monkeypatch):
    """The process's plugins and default registry as new, given back as they were after the test."""
    monkeypatch.setattr(plugins, "_loaded", None)
    registry = Registry()
    monkeypatch.setattr(plugins, "default_registry", registry)
    monkeypatch.setattr(plugins.load, "__defaults__", (registry,))
    return registry


def test_a_metric_no_worker_can_import_runs_in_a_thread_under_the_deadline(fresh_plugins):
    """A lambda a plugin registered cannot be imported by a worker: it runs in a thread, where
    `SystemExit` is still that row's error and a loop is abandoned at the deadline."""
    module = types.ModuleType("lambdaplug")
    exec(textwrap.dedent('''
        from decomp import hookimpl
        def _exit():
            raise SystemExit(3)
        def _loop():  # past any deadline here (a thread cannot be stopped: it is abandoned)
            import time
            time.sleep(3)
        @hookimpl
        def register_metrics(register):
            register("lam", lambda p, g: _exit() if p == "exit" else _loop() if p == "loop" else float(p == g[0]))
    '''), module.__dict__)
    assert plugins.add_plugin_module(module) == []
    plugins.load()
    errors: list[str] = []
    result = score_predictions({"1": "a", "2": "b", "3": "c"}, {"1": "a", "2": "exit", "3": "loop"}, "lam",
                               MetricLimits(timeout=0.5), errors=errors)
    assert result == {"metric": "lam", "score": 1 / 3, "n": 3, "missing": 0, "metric_errors": 2}
    assert "row 2: metric 'lam' failed on the prediction \"exit\" (gold [\"b\"]): SystemExit: 3" in errors
    assert any(e.startswith("row 3: metric 'lam' ran longer than its time limit of 0.5 s") for e in errors)


def test_one_bad_row_in_a_batch_fails_only_itself(tmp_path, monkeypatch):
    """Rows go many to a request; a batch that fails as a whole (here: one row loops) is scored
    again row by row, so 99 rows keep their scores."""
    (tmp_path / "judge.py").write_text(JUDGE)
    monkeypatch.chdir(tmp_path)
    gold = {str(i): [["right"]] for i in range(100)}
    preds = {str(i): "right" for i in range(100)}
    preds["37"] = "loop"
    errors: list[str] = []
    result = score_predictions(gold, preds, "judge:judge", MetricLimits(timeout=1), errors=errors)
    assert (result["score"], result["metric_errors"]) == (0.99, 1)
    assert len(errors) == 1 and errors[0].startswith("row 37: metric 'judge:judge' ran longer than")


def test_a_contained_call_is_one_rows_error_from_the_api(tmp_path, monkeypatch):
    (tmp_path / "judge.py").write_text(JUDGE)
    monkeypatch.chdir(tmp_path)
    scorer = Scorer("judge:judge", limits=MetricLimits(timeout=1))
    assert scorer.best("a", [("b",), ("a",)]) == 1.0
    with pytest.raises(MetricError, match=r"failed on the prediction \"exit\" .*SystemExit: 3"):
        scorer.best("exit", [("x",)])
    with pytest.raises(ValueError, match="must be a number > 0 seconds"):
        MetricLimits(timeout=float("nan"))
    assert isinstance(ContainedMetric("judge:judge", len).limits, MetricLimits)


@pytest.mark.parametrize("option", ["--metric-timeout", "--metric-memory"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_metric_limit_that_is_no_finite_number_is_a_usage_error(tmp_path, option, value):
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    (tmp_path / "d.jsonl").write_text('{"id": "1", "question": "q", "gold": "a"}\n', encoding="utf-8")
    done = CliRunner().invoke(main, ["run", "decomp/letter_cat", "--input", str(tmp_path / "d.jsonl"),
                                     "--model", "fake:x", option, value, "--run-dir", str(tmp_path / "r")])
    assert done.exit_code == 2, done.output
    assert f"Invalid value for '{option}'" in done.output and done.exception is None or \
        isinstance(done.exception, SystemExit)
    assert not (tmp_path / "r").exists()
