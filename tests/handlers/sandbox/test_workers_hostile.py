"""Worker processes against hostile functions (`decomp.handlers.sandbox.workers`): a reply is taken only
for the call whose id it carries, so what a function writes to its worker's connection never
becomes another row's answer; the fork server and the resource tracker are out of a function's
reach, and die with the parent, as the workers do; a call's memory limit is a hard limit."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from decomp import Session
from decomp.handlers.sandbox import workers

HELPERS = '''import json, os, resource, stat, struct, subprocess, sys, threading, time

def _sockets():
    for fd in range(3, 40):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                yield fd
        except OSError:
            pass

def _forge(answer):
    """A reply as a worker once sent one: {"result": ...} in a length-prefixed frame."""
    frame = json.dumps({"result": {"answer": answer}}).encode()
    return struct.pack("!i", len(frame)) + frame

def shift(query):
    """Leaves a thread that keeps writing this row's answer, as a reply, on every socket."""
    forged = _forge(query.upper())
    def later():
        while True:
            time.sleep(0.02)
            for fd in _sockets():
                try:
                    os.write(fd, forged)
                except OSError:
                    pass
    threading.Thread(target=later, daemon=True).start()
    return query.upper()

def scribble(query):
    if query == "bad":
        for fd in range(3, 40):
            try:
                os.write(fd, b"garbage\\n" * 4)
            except OSError:
                pass
    return query.upper()

def escape(query):
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    for wanted in ((hard, hard), (resource.RLIM_INFINITY, resource.RLIM_INFINITY)):
        try:
            resource.setrlimit(resource.RLIMIT_DATA, wanted)
        except (ValueError, OSError):
            pass
    return len(bytearray(3 * 2**29))

def pid(query):
    return os.getpid()

def grow(query):
    return len(bytearray(int(query) * 2**20))

_KEPT = []

def keep(query):
    _KEPT.append(bytearray(int(query) * 2**20))
    return os.getpid()

def lingering(query):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    return os.getpid()

_SERVER = []

def keeper(query):
    """Starts a program on "start" and keeps it (a server it would talk to), ends it on "stop"."""
    if query == "start":
        _SERVER.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
    elif _SERVER:
        _SERVER.pop().kill()
    return os.getpid()

def escaped(query):
    """A grandchild, orphaned at once (so no child of the worker is left), that writes a forged
    reply on the worker's connection a little later, while the worker is idle."""
    if os.fork() == 0:
        if os.fork() == 0:
            time.sleep(0.3)
            for fd in _sockets():
                os.write(fd, _forge("forged"))
        os._exit(0)
    os.wait()
    return os.getpid()

def inherited(query):
    done = subprocess.run([sys.executable, "-c", "import os\\nfor fd in os.listdir('/proc/self/fd'):\\n"
                           "    try: print(os.readlink('/proc/self/fd/' + fd))\\n    except OSError: pass"],
                          close_fds=False, capture_output=True, text=True, timeout=60)
    return done.stdout

def partial(query):
    """On "bad": a frame header promising 1000 bytes on every socket, and 3 of them."""
    if query == "bad":
        for fd in _sockets():
            os.write(fd, struct.pack("!i", 1000) + b"abc")
    return os.getpid()

def forked(query):
    """On "A": a child (fork, no exec) that writes to every socket while the next call runs."""
    if query == "A" and os.fork() == 0:
        time.sleep(0.5)
        for fd in _sockets():
            try:
                os.write(fd, b"\\x00\\x00\\x00\\x05hello")
            except OSError:
                pass
        os._exit(0)
    if query == "B":
        time.sleep(1.0)
    return os.getpid()

def size(query):
    return [len(query), os.getpid()]

def loop(query):
    with open(query, "w") as file:
        file.write(str(os.getpid()))
    while True:
        pass
'''


def _program(folder: Path, function: str, options: str = "") -> Path:
    (folder / "helpers_hostile_workers.py").write_text(HELPERS)
    path = folder / f"{function}.decomp"
    path.write_text(f'handler f = python(function="helpers_hostile_workers:{function}"{options})\nmain f\n')
    return path


def _rows(folder: Path, questions: list[str]) -> Path:
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    return path


def _run_rows(folder: Path, function: str, questions: list[str]) -> dict[int, dict]:
    """`decomp run --input` in a process of its own (its own fork server); the result lines by index."""
    program, rows = _program(folder, function), _rows(folder, questions)
    done = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "--input", str(rows),
                           "--run-dir", str(folder / "run"), "--cache", "off"],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    assert done.returncode in (0, 3), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    results = (folder / "run" / "results.jsonl").read_text().splitlines()
    return {line["index"]: line for line in map(json.loads, results)}


NOT_THE_REPLY = "its worker process's connection carried something that is not the reply to this call"


@pytest.mark.slow
def test_a_thread_writing_replies_never_gives_a_row_another_rows_answer(tmp_path):
    questions = [f"q{i}" for i in range(40)]
    lines = _run_rows(tmp_path, "shift", questions)
    assert sorted(lines) == list(range(40))
    wrong = [i for i, line in lines.items() if "answer" in line and line["answer"] != questions[i].upper()]
    assert wrong == [], [lines[i] for i in wrong]
    for line in lines.values():
        assert "answer" in line or NOT_THE_REPLY in line["error"], line
    assert any("answer" in line for line in lines.values())  # workers replaced, the run goes on


@pytest.mark.slow
def test_a_function_writing_to_every_descriptor_fails_alone(tmp_path):
    questions = ["bad" if i == 5 else f"q{i}" for i in range(40)]
    lines = _run_rows(tmp_path, "scribble", questions)
    assert NOT_THE_REPLY in lines[5]["error"], lines[5]
    assert "the worker was replaced" in lines[5]["error"]
    assert all(lines[i].get("answer") == questions[i].upper() for i in range(40) if i != 5), lines


def _load(folder: Path, function: str, options: str = ""):
    session = Session()
    return session, session.load(_program(folder, function, options))


def _answer(session, module, question: str = "q"):
    return session.run(module, {"question": question})


@pytest.fixture
def one_worker(monkeypatch):
    monkeypatch.setattr(workers, "_POOL", workers.WorkerPool(size=1))
    yield
    workers._POOL.shutdown()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces the memory limit")
def test_a_function_cannot_raise_its_memory_limit(tmp_path):
    session, module = _load(tmp_path, "escape", ", memory=256")
    error = _answer(session, module).error
    assert error.endswith("function helpers_hostile_workers:escape used more than its memory limit of 256 MiB "
                          "(raise it with the handler's memory=MB option or the run's --handler-memory MB)"), error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces the memory limit")
def test_a_worker_held_to_one_limit_is_not_given_a_call_of_another(tmp_path, one_worker):
    small_session, small = _load(tmp_path, "pid", ", memory=64")
    first = _answer(small_session, small).answer
    assert _answer(small_session, small).answer == first  # the same limit: the same worker
    big_session, big = _load(tmp_path, "grow", ", memory=256")
    assert _answer(big_session, big, "128").answer == 128 * 2**20  # past 64 MiB: a worker of its own
    again = _answer(small_session, small).answer
    assert again != first and isinstance(again, int)
    assert "memory limit of 64 MiB" in _answer(*_load(tmp_path, "grow", ", memory=64"), "128").error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces the memory limit")
def test_what_earlier_calls_kept_counts_and_the_error_says_so(tmp_path, one_worker):
    session, module = _load(tmp_path, "keep", ", memory=64")
    assert isinstance(_answer(session, module, "40").answer, int)
    error = _answer(session, module, "40").error
    assert "used more than its memory limit of 64 MiB" in error, error
    assert re.search(r"; its worker process held 4\d(\.\d)? MiB of it from earlier calls$", error), error
    assert isinstance(_answer(session, module, "40").answer, int)  # a fresh worker


def test_a_call_that_leaves_a_thread_running_retires_its_worker(tmp_path, one_worker):
    session, module = _load(tmp_path, "lingering")
    first = _answer(session, module).answer
    second = _answer(session, module).answer
    assert isinstance(first, int) and isinstance(second, int) and second != first


def test_a_program_a_function_starts_and_keeps_stays_with_its_worker(tmp_path, one_worker):
    session, module = _load(tmp_path, "keeper")
    assert _answer(session, module, "start").answer == _answer(session, module, "stop").answer


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_child_a_function_forks_holding_the_connection_retires_its_worker(tmp_path, one_worker):
    session, module = _load(tmp_path, "forked")
    first = _answer(session, module, "A").answer
    later = _answer(session, module, "B")  # the child writes to the connection meanwhile
    assert later.error is None and isinstance(later.answer, int) and later.answer != first, later.error


def test_a_partial_frame_ends_as_its_calls_time_limit(tmp_path, one_worker):
    session, module = _load(tmp_path, "partial", ", timeout=1")
    first = _answer(session, module).answer  # the worker started, off the clock
    began = time.monotonic()
    error = _answer(session, module, "bad").error
    assert time.monotonic() - began < 1 + workers.KILL_GRACE + 1.5
    assert "helpers_hostile_workers:partial ran longer than its time limit of 1 s" in error, error
    again = _answer(session, module).answer
    assert isinstance(again, int) and again != first


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces the memory limit")
def test_a_request_too_big_for_a_held_worker_goes_to_a_fresh_one(tmp_path, one_worker):
    session, module = _load(tmp_path, "size", ", memory=32")
    held = _answer(session, module).answer[1]  # the worker is held to 32 MiB more than it used
    big = _answer(session, module, "x" * (64 * 2**20))
    assert big.error is None and big.answer[0] == 64 * 2**20 and big.answer[1] != held, big.error


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="only Linux enforces the memory limit")
def test_calls_of_two_memory_limits_keep_their_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "_POOL", workers.WorkerPool(size=2))
    sessions = [_load(tmp_path, "pid", f", memory={mb}") for mb in (64, 128)]

    async def calls():
        async def caller(number):
            session, module = sessions[number % 2]
            return [(await session.arun(module, {"question": "q"})).answer for _ in range(10)]
        return await asyncio.gather(*(caller(number) for number in range(4)))

    try:
        pids = {pid for answers in asyncio.run(calls()) for pid in answers}
    finally:
        workers._POOL.shutdown()
    assert all(isinstance(pid, int) for pid in pids) and len(pids) <= 4, pids  # 2 needed; 40 were it thrashing


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_what_arrives_on_an_idle_workers_connection_replaces_it_before_the_next_call(tmp_path, one_worker):
    session, module = _load(tmp_path, "escaped")
    first = _answer(session, module).answer
    time.sleep(1)  # the orphan wrote its forged reply meanwhile
    pid_session, pid_module = _load(tmp_path, "pid")
    second = _answer(pid_session, pid_module)
    assert second.error is None and isinstance(second.answer, int) and second.answer != first


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_programs_a_function_runs_do_not_inherit_its_workers_connection(tmp_path):
    seen = _answer(*_load(tmp_path, "inherited")).answer
    assert "pipe:" in seen and "socket:" not in seen, seen  # its own output pipes, not the connection


# ---- the parent's death
def _children() -> dict[int, list[int]]:
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            found.setdefault(ppid, []).append(int(entry.name))
    return found


def _tree(root: int) -> set[int]:
    children, found, todo = _children(), set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_workers_fork_server_and_resource_tracker_die_with_the_run(tmp_path, sig):
    marker = tmp_path / "worker.pid"
    program = _program(tmp_path, "loop", ", timeout=600")
    run = subprocess.Popen([sys.executable, "-m", "decomp.runtime.cli", "run", str(program), "-q", str(marker),
                            "--cache", "off"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = int(marker.read_text())
        tree = _tree(run.pid)
        assert worker in tree and len(tree) >= 3, tree  # the worker, the fork server, the resource tracker
        run.send_signal(sig)
        run.wait(30)
        deadline = time.monotonic() + 5
        while any(map(_alive, tree)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in tree if _alive(pid)] == []
    finally:  # what the test started, should it fail
        run.kill()
        for pid in tree:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
