"""One metric signature everywhere (docs/runs.md, "The metric function"): `function(row, answer,
trace)`, or the two-argument `function(prediction, gold)` per gold alternative, decided by the
function's parameters; the same in `decomp eval`, `decomp compare`, `decomp run --input` (the
program's `metric`, a `module:function` too), `decomp optimize` and the Python API, where a
function may be given itself."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import decomp
from decomp import FakeModel
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.checker import PAIR_FORM, ROW_FORM, metric_form
from decomp.runtime.cli import main
from decomp.runtime.scoring.compare import Settings, compare_runs
from decomp.runtime.storage.datasets import Row
from decomp.runtime.scoring.evaluation import evaluate_files
from decomp.runtime.scoring.metric_calls import MetricError
from decomp.runtime.scoring.metrics import RowToScore, Scorer, metric_name
from decomp.learning.optimize.metrics import row_metric

PROGRAM = 'handler ask = prompt(text="Q: x\\nA: y\\n")\n{metric}main ask\n'
ROWS = [{"id": "q1", "question": "Capital of France?", "answer": "Paris", "topic": "geo"},
        {"id": "q2", "question": "Capital of Japan?", "answer": "Tokyo", "topic": "geo"},
        {"id": "q3", "question": "Capital of Peru?", "answer": "Lima", "topic": "geo"}]
FAKE = FakeModel(mapping={"France": "Paris", "Japan": "Tokyo", "Peru": "Tokyo"})
# A metric of each form. `close` scores 1 only when it saw the whole row, a trace and the answer.
METRICS = '''
def close(row, answer, trace):
    seen = row["topic"] == "geo" and isinstance(trace, dict) and trace["kind"] == "row"
    return float(seen and str(answer).lower() == str(row["answer"]).lower())

def pair(prediction, gold):
    return float(str(prediction).lower() == gold[0].lower())

def untraced(row, answer, trace=None):
    return float(trace is None and answer == row["answer"])

def neither(prediction):
    return 1.0
'''


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    (tmp_path / "sig_metrics.py").write_text(METRICS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def run(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric=""))
    run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "r1", output=folder / "out.jsonl")
    return folder / "r1"


# ---- the rule
def _row(row, answer, trace): ...
def _pair(prediction, gold): ...
def _row_default(row, answer, trace=None): ...
def _star(*args): ...
def _pair_default(prediction, gold=None): ...
def _four(a, b, c, d): ...
def _keyword(prediction, gold, *, strict): ...


@pytest.mark.parametrize("function, form", [(_row, ROW_FORM), (_pair, PAIR_FORM), (_row_default, ROW_FORM),
                                            (_star, ROW_FORM), (lambda a, b: 0.0, PAIR_FORM)])
def test_the_form_is_decided_by_the_parameters(function, form):
    assert metric_form(function, "m") == form


@pytest.mark.parametrize("function", [_pair_default, _four, _keyword, len])
def test_a_function_of_neither_form_is_a_worded_error_naming_both(function):
    with pytest.raises(ValueError) as err:
        metric_form(function, "mine:f")
    message = str(err.value)
    assert message.startswith("metric 'mine:f': ") and ROW_FORM in message and PAIR_FORM in message


# ---- decomp eval: both forms, from the command line
def test_eval_calls_a_row_metric_with_the_row_the_answer_and_the_trace(run):
    done = CliRunner().invoke(main, ["eval", "--gold", "rows.jsonl", "--pred", str(run),
                                     "--metric", "sig_metrics:close"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"metric": "sig_metrics:close", "score": pytest.approx(2 / 3), "n": 3,
                                       "missing": 0}
    assert "warning" not in done.output


def test_eval_calls_a_two_argument_metric_per_gold_alternative(run):
    done = CliRunner().invoke(main, ["eval", "--gold", "rows.jsonl", "--pred", str(run),
                                     "--metric", "sig_metrics:pair"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["score"] == pytest.approx(2 / 3)


def test_eval_of_a_predictions_file_gives_no_trace(run, folder):
    summary, warnings = evaluate_files(folder / "rows.jsonl", folder / "out.jsonl", "sig_metrics:untraced")
    assert summary["score"] == pytest.approx(2 / 3) and not warnings
    summary, _ = evaluate_files(folder / "rows.jsonl", run / "results.jsonl", "sig_metrics:close")
    assert summary["score"] == pytest.approx(2 / 3)  # the results.jsonl of a run: its traces are read


def test_eval_refuses_a_function_of_neither_form_in_words(run):
    done = CliRunner().invoke(main, ["eval", "--gold", "rows.jsonl", "--pred", str(run), "--metric",
                                     "sig_metrics:neither"])
    assert done.exit_code == 1
    assert "metric 'sig_metrics:neither': neither(prediction) takes neither form" in done.output
    assert "Traceback" not in done.output


def test_eval_takes_a_function_in_python(run, folder):
    seen = []

    def mine(row, answer, trace):  # a closure: no worker can import it, it runs in a thread
        seen.append((row["id"], row["question"], answer, trace["kind"]))
        return float(answer == row["answer"])

    summary, _ = evaluate_files(folder / "rows.jsonl", run, metric=mine)
    assert summary["score"] == pytest.approx(2 / 3) and summary["metric"] == metric_name(mine)
    assert sorted(seen)[0] == ("q1", "Capital of France?", "Paris", "row")
    summary, _ = evaluate_files(folder / "rows.jsonl", run, metric=lambda answer, gold: float(answer == gold[0]))
    assert summary["score"] == pytest.approx(2 / 3)


# ---- the program's `metric module:function`, decomp run and eval
def test_a_programs_metric_names_a_function_of_its_folder(folder, tmp_path_factory, monkeypatch):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric="metric sig_metrics:close\n"))
    done = run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "r2")
    assert [r["score"] for r in done.records()] == [1.0, 1.0, 0.0]
    assert done.summary["metric"] == "sig_metrics:close"
    assert json.loads((folder / "r2" / "run.json").read_text())["metric"] == "sig_metrics:close"
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)  # the run's own metric is imported from the program's folder
    evaluated = CliRunner().invoke(main, ["eval", "--gold", str(folder / "rows.jsonl"), "--pred", str(folder / "r2")])
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["metric"] == "sig_metrics:close"
    assert json.loads(evaluated.stdout)["score"] == pytest.approx(2 / 3)


def test_an_untrusted_metric_module_is_a_positioned_error_of_check_and_run(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric="metric json:dumps\n"))
    runner = CliRunner()
    for args in (["check", str(program)], ["run", str(program), "--input", "rows.jsonl", "--model", "fake:x.json"]):
        done = runner.invoke(main, args)
        assert done.exit_code == 1, done.output
        assert f"{program}:2:8: metric 'json:dumps': python function 'json:dumps' is not allowed" in done.output
        assert "--trust json" in done.output and "Traceback" not in done.output
    assert not (folder / "runs").exists()


def test_a_programs_metric_of_neither_form_is_an_error_at_its_name(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric="metric sig_metrics:neither\n"))
    done = CliRunner().invoke(main, ["check", "--trust-folder", str(folder), str(program)])
    assert done.exit_code == 1
    assert done.output.startswith(f"{program}:2:8: metric 'sig_metrics:neither': neither(prediction) takes neither")


def test_check_of_an_untrusted_folder_does_not_import_the_metric(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric="metric sig_metrics:neither\n"))
    done = CliRunner().invoke(main, ["check", str(program)])
    assert done.exit_code == 0 and "metric 'sig_metrics:neither' was not imported" in done.output


# ---- the Python API: a function given itself
def test_decomp_run_takes_a_metric_function(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric=""))

    def strict(row, answer, trace):
        return float(answer == row["answer"] and trace["kind"] == "row")

    done = decomp.load(str(program), model=FAKE).run_dataset(str(folder / "rows.jsonl"), run_dir=folder / "nb",
                                                             metric=strict)
    assert done.summary["metric"] == metric_name(strict) and done.summary["score"] == pytest.approx(2 / 3)
    loaded = decomp.load(str(program), model=FAKE, metric="sig_metrics:pair")
    again = loaded.run_dataset(ROWS, run_dir=folder / "nb2")
    assert again.summary["metric"] == "sig_metrics:pair" and again.summary["score"] == pytest.approx(2 / 3)
    with pytest.raises(TypeError, match="metric"):  # a dataset's: one question has no gold to score
        loaded.run("Capital of France?", metric=strict)


def test_run_dataset_refuses_a_bad_metric_before_making_the_run_directory(folder):
    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric=""))
    with pytest.raises(ValueError, match="takes neither form"):
        run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "bad", metric=lambda x: 1.0)
    assert not (folder / "bad").exists()


def test_a_resume_with_another_metric_is_refused_before_a_row_mixes_scores(folder):
    from decomp.runtime.storage.layout import RunDirError

    program = folder / "p.decomp"
    program.write_text(PROGRAM.format(metric=""))
    run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "mixed", metric="sig_metrics:pair",
                limit=1)
    with pytest.raises(RunDirError, match="scored its rows with the metric sig_metrics:pair; resuming with em"):
        run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "mixed", resume=True)
    done = run_dataset(program, folder / "rows.jsonl", model=FAKE, run_dir=folder / "mixed", resume=True,
                       metric="sig_metrics:pair")
    assert done.to_dict()["metric"] == "sig_metrics:pair"


# ---- compare and optimize call it the same way
def test_compare_calls_a_row_metric_with_the_input_row_and_trace(run, folder):
    program = folder / "p.decomp"
    run_dataset(program, folder / "rows.jsonl", model=FakeModel(default="Tokyo"), run_dir=folder / "r3")
    result = compare_runs([run, folder / "r3"], metrics=["sig_metrics:close", lambda p, g: float(p == g[0])],
                          settings=Settings(resamples=99))
    close, pair = result["comparisons"]
    assert close["metric"] == "sig_metrics:close" and "metric_errors" not in result
    assert [s["score"] for s in close["scores"]] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]
    assert [s["score"] for s in pair["scores"]] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]


def test_optimize_takes_a_two_argument_metric_and_a_row_without_gold_fails_in_words(folder):
    metric = row_metric("sig_metrics:pair", folder)
    rows = [Row(0, "a", {"question": "x"}, None, "Paris"), Row(1, "b", {"question": "y"}, None, None)]
    records = [{"id": "a", "answer": "paris"}, {"id": "b", "answer": "x"}]
    (ok, _), (none, why) = metric.score_rows([(row, record, None) for row, record in zip(rows, records)])
    assert ok == 1.0 and none is None
    assert why.startswith("row b has no gold answer, and metric 'sig_metrics:pair' compares the answer with the gold")
    closed = row_metric("sig_metrics:close", folder)
    assert closed.score_rows([(rows[0], {"id": "a", "answer": "Paris", "error": "boom"}, None)]) == [(0.0, None)]


def test_a_scorer_in_a_worker_keeps_the_rule(folder):
    """An importable function runs contained, in a worker: its form is decided here, the worker
    calls it with what the form says."""
    pair = Scorer("sig_metrics:pair", folder)
    assert pair.score(RowToScore("PARIS", [("x",), ("paris",)], label="row 1")) == 1.0
    with pytest.raises(MetricError, match="row 2 has no gold answer"):
        pair.score(RowToScore("PARIS", None, label="row 2"))
    row = Scorer("sig_metrics:untraced", folder)
    assert row.score(RowToScore("Lima", "Lima", {"id": "3", "answer": "Lima"})) == 1.0


def test_the_issues_commands_work_from_a_shell(folder):
    """`decomp run prog.decomp --input rows.jsonl --model fake:...`, then `decomp eval --metric
    module:function` with a (row, answer, trace) function and a (prediction, gold) one."""
    (folder / "prog.decomp").write_text(PROGRAM.format(metric=""))
    (folder / "replies.py").write_text('def answer(request):\n    return "Paris" if "France" in request.prompt '
                                       'else "Tokyo"\n')
    decomp_exe = str(Path(sys.executable).parent / "decomp")

    def shell(*args):
        return subprocess.run([decomp_exe, *args], capture_output=True, text=True, cwd=folder, timeout=300)

    ran = shell("run", "prog.decomp", "--input", "rows.jsonl", "--model", "fake:replies:answer", "--run-dir", "runs/r1")
    assert ran.returncode == 0, ran.stderr
    for name in ("sig_metrics:close", "sig_metrics:pair"):
        done = shell("eval", "--gold", "rows.jsonl", "--pred", "runs/r1", "--metric", name)
        assert done.returncode == 0 and not done.stderr, done.stderr
        assert json.loads(done.stdout)["score"] == pytest.approx(2 / 3)
