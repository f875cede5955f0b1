"""`--otlp` to a receiver that refuses the connection: found before the run with one TCP
connection, said once and whole (with the `decomp trace export` command that sends the run
later), nothing exported, and the run pays under 2 s for it (measured against the same run
without --otlp). A receiver that goes away during the run: the end's warning in decomp's words,
never the SDK's line cut mid-word. The same for `-q` and `decomp trace export`."""
from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.exports import otel
from decomp.runtime.storage.rundir import RunDir
from tests.runtime.interrupt_helpers import DECOMP, RESPONDER, environment

pytestmark = [pytest.mark.slow, pytest.mark.network]

PROGRAM = 'handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)\nmain ask\n'
#: The line of the SDK that a warning once cut mid-word ("... exporting spans batch, retr").
SDK_LINE = ("Transient error HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: "
            "/v1/traces (Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): Failed to "
            "establish a new connection: [Errno 111] Connection refused\")) encountered while exporting spans "
            "batch, retrying in 1.00s.")


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "prog.decomp").write_text(PROGRAM, encoding="utf-8")
    (tmp_path / "slow_replies.py").write_text(RESPONDER, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "question": f"q {i}"}) + "\n"
                                                 for i in range(3)), encoding="utf-8")
    return tmp_path


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(folder: Path, run_dir: str, *extra: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run([DECOMP, "run", "prog.decomp", "--input", "rows.jsonl", "--run-dir", run_dir, "--model",
                           "fake:slow_replies:reply", "--cache", "off", *extra], cwd=folder,
                          env=environment(folder, 0), capture_output=True, text=True, timeout=120)
    return time.monotonic() - started, done


def test_a_refused_receiver_is_said_once_whole_and_costs_the_run_under_2_s(tmp_path):
    folder, port = _folder(tmp_path), _closed_port()
    url = f"http://127.0.0.1:{port}"
    plain, refused = [], []
    for n in range(3):  # interleaved, each the fastest of three: the machine is shared
        plain.append(_run(folder, f"plain-{n}")[0])
        took, done = _run(folder, f"otlp-{n}", "--otlp", url)
        refused.append(took)
        assert done.returncode == 0, done.stderr
        assert done.stderr.splitlines() == [
            f"warning: OTLP export to {url}/v1/traces: the receiver refused the connection, so this run sends no "
            f"traces; they are kept in otlp-{n}: send them when a receiver listens with: decomp trace export "
            f"otlp-{n} --otlp {url}"]
        run = RunDir.open(folder / f"otlp-{n}")
        assert len(run.records()) == 3 and all(run.trace(i) is not None for i in range(3))
    added = min(refused) - min(plain)
    print(f"wall time: {min(plain):.2f} s without --otlp, {min(refused):.2f} s with a refusing receiver "
          f"(+{added:.2f} s)")
    assert added < 2.0


def test_a_question_run_says_its_trace_is_not_sent(tmp_path, monkeypatch):
    folder, port = _folder(tmp_path), _closed_port()
    monkeypatch.chdir(folder)
    started = time.monotonic()
    done = CliRunner().invoke(main, ["run", "prog.decomp", "-q", "hi", "--model", "fake:slow_replies:reply", "--cache",
                                     "off", "--otlp", f"http://127.0.0.1:{port}"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < 5  # no seconds of retries in the exporter's close
    assert done.stdout == "ok\n"
    assert done.stderr.splitlines() == [
        f"warning: OTLP export to http://127.0.0.1:{port}/v1/traces: the receiver refused the connection, so the "
        "question's trace is not sent (--trace-out FILE keeps its tree)"]


def test_trace_export_to_a_refusing_receiver_fails_at_once(tmp_path):
    folder, port = _folder(tmp_path), _closed_port()
    assert _run(folder, "run")[1].returncode == 0
    started = time.monotonic()
    done = CliRunner().invoke(main, ["trace", "export", str(folder / "run"), "--otlp", f"http://127.0.0.1:{port}"])
    assert time.monotonic() - started < 5 and done.exit_code == 1
    assert done.stderr.strip().endswith(f"OTLP export to http://127.0.0.1:{port}/v1/traces: the receiver refused "
                                        "the connection; nothing was sent")


class _GoneAfterOneConnection:
    """A receiver that takes one connection (the run's check before it starts), then stops
    listening: it went away during the run."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        threading.Thread(target=self._once, daemon=True).start()

    def _once(self):
        connection, _ = self.socket.accept()
        connection.close()
        self.socket.close()


def test_a_receiver_gone_during_the_run_is_said_in_decomps_words(tmp_path, monkeypatch):
    folder = _folder(tmp_path)
    receiver = _GoneAfterOneConnection()
    url = f"http://127.0.0.1:{receiver.port}"
    monkeypatch.chdir(folder)
    started = time.monotonic()
    done = CliRunner().invoke(main, ["run", "prog.decomp", "--input", "rows.jsonl", "--run-dir", "run", "--model",
                                     "fake:slow_replies:reply", "--cache", "off", "--otlp", url],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert time.monotonic() - started < otel.FLUSH_S  # no seconds of the SDK's retries
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: OTLP export to {url}/v1/traces: 6 of 6 spans could not be sent (the receiver "
                        "refused the connection); the run itself is complete (send its traces again with: decomp "
                        f"trace export run --otlp {url})"]


def test_the_sdks_words_are_said_in_decomps_or_shortened_at_a_word():
    assert otel.sdk_problem(SDK_LINE) == "the receiver refused the connection"
    assert otel.sdk_problem("Failed to export spans batch code: 401, reason: Unauthorized") == \
        "the receiver answered HTTP 401: Unauthorized"
    long = "Transient error " + " ".join(f"word{n}" for n in range(80)) + " encountered while exporting spans batch"
    said = otel.sdk_problem(long)
    assert said.endswith(" …") and len(said) <= 202
    assert set(said[:-2].split()) <= {f"word{n}" for n in range(80)}  # whole words only
