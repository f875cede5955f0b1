"""`decomp run --attempt-deadline SECONDS --call-deadline SECONDS` (issue 29): a dataset run
whose model's server trickles its replies a byte at a time ends within the call deadline (the
rows run at once), each row recording which deadline ran out and how to raise it; run.json
records both options. Through a real subprocess, so nothing left running (a thread, a
connection) can keep the process from ending."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tests.helpers import OPENAI_ENV
from decomp.runtime.cli import main
from decomp.runtime.testing.misbehaving import MisbehavingServer

PROGRAM = 'handler ask = prompt(text="")\nprogram p(question) {\n  QS: [ask] #question\n}\nmain p\n'
MARGIN = 10.0  # seconds a loaded machine may add: the interpreter's start, the openai import


@pytest.mark.network
def test_a_run_against_a_trickling_server_ends_within_the_call_deadline(tmp_path):
    program = tmp_path / "p.decomp"
    program.write_text(PROGRAM, encoding="utf-8")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"Q{i}"}) + "\n" for i in range(3)),
                    encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in OPENAI_ENV}
    with MisbehavingServer("trickle", interval=0.2) as server:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "--input", str(data),
                               "--run-dir", str(tmp_path / "run"), "--model", "openai:m",
                               "--base-url", server.url + "/v1", "--cache", "off",
                               "--attempt-deadline", "1", "--call-deadline", "3"],
                              capture_output=True, text=True, env=env, timeout=120)
        took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert took < 3 + MARGIN
    assert "3 of 3 row(s) ended in an error" in proc.stderr
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in results) == ["r0", "r1", "r2"]
    for record in results:
        assert record["error"].startswith(f"[ask] prompt, {program}:3:3: openai:m: no answer within the call "
                                          "deadline of 3s (")
        assert ("raise it with the model's call_deadline= option or --call-deadline SECONDS); last error: no "
                f"complete reply from {server.url}/v1 within the attempt deadline of 1s") in record["error"]
    options = json.loads((tmp_path / "run" / "run.json").read_text())["options"]
    assert (options["attempt_deadline"], options["call_deadline"]) == (1.0, 3.0)


def test_the_flags_show_their_defaults_and_refuse_no_seconds():
    shown = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
    assert "--attempt-deadline SECONDS Seconds one request" in shown and "[default: 120.0; x>0]" in shown
    assert "--call-deadline SECONDS Seconds one openai: model call" in shown and "[default: 300.0; x>0]" in shown
    refused = CliRunner().invoke(main, ["run", "x.decomp", "-q", "x", "--call-deadline", "0"])
    assert refused.exit_code == 2 and "--call-deadline" in refused.output
