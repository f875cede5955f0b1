"""Ctrl-C on `decomp run --input`: a real process sent SIGINT midway ends with one line on
stderr (the rows kept, the rows left, the command that resumes the run, quoted for the shell)
and exit status 130, not click's `Aborted!`; the printed command, run as printed, finishes the
rows. The run directory is named as given, or as the run chose it."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.runtime.interrupt_helpers import RESPONDER, interrupt, lines, run_printed

pytestmark = pytest.mark.slow

PROGRAM = 'handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)\nmain ask\n'
ROWS = 12
LINE = re.compile(r"interrupted: (\d+) of (\d+) rows kept in (.+), (\d+) left; resume with: (.+)")


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "prog.decomp").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "slow_replies.py").write_text(RESPONDER, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "question": f"q {i}", "answer": "ok"})
                                                 + "\n" for i in range(ROWS)), encoding="utf-8")
    return tmp_path


def _said(done) -> tuple[int, int, str, int, list[str]]:
    """The interrupt's line, which must be the last on stderr: kept, rows, run dir, left, command."""
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""  # no summary: the run did not end
    found = LINE.fullmatch(done.stderr.splitlines()[-1])
    assert found, done.stderr
    kept, rows, run_dir, left, command = found.groups()
    return int(kept), int(rows), run_dir, int(left), shlex.split(command)


def test_ctrl_c_says_what_is_kept_and_the_printed_command_finishes_the_run(tmp_path):
    folder = _folder(tmp_path)
    run = folder / "my runs" / "r1"  # a space: the command quotes it
    done = interrupt(["run", "prog.decomp", "--input", "rows.jsonl", "--run-dir", "my runs/r1", "--model",
                      "fake:slow_replies:reply", "--cache", "off", "--concurrency", "1", "--output", "out.jsonl",
                      "-v"], folder, lambda: run / "results.jsonl")
    kept, rows, run_dir, left, command = _said(done)
    assert (rows, run_dir) == (ROWS, "my runs/r1")
    assert 0 < kept < ROWS and kept + left == ROWS and kept == lines(run / "results.jsonl")
    # run.json gives the model, the cache and the concurrency; what it does not record is given again
    assert command == ["decomp", "run", "prog.decomp", "--input", "rows.jsonl", "--run-dir", "my runs/r1",
                       "--resume", "--output", "out.jsonl", "--verbose"]
    assert "'my runs/r1'" in done.stderr.splitlines()[-1]
    again = run_printed(shlex.join(command), folder)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["rows"] == ROWS and summary["failed"] == 0 and summary["sessions"] == 2
    assert lines(run / "results.jsonl") == ROWS and lines(folder / "out.jsonl") == ROWS


def test_the_line_names_the_run_directory_the_run_chose(tmp_path):
    folder = _folder(tmp_path)

    def results():
        found = sorted((folder / "runs").glob("*/results.jsonl"))
        return found[0] if found else None

    done = interrupt(["run", "prog.decomp", "--input", "rows.jsonl", "--model", "fake:slow_replies:reply",
                      "--cache", "off", "--concurrency", "1"], folder, results)
    kept, rows, run_dir, left, command = _said(done)
    chosen = results().parent
    assert run_dir == str(chosen.relative_to(folder)) and run_dir.startswith("runs/prog-rows-")
    assert command == ["decomp", "run", "prog.decomp", "--input", "rows.jsonl", "--run-dir", run_dir, "--resume"]
    again = run_printed(shlex.join(command), folder)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rows"] == ROWS and lines(chosen / "results.jsonl") == ROWS
