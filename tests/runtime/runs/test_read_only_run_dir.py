"""A run directory one cannot write is called read-only, never "corrupt" with advice to --force
(which would delete a good run), and can still be read; run.lock is never followed through a
symbolic link nor opened as a FIFO (issue 14, item 9, and the writer lock of item 6)."""
import json
import os
import signal

import pytest

from decomp.runtime.storage.layout import LOCK, RunDirError
from decomp.runtime.storage.manifest import make_manifest
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.storage.writable import writable_problem
from tests.runtime.runs.run_helpers import read_only
from tests.helpers import invoke

LETTER_Q = 'Take the letters at position 1 of the words in "Ada Bob" and concatenate them using a space.'


@pytest.fixture
def finished_run(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": "a", "question": LETTER_Q, "answer": "A B"}) + "\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    result = invoke("run", "decomp/letter_cat_symbolic", "--input", data, "--run-dir", run_dir, "--cache", "off")
    assert result.exit_code == 0, result.output
    return data, run_dir


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_resuming_a_read_only_run_says_read_only_never_corrupt_nor_force(finished_run):
    data, run_dir = finished_run
    before = snapshot(run_dir)
    with read_only(run_dir):
        for flags in (["--resume"], ["--force"], []):
            result = invoke("run", "decomp/letter_cat_symbolic", "--input", data, "--run-dir", run_dir,
                            "--cache", "off", *flags)
            assert result.exit_code == 1, result.output
            message = result.stderr.strip()
            assert "\n" not in message and "Traceback" not in result.output
            assert f"{run_dir} is read-only (" in message, message
            assert "corrupt" not in message and "--force" not in message, message
        assert "resume the copy" in invoke("run", "decomp/letter_cat_symbolic", "--input", data, "--run-dir",
                                           run_dir, "--resume").stderr
        # reading needs no write: the table, a row's tree, the scores
        shown = invoke("trace", "show", run_dir, "--row", "a")
        assert shown.exit_code == 0, shown.output
        assert "A B" in shown.output
        scored = invoke("eval", "--pred", run_dir, "--gold", data)
        assert scored.exit_code == 0, scored.output
        assert json.loads(scored.stdout)["score"] == 1.0
    assert snapshot(run_dir) == before


def test_writable_problem_names_the_reason(tmp_path):
    assert writable_problem(tmp_path) is None
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        assert writable_problem(folder) == "permission denied"
    assert writable_problem(folder) is None


def test_a_run_directory_that_cannot_be_made_says_why(tmp_path):
    (tmp_path / "file").write_text("x")
    manifest = make_manifest(_program(tmp_path), None, [], _data(tmp_path), {})
    with pytest.raises(RunDirError, match="cannot make the run directory .*: Not a directory"):
        RunDir.create(tmp_path / "file" / "run", manifest)


def _program(tmp_path):
    (tmp_path / "p.decomp").write_text("main x\n", encoding="utf-8")
    return tmp_path / "p.decomp"


def _data(tmp_path):
    (tmp_path / "d.jsonl").write_text("", encoding="utf-8")
    return tmp_path / "d.jsonl"


@pytest.fixture
def empty_run(tmp_path):
    manifest = make_manifest(_program(tmp_path), None, [], _data(tmp_path), {})
    RunDir.create(tmp_path / "run", manifest).close()
    return tmp_path / "run", manifest


def test_a_symlinked_run_lock_is_refused_and_not_followed(empty_run, tmp_path):
    run_dir, manifest = empty_run
    victim = tmp_path / "victim.txt"  # does not exist: following the link would create it
    (run_dir / LOCK).unlink()
    (run_dir / LOCK).symlink_to(victim)
    for attempt in (lambda: RunDir.resume(run_dir, manifest), lambda: RunDir.create(run_dir, manifest, force=True)):
        with pytest.raises(RunDirError, match="run.lock is a symbolic link: decomp does not follow it"):
            attempt()
    assert not victim.exists()
    assert (run_dir / LOCK).is_symlink()  # left for the user to look at


def test_a_fifo_run_lock_is_refused_without_waiting(empty_run):
    run_dir, manifest = empty_run
    (run_dir / LOCK).unlink()
    os.mkfifo(run_dir / LOCK)

    def hung(signum, frame):
        raise TimeoutError("opening run.lock waited for a reader")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)  # generous: refusing takes milliseconds; the old open() waited forever
    try:
        with pytest.raises(RunDirError, match="run.lock is not a plain file"):
            RunDir.resume(run_dir, manifest)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_read_only_run_whose_wal_was_left_open_is_read_whole(tmp_path):
    from decomp.runtime.engine.tracing import TraceNode

    manifest = make_manifest(_program(tmp_path), None, [], _data(tmp_path), {})
    writer = RunDir.create(tmp_path / "run", manifest)
    writer.add({"id": "a", "index": 0, "answer": 1}, TraceNode("row", label="a"))
    reader = RunDir.open(tmp_path / "run")
    assert reader.trace(0).label == "a"
    writer.add({"id": "b", "index": 1, "answer": 2}, TraceNode("row", label="b"))
    writer.close()  # the reader is still open: the last row stays in the -wal file
    reader.close()
    assert (tmp_path / "run" / "traces.sqlite-wal").stat().st_size > 0
    with read_only(tmp_path / "run"):
        again = RunDir.open(tmp_path / "run")
        assert [tree.label for _, tree in again.traces()] == ["a", "b"]
        again.close()
