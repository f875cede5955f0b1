"""`decomp optimize` from the command line: registered through the plugin table, notes on
stderr, one summary line on stdout, errors as every command gives them."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from tests.learning.optimize.optimize_helpers import letter_rows, student

pytestmark = pytest.mark.network

MOCK_SERVER = {"responder": student}  # the `server` fixture (tests/conftest.py)


def _args(server, tmp_path, *more):
    train, dev = letter_rows(tmp_path)
    return ["optimize", "decomp/letter_cat_llm", "--train", str(train), "--dev", str(dev), "--out",
            str(tmp_path / "out"), "--model", "openai:student", "--teacher", "openai:teacher", "--base-url",
            server.base_url, "--cache-dir", str(tmp_path / "cache"), *more]


def test_the_command_prints_one_summary_line(server, tmp_path):
    result = CliRunner().invoke(main, _args(server, tmp_path, "--candidates", "2", "--max-demos", "3"))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["chosen"] != "zero-shot" and summary["dev_score"] > summary["zero_shot_dev_score"]
    assert all(n <= 3 for n in summary["demos"].values())
    assert summary["program"].endswith("letter_cat_llm.decomp") and summary["report"].endswith("report.json")
    assert "projected at most" in result.stderr and "chose " in result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["settings"]["max_demos"] == 3 and len(report["candidates"]) == 4


def test_quiet_prints_only_the_summary(server, tmp_path):
    result = CliRunner().invoke(main, _args(server, tmp_path, "--candidates", "0", "-q"))
    assert result.exit_code == 0, result.output
    assert result.stderr == "" and len(result.stdout.strip().splitlines()) == 1


def test_errors_are_one_message_and_status_1(server, tmp_path):
    result = CliRunner().invoke(main, _args(server, tmp_path, "--max-calls", "5"))
    assert result.exit_code == 1
    assert "--max-calls 5 is fewer than" in result.stderr.splitlines()[-1]
    result = CliRunner().invoke(main, _args(server, tmp_path, "--metric", "nonsense"))
    assert result.exit_code == 1 and "unknown metric 'nonsense'" in result.stderr


def test_the_command_is_listed_with_its_help():
    result = CliRunner().invoke(main, ["--help"])
    assert "optimize" in result.output
    result = CliRunner().invoke(main, ["optimize", "--help"])
    assert result.exit_code == 0 and "--max-demos" in result.output and "--teacher" in result.output


def test_every_option_reaches_the_search_and_a_second_run_resumes(server, tmp_path):
    flags = ["--candidates", "1", "--max-demos", "2", "--seed", "4", "--foreach-demos", "2", "--no-own-examples",
             "--no-prune", "--rounds", "2", "--teacher-temperature", "0.5", "--threshold", "0.5", "--metric", "set_em",
             "--max-calls", "2000"]
    result = CliRunner().invoke(main, _args(server, tmp_path, *flags))
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["settings"] == {"metric": "set_em", "threshold": 0.5, "candidates": 1, "max_demos": 2, "seed": 4,
                                  "foreach_demos": 2, "keep_examples": False, "rounds": 2,
                                  "teacher_temperature": 0.5, "max_calls": 2000, "prune": False}
    boot = tmp_path / "out" / ".optimize" / "candidates" / "01-bootstrapped" / "optimized" / "str_position.txt"
    shown = boot.read_text()  # without its own examples: only the two demonstrations
    assert "Knuth" not in shown and shown.count("Q: ") == 2
    assert len(report["bootstrap"]["rounds"]) in (1, 2) and report["candidates"][1]["complete"]
    again = CliRunner().invoke(main, _args(server, tmp_path, *flags))
    assert again.exit_code == 0 and "resuming the optimisation" in again.stderr
    forced = CliRunner().invoke(main, _args(server, tmp_path, *flags[:-2], "--force"))
    assert forced.exit_code == 0 and "resuming" not in forced.stderr
