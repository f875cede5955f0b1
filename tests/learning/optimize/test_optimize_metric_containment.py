"""`decomp optimize --metric module:function` with a metric that loops for ever on some rows and
raises `SystemExit(3)` on others: each such row gets its worded metric error (report.json and a
note), the other rows are scored, and the optimisation finishes with report.json and status 0."""
from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from tests.learning.optimize.optimize_helpers import letter_rows, student

pytestmark = pytest.mark.network

METRIC = '''
def score(row, answer, trace):
    if row["id"] in ("row0", "row10"):
        while True:
            pass
    if row["id"] in ("row1", "row11"):
        raise SystemExit(3)
    return 1.0 if answer == row["answer"] else 0.0
'''

MOCK_SERVER = {"responder": student}  # the `server` fixture (tests/conftest.py)


def test_a_looping_and_an_exiting_metric_fail_only_their_rows(server, tmp_path, monkeypatch):
    (tmp_path / "bad_metric.py").write_text(METRIC)
    monkeypatch.chdir(tmp_path)
    train, dev = letter_rows(tmp_path)
    started = time.monotonic()
    done = CliRunner().invoke(main, [
        "optimize", "decomp/letter_cat_llm", "--train", str(train), "--dev", str(dev), "--out", str(tmp_path / "out"),
        "--model", "openai:student", "--teacher", "openai:teacher", "--base-url", server.base_url,
        "--cache-dir", str(tmp_path / "cache"), "--candidates", "1", "--metric", "bad_metric:score",
        "--metric-timeout", "1"])
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < 120
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    errors = {e["row"]: e["error"] for e in report["bootstrap"]["metric_errors"]}
    assert set(errors) == {"row0", "row1"}
    assert errors["row0"] == ("metric 'bad_metric:score' ran longer than its time limit of 1 s on row row0 "
                              "(raise it with --metric-timeout SECONDS)")
    assert errors["row1"] == "metric 'bad_metric:score' failed on row row1: SystemExit: 3"
    assert report["bootstrap"]["passed"] == 8
    for candidate in report["candidates"]:
        assert candidate["complete"], candidate
        assert {e["row"] for e in candidate["metric_errors"]} == {"row10", "row11"}
    assert "the metric failed on 2 training row(s)" in done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["report"].endswith("report.json")
