"""The command line's bounds on handler work: --max-row-handler-calls ends a fan-out bomb's row
(exit 3, the other rows answered), --handler-timeout ends a slow Python function's row, and
--max-handler-calls bounds the run."""
import json

from click.testing import CliRunner

from decomp.runtime.cli import main

HELPERS = '''import time

def four(query):
    return [] if query == "stop" or len(query) >= 8 else [query + c for c in "abcd"]

def slow(query):
    time.sleep(3 if query == "slow" else 0)
    return query.upper()
'''
BOMB = '''handler four = python(function="helpers_bounds:four")
program bomb(question) with max_depth = 50 {
    QS: [four] #question
    QS: (foreach) [bomb] #1
}
main bomb
'''


def _files(tmp_path, program: str, questions: list[str]):
    (tmp_path / "helpers_bounds.py").write_text(HELPERS)
    (tmp_path / "p.decomp").write_text(program)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    return tmp_path / "p.decomp", data


def _run(tmp_path, program, data, *flags):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(out),
                                       "--cache", "off", *flags])
    lines = {r["index"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    return result, lines


def test_a_fan_out_bomb_ends_its_row_at_the_row_handler_call_budget(tmp_path):
    program, data = _files(tmp_path, BOMB, ["stop", "x", "stop"])
    result, lines = _run(tmp_path, program, data, "--max-row-handler-calls", "200")
    assert result.exit_code == 3, result.output
    assert lines[0]["answer"] == [] and lines[2]["answer"] == []
    assert "handler calls for this row reached 200" in lines[1]["error"]


def test_the_run_handler_call_budget_bounds_the_whole_run(tmp_path):
    program, data = _files(tmp_path, BOMB, ["x", "y"])
    result, lines = _run(tmp_path, program, data, "--max-handler-calls", "50")
    assert result.exit_code == 3, result.output
    assert all("budget exhausted" in line["error"] for line in lines.values())


def test_handler_timeout_ends_the_slow_row_only(tmp_path):
    program, data = _files(tmp_path, 'handler up = python(function="helpers_bounds:slow")\nmain up\n',
                           ["fast", "slow", "quick"])
    result, lines = _run(tmp_path, program, data, "--handler-timeout", "0.5")
    assert result.exit_code == 3, result.output
    assert lines[0]["answer"] == "FAST" and lines[2]["answer"] == "QUICK"
    assert "time limit of 0.5 s" in lines[1]["error"] and "--handler-timeout" in lines[1]["error"]


def test_bad_bounds_are_usage_errors(tmp_path):
    program, data = _files(tmp_path, BOMB, ["x"])
    for flags in (["--handler-timeout", "0"], ["--max-row-handler-calls", "0"], ["--max-memory", "0"]):
        result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), *flags])
        assert result.exit_code == 2, (flags, result.output)
