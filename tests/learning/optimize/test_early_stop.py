"""`decomp optimize` stops early when zero-shot already scores the best the metric can give: no
other candidate can then be chosen (a tie goes to the fewest demonstrations, and zero-shot has
none), so none is scored, and the summary line, report.json and the notes say so. `--no-prune`
still scores every candidate in full."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from benchmarks.letter_cat_oracle import respond as oracle
from decomp.runtime.cli import main
from tests.learning.optimize.optimize_helpers import letter_rows

pytestmark = pytest.mark.network

MOCK_SERVER = {"responder": oracle}  # the `server` fixture: every model answers right, zero-shot scores 1.0


def _optimize(server, tmp_path, *more):
    train, dev = letter_rows(tmp_path)
    return CliRunner().invoke(main, ["optimize", "decomp/letter_cat_llm", "--train", str(train), "--dev", str(dev),
                                     "--out", str(tmp_path / "out"), "--model", "openai:student", "--base-url",
                                     server.base_url, "--cache-dir", str(tmp_path / "cache"), "--candidates", "3",
                                     *more])


def test_a_perfect_zero_shot_stops_the_search_and_says_so(server, tmp_path):
    before = server.stats()["requests"]
    done = _optimize(server, tmp_path)
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["chosen"] == "zero-shot" and summary["dev_score"] == summary["zero_shot_dev_score"] == 1.0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    others = report["candidates"][1:]
    assert summary["stopped_early"] == report["stopped_early"] == (
        f"zero-shot scored 1 on the development rows, the best em can give: the other {len(others)} candidate(s) "
        "were not scored (--no-prune scores them)")
    assert len(others) >= 3 and all(not c["complete"] and c["calls"] == 0 and c["not_scored"] for c in others)
    assert "stopped early: zero-shot scored 1" in done.stderr
    teacher = json.loads((tmp_path / "out" / ".optimize" / "teacher-1" / "summary.json").read_text())["calls"]
    assert server.stats()["requests"] - before == teacher + report["candidates"][0]["calls"]


def test_no_prune_still_scores_every_candidate(server, tmp_path):
    done = _optimize(server, tmp_path, "--no-prune")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert "stopped_early" not in summary and summary["chosen"] == "zero-shot"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert all(c["complete"] and c["dev_score"] == 1.0 for c in report["candidates"])
