"""`decomp run --input ... --resume`: a run killed with SIGKILL anywhere finishes with every row
exactly once and the same results as a run never interrupted; bad run directories get a clear
one-line message, never a traceback, and nothing in them is overwritten without --force.

Two kinds of kill:

* from outside: the real `decomp run` of the bundled `decomp/letter_cat` against the mock OpenAI
  server (in this process, the oracle responder that answers every prompt right), killed when
  results.jsonl reaches a number of lines, then resumed. The server holds every request until the
  test lets it through (`Gate`), so where the kill lands depends on no timing: the run cannot get
  further while the test looks, and never gets all the answers it needs to finish;
* from inside, at exact points (resume_helpers.py): while run.json is first written, between a
  row's trace and its results line, halfway through a results line, before the summary.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks.letter_cat_oracle import make_rows, respond
from decomp.runtime.cli import main
from tests.runtime.runs.run_helpers import (HOOKED, MODEL_ENV, TIMEOUT, assert_same_as, complete_records, invoke,
                                            model_args, sessions, snapshot)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SYMBOLIC = REPO / "programs" / "decomp" / "letter_cat_symbolic.decomp"
ROWS = 32           # model rows
CALLS_PER_ROW = 11  # requests each model row makes, 7 of them one after another


# ------------------------------------------------------------------------------ shared checks
def has_half_line(run_dir: Path) -> bool:
    file = run_dir / "results.jsonl"
    return file.exists() and not file.read_bytes().endswith(b"\n") and file.stat().st_size > 0


def assert_clear_failure(result, *fragments: str) -> str:
    """A CliRunner result that failed as a user error should: status 1, one line on stderr that
    says what is wrong, no traceback, no exception other than the exit."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), f"uncaught {result.exception!r}: {result.output}"
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert message and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ------------------------------------------------------------------------------ the model runs
class Gate:
    """Where the mock server holds each request until the test lets it through: open (every
    request passes), or a number of permits. `set` starts afresh: requests still held from a
    killed process are let go (their client is gone), and `waiting` counts the requests held."""

    def __init__(self):
        self._cond = threading.Condition()
        self._permits: int | None = None  # None: open
        self._generation = 0
        self.waiting = 0

    def through(self) -> None:
        with self._cond:
            generation = self._generation
            self.waiting += 1
            try:
                self._cond.wait_for(lambda: self._permits != 0 or self._generation != generation)
                if self._generation == generation and self._permits is not None:
                    self._permits -= 1
            finally:
                self.waiting -= 1

    def set(self, permits: int | None) -> None:
        with self._cond:
            self._generation += 1
            self._permits = permits
            self._cond.notify_all()

    def release(self, n: int = 1) -> None:
        with self._cond:
            self._permits += n
            self._cond.notify_all()


GATE = Gate()  # one for the module, as its mock server is


def gated(prompt: str, request: dict) -> str:
    """The oracle's answer, once `GATE` lets the request through."""
    GATE.through()
    return respond(prompt, request)


MOCK_SERVER = {"responder": gated}  # the `server` fixture (tests/conftest.py)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "letters.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in make_rows(ROWS, seed=7)))
    return path


@pytest.fixture(scope="module")
def baseline(server, dataset, tmp_path_factory) -> Path:
    """The same run, never interrupted."""
    run_dir = tmp_path_factory.mktemp("baseline") / "run"
    server.reset_stats()
    result = invoke(model_args(dataset, run_dir, server))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["failed"], summary["score"]) == (ROWS, 0, 1.0)
    assert server.stats()["requests"] == CALLS_PER_ROW * ROWS  # what run_until's permits count on
    return run_dir


@dataclass
class Killed:
    lines: int          # complete results lines when the process was gone
    half_line: bool     # a half-written last line was left
    returncode: int
    stderr: str


def run_until(args: list[str], run_dir: Path, tmp_path: Path, kill_at: int | None, gate: Gate) -> Killed:
    """`decomp ARGS` as a real process, killed with SIGKILL as soon as results.jsonl has `kill_at`
    complete lines (0: as soon as run.json exists, no request answered); `kill_at=None` lets it
    finish. Until the kill, the server answers the requests it holds only while fewer lines than
    `kill_at` are written, and at most one request fewer than the rows left need: the kill lands
    at `kill_at` lines or a little after, never after the last row, however slow the machine."""
    env = {**os.environ, **MODEL_ENV, "DECOMP_CACHE_DIR": str(tmp_path / "cache")}
    permits = CALLS_PER_ROW * (ROWS - len(complete_records(run_dir))) - 1
    gate.set(None if kill_at is None else 0)
    out, err = (tmp_path / "stdout.txt").open("w+"), (tmp_path / "stderr.txt").open("w+")
    proc = subprocess.Popen([sys.executable, "-m", "decomp.runtime.cli", *args], env=env, stdout=out,
                            stderr=err, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        results = run_dir / "results.jsonl"
        while kill_at is not None and proc.poll() is None and time.monotonic() < deadline:
            if (run_dir / "run.json").exists():
                lines = results.read_bytes().count(b"\n") if results.exists() else 0
                if lines >= kill_at:
                    proc.send_signal(signal.SIGKILL)
                    break
                held = min(gate.waiting, permits)
                if held > 0:
                    gate.release(held)
                    permits -= held
                    continue
            time.sleep(0.001)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        gate.set(None)  # open again for the other tests; lets go what the killed process left held
    err.seek(0)
    stderr = err.read()
    err.close()
    return Killed(len(complete_records(run_dir)), has_half_line(run_dir), proc.returncode, stderr)


@pytest.mark.slow
@pytest.mark.network
def test_killed_at_several_points_then_resumed_equals_an_uninterrupted_run(server, dataset, baseline, tmp_path):
    run_dir = tmp_path / "run"
    args = model_args(dataset, run_dir, server)
    history: list[dict[int, dict]] = []

    # (a) as soon as run.json is there: before any row ends (the server has answered nothing)
    first = run_until(args, run_dir, tmp_path, kill_at=0, gate=GATE)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert first.lines == 0 and not first.half_line
    history.append(complete_records(run_dir))

    # (b) after a few rows, (c) mid-run: each time resumed (no --force), killed again
    for kill_at in (3, ROWS // 2):
        killed = run_until(args + ["--resume"], run_dir, tmp_path, kill_at=kill_at, gate=GATE)
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert "Traceback" not in killed.stderr
        assert kill_at <= killed.lines < ROWS
        history.append(complete_records(run_dir))

    # (d) resumed to the end
    last = run_until(args + ["--resume"], run_dir, tmp_path, kill_at=None, gate=GATE)
    assert last.returncode == 0, last.stderr
    assert "Traceback" not in last.stderr
    history.append(complete_records(run_dir))

    # no row lost: once written, a row stays, with the very same line
    for before, after in pairwise(history):
        assert all(after.get(i) == record for i, record in before.items())
    # the resumed sessions ran only the rows not yet written
    ran = sessions(run_dir)
    assert [s["resumed"] for s in ran] == [False, True, True, True]
    assert ran[-1]["rows"] == ROWS - len(history[-2])
    # each killed session is recorded with the rows it wrote, not as `"rows": 0, "seconds": null`
    wrote = [len(after) - len(before) for before, after in pairwise([{}, *history])]
    assert [s["rows"] for s in ran] == wrote and sum(wrote) == ROWS
    assert [s.get("killed", False) for s in ran] == [True, True, True, False]
    assert ran[0]["seconds"] is None  # it wrote no row: how long it ran is not known
    assert all(s["seconds"] is not None and 0 <= s["seconds"] < TIMEOUT for s in ran[1:])
    assert json.loads((run_dir / "summary.json").read_text())["wall_s"] == \
        round(sum(s["seconds"] or 0 for s in ran), 3)
    assert_same_as(run_dir, baseline, ROWS, n_sessions=4)


@pytest.mark.network
def test_a_half_written_last_line_is_detected_and_redone(server, dataset, baseline, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(baseline, run_dir)
    results = run_dir / "results.jsonl"
    data = results.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = json.loads(data[start:])["index"]
    results.write_bytes(data[:start + 30])  # the last line cut after 30 bytes, no newline

    outcome = invoke(model_args(dataset, run_dir, server, "--resume"))
    assert outcome.exit_code == 0, outcome.output
    assert "note:" in outcome.stderr and "results.jsonl" in outcome.stderr and "cut off" in outcome.stderr
    assert sessions(run_dir)[-1]["rows"] == 1
    lines = results.read_bytes().split(b"\n")
    assert json.loads(lines[-2])["index"] == cut  # the row redone is the one cut, written again
    assert_same_as(run_dir, baseline, ROWS, n_sessions=2)


@pytest.mark.network
def test_resuming_a_finished_run_runs_nothing(server, dataset, baseline, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(baseline, run_dir)
    before = (run_dir / "results.jsonl").read_bytes()
    server.reset_stats()

    outcome = invoke(model_args(dataset, run_dir, server, "--resume"))
    assert outcome.exit_code == 0, outcome.output
    assert server.stats()["requests"] == 0
    assert (run_dir / "results.jsonl").read_bytes() == before
    printed = json.loads(outcome.stdout)
    assert (printed["rows"], printed["sessions"], printed["score"]) == (ROWS, 2, 1.0)
    assert sessions(run_dir)[-1]["rows"] == 0
    assert_same_as(run_dir, baseline, ROWS, n_sessions=2)


@pytest.mark.network
def test_resuming_with_another_model_is_refused(server, dataset, baseline, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(baseline, run_dir)
    before = snapshot(run_dir)
    args = model_args(dataset, run_dir, server, "--resume")
    args[args.index("openai:mock")] = "openai:other"
    outcome = invoke(args)
    assert_clear_failure(outcome, "--model openai:mock", "openai:other")
    assert snapshot(run_dir) == before


# ------------------------------------------------------------------------------ exact kill points
@pytest.fixture
def symbolic(tmp_path):
    """A copy of the symbolic letter_cat program (no model), rows (one malformed, one without an
    id, one the program fails on) and a finished run of them."""
    program = tmp_path / "prog" / "letter_cat_symbolic.decomp"
    program.parent.mkdir()
    # `[delimiter]` waits for `[name]` here: in the bundled program they run at once, and the row
    # that fails in `[name]` may end before `[delimiter]` has started or after, so its usage and
    # trace (not its error) vary from run to run, and two runs are compared record for record
    text = SYMBOLIC.read_text(encoding="utf-8")
    assert "QS: [delimiter] #question" in text
    program.write_text(text.replace("QS: [delimiter] #question", "QS: [delimiter] #1 #question"), encoding="utf-8")
    rows = make_rows(10, seed=3)
    lines = [json.dumps(r) for r in rows]
    lines.insert(2, '{"id": "broken", "question": ')
    lines.insert(5, json.dumps({"id": "fails", "question": "Take the letters of nothing."}))
    lines.append(json.dumps({"question": rows[1]["question"]}))  # no id
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(lines) + "\n")
    done = tmp_path / "done"
    result = run_symbolic(program, data, done)
    assert result.exit_code == ROWS_FAILED, result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["failed"]) == (13, 2)
    return program, data, done


#: `decomp run --input`'s exit status when the run finished with rows in error (the symbolic rows
#: hold two on purpose: a malformed line and a question the program fails on).
ROWS_FAILED = 3


def run_symbolic(program: Path, data: Path, run_dir: Path, *more: str):
    return CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--run-dir", str(run_dir),
                                     "--cache", "off", *more])


def hooked(point: str, n: int, program: Path, data: Path, run_dir: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(HOOKED), point, str(n), "run", str(program), "--input", str(data),
                           "--run-dir", str(run_dir), "--cache", "off"],
                          capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == -signal.SIGKILL, f"the {point} hook did not fire: {proc.returncode}\n{proc.stderr}"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("point, note", [("trace-only", False), ("half-line", True), ("summary", False)])
def test_killed_at_an_exact_point_then_resumed(symbolic, tmp_path, point, note):
    program, data, done = symbolic
    run_dir = tmp_path / "run"
    hooked(point, 4, program, data, run_dir)
    written = complete_records(run_dir)
    assert len(written) == (13 if point == "summary" else 3)
    assert has_half_line(run_dir) == note
    assert not (run_dir / "summary.json").exists()

    outcome = run_symbolic(program, data, run_dir, "--resume")
    assert outcome.exit_code == ROWS_FAILED, outcome.output
    assert ("cut off" in outcome.stderr) == note, outcome.stderr
    assert all(complete_records(run_dir)[i] == record for i, record in written.items())
    assert sessions(run_dir)[-1]["rows"] == 13 - len(written)
    killed = sessions(run_dir)[0]
    assert killed["killed"] is True and killed["rows"] == len(written)  # not 0: it wrote them
    assert killed["seconds"] is not None and 0 <= killed["seconds"] < TIMEOUT
    assert_same_as(run_dir, done, 13, n_sessions=2)


@pytest.mark.slow
def test_killed_while_creating_the_run_directory(symbolic, tmp_path):
    """A kill while run.json is first written (the program already copied) leaves a directory
    that --resume reports clearly and --force can start over in: the user has no file to delete."""
    program, data, done = symbolic
    run_dir = tmp_path / "run"
    hooked("create", 0, program, data, run_dir)

    resumed = run_symbolic(program, data, run_dir, "--resume")
    assert "Traceback" not in resumed.output and isinstance(resumed.exception, (SystemExit, type(None)))
    forced = run_symbolic(program, data, run_dir, "--force")
    assert forced.exit_code == ROWS_FAILED, forced.output
    assert_same_as(run_dir, done, 13, n_sessions=1)


# ------------------------------------------------------------------------------ bad input
def test_running_into_an_existing_run_without_resume_or_force_changes_nothing(symbolic):
    program, data, done = symbolic
    before = snapshot(done)
    assert_clear_failure(run_symbolic(program, data, done), "already holds a run", "--resume", "--force")
    assert snapshot(done) == before


def test_force_starts_over(symbolic):
    program, data, done = symbolic
    (done / "results.jsonl").write_text("not even JSON\n")
    outcome = run_symbolic(program, data, done, "--force")
    assert outcome.exit_code == ROWS_FAILED, outcome.output
    records = complete_records(done)
    assert sorted(records) == list(range(13))
    assert [s["resumed"] for s in sessions(done)] == [False]
    assert json.loads((done / "summary.json").read_text())["sessions"] == 1


def test_force_never_deletes_a_folder_that_holds_no_run(symbolic, tmp_path):
    program, data, _ = symbolic
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work")
    (mine / "sub").mkdir()
    (mine / "sub" / "notes.txt").write_text("more")
    before = snapshot(mine)
    for flags in ((), ("--force",), ("--resume",)):
        assert_clear_failure(run_symbolic(program, data, mine, *flags), str(mine))
        assert snapshot(mine) == before


def test_resume_with_a_changed_program_is_refused(symbolic):
    program, data, done = symbolic
    before = snapshot(done)
    program.write_text(program.read_text().replace("main letter_cat", "# edited\nmain letter_cat"))
    assert_clear_failure(run_symbolic(program, data, done, "--resume"),
                         "letter_cat_symbolic.decomp", "differs", "--force")
    assert snapshot(done) == before


def test_resume_with_another_program_is_refused(symbolic):
    _, data, done = symbolic
    before = snapshot(done)
    assert_clear_failure(run_symbolic(REPO / "programs" / "decomp" / "reverse_symbolic.decomp", data, done,
                                      "--resume"), "differs")
    assert snapshot(done) == before


def test_resume_with_changed_input_is_refused(symbolic):
    program, data, done = symbolic
    before = snapshot(done)
    with data.open("a") as f:
        f.write(json.dumps({"id": "new", "question": "?"}) + "\n")
    assert_clear_failure(run_symbolic(program, data, done, "--resume"), "input", "differs")
    assert snapshot(done) == before


def test_resume_with_another_model_option_is_refused(symbolic, tmp_path):
    program, data, _ = symbolic
    run_dir = tmp_path / "with-model"
    assert run_symbolic(program, data, run_dir, "--model", "openai:a").exit_code == ROWS_FAILED
    before = snapshot(run_dir)
    assert_clear_failure(run_symbolic(program, data, run_dir, "--resume", "--model", "openai:b"),
                         "--model openai:a")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("manifest, fragments", [
    ('{"format": 99, "decomp_version": "9.9"}', ("format 99", "reads format 1")),
    ('{"format": 1, "program": ', ("run.json", "corrupt")),
    ("[1, 2, 3]", ("format None",)),
    ('{"format": 1}', ("run.json",)),  # the right version, but nothing a run records
])
def test_resume_of_a_foreign_or_corrupt_manifest_is_refused(symbolic, manifest, fragments):
    program, data, done = symbolic
    (done / "run.json").write_text(manifest)
    before = snapshot(done)
    assert_clear_failure(run_symbolic(program, data, done, "--resume"), *fragments)
    assert snapshot(done) == before


def test_resume_with_a_corrupt_middle_line_is_refused(symbolic):
    program, data, done = symbolic
    lines = (done / "results.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][:20] + "\n"
    (done / "results.jsonl").write_text("".join(lines))
    before = snapshot(done)
    assert_clear_failure(run_symbolic(program, data, done, "--resume"), "results.jsonl:2:", "corrupt")
    assert snapshot(done) == before


def test_resume_with_a_corrupt_trace_store_is_refused(symbolic):
    """traces.sqlite that is not a database: a clear message before any row runs, not an
    sqlite3 traceback once the first rerun row is stored."""
    program, data, done = symbolic
    lines = (done / "results.jsonl").read_text().splitlines(keepends=True)
    (done / "results.jsonl").write_text("".join(lines[:5]))  # rows left to run
    for extra in ("traces.sqlite-wal", "traces.sqlite-shm"):
        (done / extra).unlink(missing_ok=True)
    (done / "traces.sqlite").write_bytes(b"this is not an SQLite database" * 100)
    before = snapshot(done)
    assert_clear_failure(run_symbolic(program, data, done, "--resume"), "traces.sqlite")
    assert snapshot(done) == before


def test_resume_with_no_earlier_run_says_so(symbolic, tmp_path, monkeypatch):
    program, data, _ = symbolic
    monkeypatch.setenv("DECOMP_RUNS_DIR", str(tmp_path / "empty-runs"))
    (tmp_path / "empty-runs").mkdir()
    outcome = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--resume", "--cache", "off"])
    assert_clear_failure(outcome, "no earlier run", "--run-dir")
    assert list((tmp_path / "empty-runs").iterdir()) == []
    assert_clear_failure(run_symbolic(program, data, tmp_path / "nowhere", "--resume"), "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_a_missing_row_id_in_a_run_is_a_clear_message(symbolic):
    _, _, done = symbolic
    outcome = CliRunner().invoke(main, ["trace", "show", str(done), "--row", "no-such-row"])
    assert_clear_failure(outcome, "no row 'no-such-row'")


@pytest.mark.network
def test_resume_takes_its_settings_from_run_json(server, dataset, baseline, tmp_path):
    """`--resume` with none of the first run's flags: the model, base URL, cache mode and
    concurrency come from run.json (issue 22: it used to refuse without --model and --base-url)."""
    run_dir = tmp_path / "run"
    shutil.copytree(baseline, run_dir)
    results = run_dir / "results.jsonl"
    data = results.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    results.write_bytes(data[:start])  # the last row lost: the resume must call the server for it
    server.reset_stats()

    outcome = invoke(["run", "decomp/letter_cat_llm", "--input", str(dataset), "--run-dir", str(run_dir),
                      "--resume", "--concurrency", "2"])
    assert outcome.exit_code == 0, outcome.output
    assert server.stats()["requests"] == CALLS_PER_ROW  # the recorded endpoint, for the one row left
    recorded = json.loads((run_dir / "run.json").read_text())["options"]
    assert (recorded["model"], recorded["base_url"], recorded["cache_mode"]) == ("openai:mock", server.base_url, "off")
    assert sessions(run_dir)[-1]["rows"] == 1
    assert_same_as(run_dir, baseline, ROWS, n_sessions=2)
