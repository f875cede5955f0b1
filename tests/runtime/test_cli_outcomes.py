"""`decomp run` and outcomes: `--field` values read as JSON, a failed outcome's exit status and
messages, environment summaries on stderr."""
from __future__ import annotations

import json

import pytest

from decomp import Environment, StepResult
from decomp.handlers.plugins import load as load_plugins
from tests.helpers import invoke

FIELD = '''
handler say = python(function="capwords")
program p(question, dmax) {
    if #dmax == 3 {
        QS: [say] a number
    } else {
        QS: [say] not the number
    }
}
main p
'''


@pytest.fixture
def field_program(tmp_path):
    path = tmp_path / "field.decomp"
    path.write_text(FIELD, encoding="utf-8")
    return path


@pytest.mark.parametrize("value, answer", [
    ("3", "A Number"),              # JSON: the number 3
    ("3.0", "A Number"),            # JSON: 3.0 == 3
    ('"3"', "Not The Number"),      # JSON: the string "3"
    ("three", "Not The Number"),    # not JSON: the text
    ("[3]", "Not The Number"),
])
def test_field_values_are_json_when_they_are_json_with_question(field_program, value, answer):
    result = invoke("run", field_program, "-q", "x", "--field", f"dmax={value}", "--cache", "off")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == answer


def test_field_values_are_json_with_input(field_program, tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "question": "x", "dmax": "3"},   # the row's own field is text...
        {"id": "b", "question": "y"},
    ]), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke("run", field_program, "--input", data, "--field", "dmax=3", "--output", out,
                    "--run-dir", tmp_path / "run", "--cache", "off")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    # ... and --field overrides it with the number
    assert [(r["id"], r["answer"], r["outcome"]) for r in records] == [("a", "A Number", "ok"), ("b", "A Number", "ok")]
    run_json = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run_json["options"]["fields"] == {"dmax": 3}
    summary = json.loads(result.stdout)
    assert summary["success_rate"] == 1.0 and summary["failed_outcome"] == 0


def test_a_field_without_equals_is_a_usage_error(field_program):
    result = invoke("run", field_program, "-q", "x", "--field", "dmax")
    assert result.exit_code == 2 and "expected NAME=VALUE" in result.output


# ------------------------------------------------------------------ failed outcomes and environments
class Coin(Environment):
    def __init__(self, fields):
        self.lucky, self.flips = fields.get("lucky") is True, 0

    def step(self, action):
        self.flips += 1
        return StepResult("heads" if self.lucky else "tails")

    def failed(self, observation):
        return observation == "tails"

    def summary(self):
        return {"success": self.lucky, "flips": self.flips}


COIN = '''
handler coin = environment(name="cli_test_coin")
program p(question) {
    QS: [coin] flip
}
main p
'''


@pytest.fixture
def coin_program(tmp_path, monkeypatch):
    monkeypatch.setitem(load_plugins().environments, "cli_test_coin", Coin)
    path = tmp_path / "coin.decomp"
    path.write_text(COIN, encoding="utf-8")
    return path


def test_a_failed_outcome_prints_the_answer_and_exits_1(coin_program):
    result = invoke("run", coin_program, "-q", "x", "--cache", "off")
    assert result.exit_code == 1
    assert result.stdout == "tails\n"
    assert "outcome: failed" in result.stderr
    assert "error:" not in result.stderr
    assert 'environment [coin]: {"success": false, "flips": 1}' in result.stderr


def test_an_ok_outcome_exits_0_with_the_environment_summary_on_stderr(coin_program):
    result = invoke("run", coin_program, "-q", "x", "--field", "lucky=true", "--cache", "off")
    assert result.exit_code == 0, result.output
    assert result.stdout == "heads\n"
    assert result.stderr.strip() == 'environment [coin]: {"success": true, "flips": 1}'


def test_a_row_error_is_still_an_error_not_an_outcome(coin_program, monkeypatch):
    def broken(fields):
        raise RuntimeError("no coin today")

    monkeypatch.setitem(load_plugins().environments, "cli_test_coin", broken)
    result = invoke("run", coin_program, "-q", "x", "--cache", "off")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "error: [coin] environment" in result.stderr and "no coin today" in result.stderr
    assert "outcome: failed" not in result.stderr


def test_dataset_run_records_outcomes_and_environments(coin_program, tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "question": "x", "lucky": True}, {"id": "b", "question": "x", "lucky": False},
    ]), encoding="utf-8")
    result = invoke("run", coin_program, "--input", data, "--run-dir", tmp_path / "run", "--cache", "off")
    assert result.exit_code == 0, result.output  # failed outcomes are no failure of the run
    summary = json.loads(result.stdout)
    assert summary["failed"] == 0 and summary["failed_outcome"] == 1
    assert summary["success_rate"] == 0.5 and summary["env_success_rate"] == 0.5
    records = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in records}
    assert by_id["a"]["outcome"] == "ok" and by_id["b"]["outcome"] == "failed"
    assert by_id["b"]["answer"] == "tails"
    assert by_id["b"]["environment"] == {"coin": {"success": False, "flips": 1}}


TYPED = '''
handler calc = calculator(returns=list[int])
program p(question) {
    QS: [calc] 1 + 2
}
main p
'''


def test_a_typed_answer_that_does_not_fit_says_why(tmp_path):
    path = tmp_path / "typed.decomp"
    path.write_text(TYPED, encoding="utf-8")
    result = invoke("run", path, "-q", "x", "--cache", "off")
    assert result.exit_code == 1 and result.stdout == "3\n"
    assert "outcome: failed" in result.stderr and "reason: the answer '3' is not list[int]" in result.stderr
    data = tmp_path / "rows.jsonl"
    data.write_text('{"id": "a", "question": "x"}\n', encoding="utf-8")
    result = invoke("run", path, "--input", data, "--run-dir", tmp_path / "run", "--cache", "off")
    record = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert record["outcome"] == "failed" and record["reason"] == "the answer '3' is not list[int]"
