"""Python handlers in worker processes (`decomp.handlers.sandbox.workers`): a call past its deadline is
killed and the other rows go on; a call past its memory limit fails with a worded error; what
the function raises or dies of is that call's error; workers are reused and replaced; functions
a worker cannot import (lambdas, closures) still run in a thread."""
from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

from decomp import Session
from decomp.handlers.sandbox import workers
from decomp.handlers.kinds.python import worker_target
from decomp.handlers.plugins import builtin_registry
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.storage.datasets import Row

HELPERS = '''import asyncio, os, time

class Odd(BaseException):
    pass

def pid(query):
    return os.getpid()

def sleepy(query):
    time.sleep(60)

def spin(query):
    while True:
        pass

async def forever(query):
    while True:
        await asyncio.sleep(1)

async def blocking(query):
    time.sleep(60)

def shared(query):  # C code that holds the interpreter lock for ever
    a = []
    for _ in range(60):
        a = [a, a]
    return repr(a)

def huge(query):
    return len("x" * 10**10)

def five_gb(query):
    return len(bytearray(5 * 2**30))

def leave(query):
    raise SystemExit(0)

def interrupt(query):
    raise KeyboardInterrupt("stop")

def generator_exit(query):
    raise GeneratorExit()

def odd(query):
    raise Odd("not an Exception")

async def cancelled(query):
    raise asyncio.CancelledError()

def fails(query):
    return helper_that_fails(query)

def helper_that_fails(query):
    raise ValueError(f"bad {query}")

def exits(query):
    os._exit(7)

def segfault(query):
    import ctypes
    ctypes.string_at(0)

def big(query):
    return "x" * (2 * 2**20)

def env(query):
    return [os.environ.get("DECOMP_TEST_WORKER_ENV"), os.getcwd()]

def pick(query):
    if query == "slow":
        time.sleep(60)
    if query == "hog":
        return len("x" * (5 * 2**30))
    return query.upper()

def second(query):
    time.sleep(1)
    return query

def version(query):
    return "v1"

def exits_later(query):
    import threading
    threading.Timer(0.2, os._exit, (9,)).start()
    return os.getpid()

def mark(query):
    with open(query, "w") as file:
        file.write(str(os.getpid()))
    time.sleep(60)
'''


@pytest.fixture
def program(tmp_path):
    """A program folder with helpers_workers.py; `program(function, options)` loads a
    one-handler program calling it."""
    (tmp_path / "helpers_workers.py").write_text(HELPERS)

    def load(function: str, options: str = "", **session):
        path = tmp_path / f"{function}.decomp"
        path.write_text(f'handler f = python(function="helpers_workers:{function}"{options})\n'
                        'program p(question) {\n    QS: [f] #question\n}\nmain p\n')
        s = Session(**session)
        return s, s.load(path)
    return load


def answer(session, module, question="q"):
    return session.run(module, {"question": question})


def timed(session, module, question="q"):
    started = time.monotonic()
    result = answer(session, module, question)
    return result, time.monotonic() - started


@pytest.mark.parametrize("function", ["sleepy", "spin", "forever", "blocking", "shared"])
def test_a_call_past_its_limit_is_stopped_within_the_limit_and_a_second(program, function):
    session, module = program(function, ", timeout=1")
    result, seconds = timed(session, module)
    assert "ran longer than its time limit of 1 s" in result.error, result.error
    assert "timeout=SECONDS" in result.error and "--handler-timeout" in result.error
    assert seconds < 1 + 3  # killed, not abandoned: a generous second for the loaded machine
    ok, ok_module = program("pid")
    assert answer(ok, ok_module).answer != os.getpid()  # a fresh worker answers


def test_the_killed_worker_is_gone_and_replaced(program, tmp_path):
    marker = tmp_path / "pid.txt"
    session, module = program("mark", ", timeout=1")
    assert "ran longer" in answer(session, module, str(marker)).error
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def batch(session, module, questions):
    out = io.StringIO()
    rows = [Row(i, f"r{i}", {"question": q}, None) for i, q in enumerate(questions)]
    started = time.monotonic()
    asyncio.run(run_rows(session, module, rows, out))
    lines = {line["index"]: line for line in map(json.loads, out.getvalue().splitlines())}
    return lines, time.monotonic() - started


@pytest.mark.parametrize("hostile, error", [("slow", "ran longer than its time limit of 1 s"),
                                             ("hog", "used more than its memory limit of 1,024 MiB")])
def test_a_hostile_row_ends_alone_and_the_other_rows_are_answered(program, hostile, error):
    session, module = program("pick", ", timeout=1")
    lines, seconds = batch(session, module, ["a", hostile, "c"])
    assert lines[0]["answer"] == "A" and lines[2]["answer"] == "C"
    assert error in lines[1]["error"], lines[1]
    assert seconds < 1 + 5


@pytest.mark.parametrize("function", ["huge", "five_gb"])
def test_a_call_past_its_memory_limit_fails_with_a_worded_error(program, function):
    session, module = program(function)
    result, seconds = timed(session, module)
    assert result.error.endswith(f"function helpers_workers:{function} used more than its memory limit of 1,024 MiB "
                                 "(raise it with the handler's memory=MB option or the run's --handler-memory MB)")
    assert seconds < 10


def test_the_memory_limit_is_the_handlers_option_else_the_sessions(program):
    session, module = program("five_gb", ", memory=256")
    assert "memory limit of 256 MiB" in answer(session, module).error
    session, module = program("five_gb", handler_memory_mb=300)
    assert "memory limit of 300 MiB" in answer(session, module).error
    session, module = program("pid", ", memory=64")
    assert isinstance(answer(session, module).answer, int)  # a small limit still leaves room to answer
    with pytest.raises(ValueError, match="handler_memory_mb must be > 0"):
        Session(handler_memory_mb=0)


def test_a_zero_memory_limit_is_a_check_error(program):
    with pytest.raises(Exception, match="memory must be > 0 MB, got 0.0"):
        program("pid", ", memory=0.0")


def test_the_memory_limit_is_no_part_of_the_cache_key(program):
    from decomp.runtime.engine.call import EngineCall
    from decomp.runtime.engine.tracing import TraceNode

    keys = []
    for options in ("", ", memory=512"):
        session, module = program("pid", options)
        handler = module.handlers["f"]
        keys.append(handler.cache_parts(EngineCall("q", (), {}, (), None, session, handler, TraceNode("call"))))
    assert keys[0] == keys[1] and "memory" not in keys[0]["options"]


@pytest.mark.parametrize("function, raised", [
    ("leave", "SystemExit: 0"), ("interrupt", "KeyboardInterrupt: stop"), ("generator_exit", "GeneratorExit"),
    ("odd", "Odd: not an Exception"), ("cancelled", "CancelledError"),
])
def test_what_the_function_raises_is_that_calls_error(program, function, raised):
    session, module = program(function)
    result = answer(session, module)
    assert result.error.endswith(f"function helpers_workers:{function} raised {raised}"), result.error
    assert "helpers_workers.py" in _details(result)
    assert answer(*program("pid")).answer != os.getpid()  # the run, and the workers, go on


def _details(result) -> str:
    found = []

    def walk(node):
        if getattr(node, "details", None):
            found.append(node.details)
        for child in getattr(node, "children", ()):
            walk(child)
    walk(result.trace)
    return "\n".join(found)


def test_the_users_traceback_comes_back_in_the_details(program):
    session, module = program("fails")
    result = answer(session, module, "x")
    assert result.error.endswith("function helpers_workers:fails raised ValueError: bad x")
    details = _details(result)
    assert details.startswith("Traceback (most recent call last):")
    assert "helpers_workers.py" in details and "helper_that_fails" in details and "raise ValueError" in details
    assert "decomp" not in details.replace("helpers_workers", "").replace(".decomp", "")


@pytest.mark.parametrize("function, ending", [
    ("exits", "its worker process exited with code 7 before answering"),
    ("segfault", f"its worker process was killed by signal {signal.SIGSEGV.name} before answering"),
])
def test_a_worker_that_dies_is_that_calls_error(program, function, ending):
    session, module = program(function)
    assert answer(session, module).error.endswith(f"function helpers_workers:{function}: {ending}")
    assert isinstance(answer(*program("pid")).answer, int)


def test_a_worker_that_died_while_idle_is_replaced_before_the_next_call(program, monkeypatch):
    monkeypatch.setattr(workers, "_POOL", workers.WorkerPool(size=1))
    try:
        session, module = program("exits_later")
        first = answer(session, module).answer  # answered, then its worker ends itself
        time.sleep(1)
        pid_session, pid_module = program("pid")
        second = answer(pid_session, pid_module).answer
    finally:
        workers._POOL.shutdown()
    assert isinstance(first, int) and isinstance(second, int) and second != first


def test_an_answer_over_the_size_limit_is_refused_by_its_size(program, monkeypatch):
    monkeypatch.setattr(workers, "MAX_ANSWER_BYTES", 2**20)
    session, module = program("big")
    error = answer(session, module).error
    assert error.endswith("function helpers_workers:big answered with 2.0 MiB of JSON, over the limit of 1 MiB "
                          "for an answer"), error
    monkeypatch.setattr(workers, "MAX_ANSWER_BYTES", 4 * 2**20)
    assert answer(session, module).answer == "x" * 2 * 2**20


def test_workers_are_reused_and_are_not_the_parent(program):
    session, module = program("pid")
    pids = {answer(session, module).answer for _ in range(6)}
    assert os.getpid() not in pids
    assert len(pids) <= workers.POOL_SIZE


def test_a_function_sees_the_parents_environment_and_folder_as_they_are_now(program, monkeypatch, tmp_path):
    session, module = program("env")
    answer(session, module)  # a worker started before the change
    monkeypatch.setenv("DECOMP_TEST_WORKER_ENV", "now")
    monkeypatch.chdir(tmp_path)
    assert answer(session, module).answer == ["now", str(tmp_path)]


def test_an_edited_module_is_imported_again_in_the_worker(program, tmp_path):
    session, module = program("version")
    assert [answer(session, module).answer for _ in range(workers.POOL_SIZE)] == ["v1"] * workers.POOL_SIZE
    (tmp_path / "helpers_workers.py").write_text(HELPERS.replace('return "v1"', 'return "v2"'))
    assert [answer(session, module).answer for _ in range(workers.POOL_SIZE)] == ["v2"] * workers.POOL_SIZE


def test_the_wait_for_a_free_worker_does_not_count_against_the_limit(program, monkeypatch):
    monkeypatch.setattr(workers, "_POOL", workers.WorkerPool(size=1))
    session, module = program("second", ", timeout=1.5")
    try:
        lines, seconds = batch(session, module, ["q0", "q1"])  # one after the other on one worker: 2 s
    finally:
        workers._POOL.shutdown()
    assert [lines[0].get("answer"), lines[1].get("answer")] == ["q0", "q1"], lines
    assert seconds >= 2


def test_a_call_given_up_kills_its_worker(program, tmp_path):
    marker = tmp_path / "given_up.txt"
    session, module = program("mark", ", timeout=100")
    handler = module.handlers["f"]

    async def give_up():
        task = asyncio.ensure_future(session.arun_handler(handler, str(marker)))
        while not marker.exists() or not marker.read_text():
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(asyncio.wait_for(give_up(), 30))
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_functions_a_worker_cannot_import_run_in_a_thread():
    registry = builtin_registry()
    registry.add_function(lambda query: os.getpid(), "lam")

    def closure(query):
        return os.getpid()
    registry.add_function(closure, "clo")
    session = Session(registry=registry)
    for name in ("lam", "clo"):
        module = session.load("x.decomp", text=f'handler f = python(function="{name}")\nmain f\n')
        assert session.run(module, {"question": "q"}).answer == os.getpid()
    assert worker_target(closure) is None and worker_target(len) is None
    target = worker_target(_module_level)
    assert target["qualname"] == "_module_level" and target["file"] == str(Path(__file__).resolve())


def _module_level(query):
    return query


def test_a_session_may_run_python_in_this_process_for_test_doubles(program):
    session, module = program("pid", python_workers=False)
    assert answer(session, module).answer == os.getpid()
    session, module = program("pid")
    assert answer(session, module).answer != os.getpid()


def test_an_answer_over_the_rows_answer_limit_is_sized_in_the_worker_and_never_sent(program, monkeypatch):
    from decomp.runtime.engine.budgets import Budget
    monkeypatch.setattr(workers, "MAX_ANSWER_BYTES", 2**10)  # a reply that crossed would be refused by its JSON
    session, module = program("big", budget=Budget(answer_mb=1))
    error = answer(session, module).error
    assert error.endswith("big.decomp:3:5: limit exceeded: the answer of [f] holds 2.0 MiB of text, over the "
                          "limit of 1 MiB (raise it with --max-answer-size MB)"), error
    monkeypatch.setattr(workers, "MAX_ANSWER_BYTES", 4 * 2**20)
    session, module = program("big", budget=Budget(answer_mb=3))
    assert answer(session, module).answer == "x" * 2 * 2**20
