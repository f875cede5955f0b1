"""Hostile and broken input, all at once (issue "Hostile and broken input", Done-when): a 200-row
run against the mock OpenAI server with 20% of its requests failing (500, 429, replies that are
not JSON, HTML pages, replies without choices), a row whose id and question hold a lone surrogate,
a row with a null question, a damaged step cache, a second `decomp run --resume` started while
the first still writes the run directory, and the first killed with SIGKILL partway; resumed
(over a foreign cache file this time), the run ends with every row accounted for: one line each
in results.jsonl, answered or with its error, the summary and the exit status agreeing.

Every `decomp` here is a real process (`python -m decomp.runtime.cli`). The server holds every
request after the first `HOLD_AFTER` answers until the test lets them go (`Gate`), so the second
`--resume` always meets a first run that is alive and frozen mid-run, and the kill always lands
partway, however fast or slow the machine.

The second test pins what a model is sent for the surrogate row's question, on both transports:
U+FFFD in place of the surrogate (UTF-8 cannot carry it), and the row is answered.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.testing.mock_server import MockOpenAIServer, last_line
from tests.runtime.runs.run_helpers import MODEL_ENV, complete_records, snapshot

ROWS = 200
CONCURRENCY = 8
HOLD_AFTER = 60     # requests answered before the server holds the rest
TIMEOUT = 120       # seconds any one wait may take before the test gives up on it (a hang guard)
# 20% of requests fail, each kind retried by the client (README "Speed": 429, 5xx, garbage replies)
FAULTS = {"500": 0.08, "429": 0.04, "garbage": 0.04, "html": 0.02, "empty": 0.02}
NULL_AT, SURROGATE_AT = 5, 7
SURROGATE_ID, SURROGATE_QUESTION = "sur\ud800", "odd \ud800 text"
SURROGATE_SENT = "odd \ufffd text"  # what a model is sent (and the server echoes): U+FFFD for the surrogate
PROGRAM = 'handler ask = prompt(text="Repeat the last line.\\n{{ query }}", max_tokens=32)\nmain ask\n'
DAMAGED = b"this is not a database, it is a damaged file" * 100
LOCKED = "is being written by another decomp run"


class Gate:
    """A responder (the default echo of the prompt's last line) that, after `hold_after`
    answers, holds each request until `release()`; `waiting` counts the requests it holds.
    Fault replies never reach a responder: the server answers them at once."""

    def __init__(self, hold_after: int):
        self.hold_after, self.calls, self.waiting = hold_after, 0, 0
        self._open = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, prompt: str, request: dict) -> str:
        with self._lock:
            self.calls += 1
            hold = self.calls > self.hold_after and not self._open.is_set()
            self.waiting += hold
        if hold:
            self._open.wait(timeout=TIMEOUT)
            with self._lock:
                self.waiting -= 1
        return last_line(prompt, request)

    def release(self) -> None:
        self._open.set()


def question(i: int) -> str:
    return f"question number {i}"


def write_rows(path: Path) -> None:
    lines = []
    for i in range(ROWS):
        if i == NULL_AT:
            lines.append('{"id": "null", "question": null}')
        elif i == SURROGATE_AT:
            # written as JSON escapes: the file itself is valid UTF-8
            lines.append(json.dumps({"id": SURROGATE_ID, "question": SURROGATE_QUESTION}))
        else:
            lines.append(json.dumps({"id": f"r{i}", "question": question(i)}))
    assert "\\ud800" in lines[SURROGATE_AT]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def foreign_cache(path: Path) -> None:
    """An SQLite file of something else that happens to have an `entries` table."""
    path.unlink()
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE entries (name TEXT, size INTEGER)")
    db.execute("INSERT INTO entries VALUES ('holiday.jpg', 12345)")
    db.commit()
    db.close()


def answered(run_dir: Path) -> int:
    return sum(r.get("answer") is not None for r in complete_records(run_dir).values())


def written_ids(run_dir: Path) -> set[str]:
    return {r["id"] for r in complete_records(run_dir).values()}


def wait_for(condition, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended (status {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.02)


def settled(file: Path, quiet: float = 0.3) -> None:
    """Wait until `file` has not changed for `quiet` seconds."""
    last, since = None, time.monotonic()
    deadline = since + TIMEOUT
    while time.monotonic() - since < quiet:
        stat = file.stat()
        now = (stat.st_size, stat.st_mtime_ns)
        if now != last:
            last, since = now, time.monotonic()
        assert time.monotonic() < deadline, f"{file} never settled"
        time.sleep(0.02)


@pytest.mark.network
@pytest.mark.slow
def test_a_faulty_hostile_run_killed_and_resumed_accounts_for_every_row(tmp_path):
    program, data, run_dir, cache_dir = tmp_path / "echo.decomp", tmp_path / "rows.jsonl", tmp_path / "run", \
        tmp_path / "cache"
    program.write_text(PROGRAM, encoding="utf-8")
    write_rows(data)
    cache_dir.mkdir()
    cache_file = cache_dir / "steps.sqlite"
    cache_file.write_bytes(DAMAGED)  # (a) a damaged cache: reported, bypassed, left as it is
    env = {**os.environ, **MODEL_ENV, "DECOMP_RUNS_DIR": str(tmp_path / "runs")}
    gate = Gate(HOLD_AFTER)

    with MockOpenAIServer(faults=FAULTS, seed=20, responder=gate) as server:
        def decomp(*more: str) -> list[str]:
            return [sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "--input", str(data),
                    "--run-dir", str(run_dir), "--model", "openai:mock", "--base-url", server.base_url,
                    "--concurrency", str(CONCURRENCY), "--cache-dir", str(cache_dir), *more]

        out, err = (tmp_path / "first.out").open("w+"), (tmp_path / "first.err").open("w+")
        first = subprocess.Popen(decomp(), env=env, cwd=tmp_path, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            # (b) the first run, frozen partway: every slot held by the server, the early rows written
            results = run_dir / "results.jsonl"
            # (each row makes one call the server answers, however many faults it meets first)
            wait_for(lambda: gate.waiting >= CONCURRENCY, "the server to hold every slot", first)
            wait_for(lambda: answered(run_dir) == HOLD_AFTER and "null" in written_ids(run_dir),
                     f"the rows of the first {HOLD_AFTER} answers and the null row", first)
            settled(results)
            before, cache_before = snapshot(run_dir), cache_file.read_bytes()
            written = len(complete_records(run_dir))
            assert answered(run_dir) == HOLD_AFTER and written < ROWS

            # (c) a concurrent --resume of the same run directory is refused, writing nothing
            second = subprocess.run(decomp("--resume"), env=env, cwd=tmp_path, capture_output=True, text=True,
                                    timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=False)
            assert second.returncode == 1, second.stderr
            assert LOCKED in second.stderr and str(run_dir) in second.stderr, second.stderr
            assert "Traceback" not in second.stderr and second.stdout == ""
            assert first.poll() is None  # the first run was alive all along: it was the lock that refused
            assert snapshot(run_dir) == before and cache_file.read_bytes() == cache_before

            # (d) the first run killed partway: no cleanup of any kind runs
            first.send_signal(signal.SIGKILL)
            assert first.wait(timeout=TIMEOUT) == -signal.SIGKILL
        finally:
            if first.poll() is None:
                first.kill()
                first.wait()
            gate.release()  # lets go what the killed process left held; every later request is answered
            out.close()
        err.seek(0)
        first_err = err.read()
        err.close()
        assert "Traceback" not in first_err, first_err
        warned = [line for line in first_err.splitlines() if line.startswith("warning: step cache")]
        assert len(warned) == 1 and str(cache_file) in warned[0] and "bypassed" in warned[0], first_err
        assert cache_file.read_bytes() == DAMAGED  # bypassed, not overwritten
        killed = complete_records(run_dir)
        assert written <= len(killed) < ROWS

        # (e) resumed to the end, over a foreign cache file this time
        foreign_cache(cache_file)
        last = subprocess.run(decomp("--resume", "-v"), env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=False)
        faults = server.stats()["faults"]

    assert "Traceback" not in last.stderr, last.stderr
    warned = [line for line in last.stderr.splitlines() if line.startswith("warning: step cache")]
    assert len(warned) == 1 and str(cache_file) in warned[0] and "bypassed" in warned[0], last.stderr
    with sqlite3.connect(cache_file) as db:  # the foreign file is left as it was
        assert db.execute("SELECT * FROM entries").fetchall() == [("holiday.jpg", 12345)]
    assert sum(faults.values()) >= 0.1 * ROWS, faults  # the faults were there to survive

    # every row accounted for: one whole line each, no row twice, in a file that is plain UTF-8 JSON
    data_bytes = results.read_bytes()
    assert data_bytes.endswith(b"\n") and data_bytes.count(b"\n") == ROWS
    text = data_bytes.decode("utf-8")  # strict: a lone surrogate is stored as an escape, never raw
    assert "\\ud800" in text
    records = complete_records(run_dir)
    assert sorted(records) == list(range(ROWS))
    assert all(killed[i] == records[i] for i in killed)  # a row once written stays, with the very same line
    ids = [r["id"] for r in records.values()]
    assert len(set(ids)) == ROWS and SURROGATE_ID in ids  # read back as it was

    # each row answered (its own question echoed back, whatever faults it met) or with its error
    errors = {i: r["error"] for i, r in records.items() if r.get("error") is not None}
    for i, record in records.items():
        assert (record.get("answer") is None) == (i in errors), record
        assert record["outcome"] == ("error" if i in errors else "ok"), record
        if i not in errors:
            assert record["answer"] == (SURROGATE_SENT if i == SURROGATE_AT else question(i)), record
    assert NULL_AT in errors and "the row's 'question' is null" in errors[NULL_AT]
    # any other row in error can only have run out of retries (seven attempts that all failed)
    others = {i: e for i, e in errors.items() if i != NULL_AT}
    assert all("gave up after 7 attempts" in e for e in others.values()), others

    # the summary agrees with the results, and the exit status with the summary
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    printed = json.loads(last.stdout.strip().splitlines()[-1])
    assert summary["rows"] == printed["rows"] == ROWS
    assert summary["failed"] == printed["failed"] == len(errors)
    assert last.returncode == 3, last.stderr  # finished, with rows in error
    assert f"error: {len(errors)} of {ROWS} row(s) ended in an error" in last.stderr, last.stderr
    for i in errors:
        assert f"(index {i}) failed:" in last.stderr  # -v names each
    sessions = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["sessions"]
    assert [s["resumed"] for s in sessions] == [False, True]  # the refused --resume left no session
    assert sessions[-1]["rows"] == ROWS - len(killed)

    # the run directory reads back: every row its trace, the surrogate row shown
    run = RunDir.open(run_dir)
    try:
        assert all(run.trace(i) is not None for i in range(ROWS))
    finally:
        run.close()
    shown = CliRunner().invoke(main, ["trace", "show", str(run_dir), "--row", SURROGATE_ID])
    assert shown.exit_code == 0 and "Traceback" not in shown.output, shown.output


@pytest.mark.network
@pytest.mark.parametrize("transport", ["aiohttp", "openai"])
def test_a_lone_surrogate_in_a_prompt_is_sent_as_the_replacement_character(tmp_path, transport):
    """A row's lone surrogate reaches the prompt a model is sent. UTF-8 cannot carry it (it was
    an internal UnicodeEncodeError on both transports): it leaves the process as U+FFFD, one
    character for one, and the row is answered."""
    program, data = tmp_path / "echo.decomp", tmp_path / "rows.jsonl"
    program.write_text(PROGRAM, encoding="utf-8")
    data.write_text(json.dumps({"id": "plain", "question": "plain text"}) + "\n"
                    + json.dumps({"id": SURROGATE_ID, "question": SURROGATE_QUESTION}) + "\n", encoding="utf-8")
    with MockOpenAIServer() as server:
        result = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(tmp_path / "run"),
                                           "--model", "openai:mock", "--base-url", server.base_url,
                                           "--transport", transport, "--cache", "off"], env=MODEL_ENV)
    assert result.exit_code == 0, result.output
    records = {r["id"]: r for r in RunDir.open(tmp_path / "run").records()}
    assert records["plain"]["answer"] == "plain text"
    assert records[SURROGATE_ID].get("error") is None and records[SURROGATE_ID]["answer"] == SURROGATE_SENT
