"""A program's `metric`: dataset runs score rows with gold by it, run.json and summary.json record
it, and `decomp eval --pred RUN` uses it unless --metric is given (a plain JSONL file: em)."""
import json

import pytest
from click.testing import CliRunner

from decomp import FakeModel
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.cli import main
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.scoring.evaluation import evaluate_files, run_metric

# The model answers lists as text, in another order than the gold: exact match (one span against
# two) scores 0, set_em 1, f1 in between (0.33: one predicted span covers one of two gold spans).
PROGRAM = 'handler ask = prompt(text="Q: x\\nA: y\\n")\n{metric}main ask\n'
ROWS = [{"id": "r1", "question": "Who?", "answer": ["Ann", "Bob"]},
        {"id": "r2", "question": "What?", "answer": ["tea"]}]
FAKE = FakeModel(mapping={"Who?": "Bob, Ann", "What?": "coffee"})


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    return path


def _program(tmp_path, metric: str | None):
    path = tmp_path / f"p_{metric or 'none'}.decomp"
    path.write_text(PROGRAM.format(metric=f"metric {metric}\n" if metric else ""))
    return path


@pytest.mark.parametrize("metric, scores", [(None, [0.0, 0.0]), ("em", [0.0, 0.0]), ("set_em", [1.0, 0.0]),
                                            ("f1", [0.33, 0.0])])
def test_rows_are_scored_with_the_program_metric(tmp_path, data, metric, scores):
    done = run_dataset(_program(tmp_path, metric), data, model=FAKE, run_dir=tmp_path / "run")
    assert [r["score"] for r in done.records()] == scores
    assert done.score == sum(scores) / 2
    assert done.summary["metric"] == (metric or "em")
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["metric"] == (metric or "em")
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["metric"] == (metric or "em")
    assert RunDir.open(tmp_path / "run").metric == (metric or "em")


def test_a_row_that_errors_scores_zero_whatever_the_metric(tmp_path, data):
    program = tmp_path / "p.decomp"
    program.write_text('handler ask = regex(pattern="nothing here")\nmetric set_em\nmain ask\n')
    done = run_dataset(program, data, run_dir=tmp_path / "run")
    assert [r["score"] for r in done.records()] == [0.0, 0.0] and done.failed == 2


def test_eval_uses_the_run_metric_unless_told(tmp_path, data):
    out = tmp_path / "out.jsonl"
    run_dataset(_program(tmp_path, "set_em"), data, model=FAKE, run_dir=tmp_path / "run", output=out)
    runner = CliRunner()

    def evaluate(*args):
        result = runner.invoke(main, ["eval", "--gold", str(data), *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    assert evaluate("--pred", str(tmp_path / "run")) == {"metric": "set_em", "score": 0.5, "n": 2, "missing": 0}
    assert evaluate("--pred", str(tmp_path / "run" / "results.jsonl"))["metric"] == "set_em"
    assert evaluate("--pred", str(tmp_path / "run"), "--metric", "em")["score"] == 0.0      # --metric overrides
    assert evaluate("--pred", str(tmp_path / "run"), "--metric", "f1")["metric"] == "f1"
    assert evaluate("--pred", str(out)) == {"metric": "em", "score": 0.0, "n": 2, "missing": 0}  # plain JSONL: em


def test_a_run_written_before_metrics_were_recorded_reads_as_em(tmp_path, data):
    run_dataset(_program(tmp_path, "set_em"), data, model=FAKE, run_dir=tmp_path / "run")
    manifest_path = tmp_path / "run" / "run.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["metric"]
    manifest_path.write_text(json.dumps(manifest))
    assert RunDir.open(tmp_path / "run").metric == "em"
    assert run_metric(tmp_path / "run") == "em"
    assert evaluate_files(data, tmp_path / "run")[0]["metric"] == "em"


def test_run_metric_of_other_files_is_none(tmp_path, data):
    assert run_metric(data) is None
    assert run_metric(tmp_path) is None                     # a folder that holds no run
    (tmp_path / "results.jsonl").write_text("")
    assert run_metric(tmp_path / "results.jsonl") is None   # named like a run's, but no run.json beside it


def test_evaluate_files_refuses_an_unknown_metric(tmp_path, data):
    with pytest.raises(ValueError, match="unknown metric 'acc'"):
        evaluate_files(data, data, "acc")


def test_the_run_command_prints_the_metric_in_its_summary(tmp_path, data):
    fake = tmp_path / "answers.json"
    fake.write_text(json.dumps({"mapping": {"Who?": "Bob, Ann", "What?": "tea"}}))
    result = CliRunner().invoke(main, ["run", str(_program(tmp_path, "set_em")), "--input", str(data),
                                       "--model", f"fake:{fake}", "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert (summary["score"], summary["metric"], summary["scored_rows"]) == (1.0, "set_em", 2)


def test_trace_show_names_a_metric_other_than_exact_match(tmp_path, data):
    run_dataset(_program(tmp_path, "set_em"), data, model=FAKE, run_dir=tmp_path / "run")
    result = CliRunner().invoke(main, ["trace", "show", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "score 0.500 (set_em) over 2" in result.output
