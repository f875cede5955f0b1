"""Ctrl-C on `decomp optimize` (a real process sent SIGINT while the teacher runs): one line on
stderr, the rows the teacher's run kept and left and the command that resumes the optimisation
(the same one, without --force), and exit status 130; the printed command finishes it."""
from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.learning.optimize.optimize_helpers import letter_rows
from tests.runtime.interrupt_helpers import RESPONDER, interrupt, lines, run_printed

pytestmark = pytest.mark.slow

LINE = re.compile(r"interrupted: (\d+) of (\d+) rows of the teacher on --train kept in (.+), (\d+) left; "
                  r"resume with: (.+)")


def test_ctrl_c_while_the_teacher_runs_says_what_is_kept_and_how_to_resume(tmp_path):
    letter_rows(tmp_path)  # train.jsonl (10 rows), dev.jsonl (6)
    (tmp_path / "slow_replies.py").write_text(RESPONDER, encoding="utf-8")
    args = ["optimize", "decomp/letter_cat_llm", "--train", "train.jsonl", "--dev", "dev.jsonl", "--out", "out",
            "--model", "fake:slow_replies:oracle", "--candidates", "1", "--concurrency", "1", "--force", "-q"]
    teacher = tmp_path / "out" / ".optimize" / "teacher-1"
    done = interrupt(args, tmp_path, lambda: teacher / "results.jsonl", at_least=1)
    assert done.returncode == 130, done.stderr
    assert "Aborted!" not in done.stderr and "Traceback" not in done.stderr and done.stdout == ""
    found = LINE.fullmatch(done.stderr.splitlines()[-1])
    assert found, done.stderr
    kept, rows, where, left, command = found.groups()
    assert (int(rows), where) == (10, "out/.optimize/teacher-1")
    assert 0 < int(kept) == lines(teacher / "results.jsonl") < 10 and int(kept) + int(left) == 10
    words = shlex.split(command)
    assert words[:3] == ["decomp", "optimize", "decomp/letter_cat_llm"] and "--force" not in words
    given = {"--train": "train.jsonl", "--dev": "dev.jsonl", "--out": "out", "--model": "fake:slow_replies:oracle",
             "--candidates": "1", "--concurrency": "1"}
    rest = [w for w in words[3:] if w != "--quiet"]  # every option given again, in the command's order
    assert words.count("--quiet") == 1 and dict(zip(rest[::2], rest[1::2])) == given and len(rest) == 12
    again = run_printed(command, tmp_path)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["dev_score"] == 1.0 and (tmp_path / "out" / "report.json").is_file()
    assert lines(teacher / "results.jsonl") == 10
