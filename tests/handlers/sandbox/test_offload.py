"""Bounded synchronous work (decomp.handlers.sandbox.offload, Handler.offload / time_limit): blocking
handler code runs in a worker thread under a time limit, so the event loop (every other row)
goes on; an overrun is a clear error; a handler that leaves too many calls running is refused;
async functions are bounded too; the limit comes from the handler, the session or the default."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import asyncio
import contextvars
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from decomp.dsl.errors import HandlerError
from decomp.handlers.sandbox import offload
from decomp.handlers.base import LoadContext
from decomp.handlers.sandbox.offload import (DEFAULT_TIMEOUT, MAX_OVERRUNS, Limits, TimeLimitError, bounded, bounded_await,
                                     overruns)
from decomp.handlers.kinds.python import PythonHandler
from decomp.handlers.kinds.regex import RegexHandler


class Owner:
    """Stands for a handler: what overruns are counted against."""


async def ticking(work, period=0.01):
    """Run `work` while a ticker counts how often the event loop got to run it."""
    ticks = 0
    done = asyncio.Event()

    async def tick():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(period)

    ticker = asyncio.ensure_future(tick())
    try:
        return await work, ticks
    finally:
        done.set()
        await ticker


ROW = contextvars.ContextVar("test_row", default=None)


def test_the_work_runs_in_a_worker_thread_with_the_callers_context():
    seen = []

    def work(x):
        seen.append((threading.current_thread() is threading.main_thread(), ROW.get()))
        return x * 2

    async def main():
        ROW.set("row 3")
        return await bounded(work, 21, limit=5, owner=Owner(), what="the work")

    assert asyncio.run(main()) == 42
    assert seen == [(False, "row 3")]  # not the loop's thread; the caller's context visible there


def stuck_work():
    """A blocking call that ends only when released: (the function, the list it appends to as
    each call starts, the event that releases them all)."""
    started, release = [], threading.Event()

    def stuck():
        started.append(1)
        release.wait(30)
    return stuck, started, release


def test_what_the_work_raises_reaches_the_caller():
    def work():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        asyncio.run(bounded(work, limit=5, owner=Owner(), what="the work"))


def test_a_blocking_call_leaves_the_loop_free_and_overruns_with_a_clear_error():
    release = threading.Event()

    def stuck():
        release.wait(30)  # a blocking call that will not end by itself in time

    async def main():
        return await ticking(bounded(stuck, limit=0.5, owner=Owner(), what="function helpers:stuck"))

    try:
        with pytest.raises(TimeLimitError) as info:
            asyncio.run(main())
    finally:
        release.set()
    message = str(info.value)
    assert "function helpers:stuck ran longer than its time limit of 0.5 s" in message
    assert "timeout=SECONDS" in message and "--handler-timeout SECONDS" in message
    assert isinstance(info.value, HandlerError)


def test_the_loop_keeps_running_other_work_during_a_blocking_call():
    def slow():
        time.sleep(0.6)  # blocks its thread, not the loop
        return "done"

    answer, ticks = asyncio.run(ticking(bounded(slow, limit=10, owner=Owner(), what="slow")))
    assert answer == "done"
    assert ticks >= 5  # the loop ran the ticker meanwhile (a blocked loop gives 1)


def test_a_handler_with_too_many_overruns_still_running_is_refused_at_once():
    owner, (stuck, started, release) = Owner(), stuck_work()

    async def main():
        for _ in range(MAX_OVERRUNS):
            with pytest.raises(TimeLimitError, match="ran longer than its time limit"):
                await bounded(stuck, limit=0.05, owner=owner, what="the work")
        assert overruns(owner) == MAX_OVERRUNS
        begun = time.monotonic()
        with pytest.raises(TimeLimitError) as info:
            await bounded(stuck, limit=10, owner=owner, what="the work")
        return info.value, time.monotonic() - begun

    try:
        error, waited = asyncio.run(main())
    finally:
        release.set()
    assert len(started) == MAX_OVERRUNS  # the refused call never started
    assert f"{MAX_OVERRUNS} earlier calls of this handler ran past their time limit" in str(error)
    assert "still running" in str(error) and waited < 5
    deadline = time.monotonic() + 10
    while overruns(owner) and time.monotonic() < deadline:  # released: the threads end, the count drops
        time.sleep(0.01)
    assert overruns(owner) == 0


def test_another_handler_is_not_refused_for_one_handlers_overruns():
    stuck_owner, release = Owner(), threading.Event()

    async def main():
        for _ in range(MAX_OVERRUNS):
            with pytest.raises(TimeLimitError):
                await bounded(release.wait, 30, limit=0.05, owner=stuck_owner, what="stuck")
        return await bounded(lambda: "fine", limit=5, owner=Owner(), what="other")

    try:
        assert asyncio.run(main()) == "fine"
    finally:
        release.set()


def test_async_work_is_bounded_too():
    async def forever():
        await asyncio.sleep(30)

    with pytest.raises(TimeLimitError, match="the coroutine ran longer than its time limit of 0.2 s"):
        asyncio.run(bounded_await(forever(), limit=0.2, what="the coroutine"))


def test_an_async_functions_own_timeout_error_is_not_taken_for_an_overrun():
    async def own():
        raise TimeoutError("the service timed out")

    with pytest.raises(TimeoutError, match="the service timed out") as info:
        asyncio.run(bounded_await(own(), limit=5, what="x"))
    assert not isinstance(info.value, TimeLimitError)


def calls(**limits):
    """A call's view of its session's limits (all `Handler.time_limit` reads of it)."""
    return SimpleNamespace(limits=Limits(**limits))


def test_the_limit_is_the_handlers_option_else_the_sessions_else_the_default():
    ctx = LoadContext(Path("."))
    plain = PythonHandler("p", PythonHandler.Options(function="capwords"), None, ctx)
    own = PythonHandler("p", PythonHandler.Options(function="capwords", timeout=2.5), None, ctx)
    assert plain.time_limit(calls()) == DEFAULT_TIMEOUT == 10.0
    assert plain.time_limit(calls(timeout=30)) == 30 and own.time_limit(calls(timeout=30)) == 2.5
    # a kind's tighter default (a regex search) holds unless the session's is tighter still
    rx = RegexHandler("r", RegexHandler.Options(pattern="a"), None, ctx)
    assert rx.time_limit(calls()) == 1.0
    assert rx.time_limit(calls(timeout=0.3)) == 0.3
    for bad in ({"timeout": 0}, {"memory_mb": -1}, {"answer_mb": 0}):
        with pytest.raises(ValueError, match="> 0"):
            Limits(**bad)


def test_a_timeout_option_must_be_positive():
    ctx = LoadContext(Path("."))
    bad = PythonHandler("p", PythonHandler.Options(function="capwords", timeout=0.0), None, ctx)
    assert [e.message for e in bad.check()] == ["timeout must be > 0 seconds, got 0.0"]


def test_worker_threads_are_daemons():
    names = []

    def work():
        names.append(threading.current_thread().daemon)

    asyncio.run(bounded(work, limit=5, owner=Owner(), what="x"))
    assert names == [True]  # a call left running never keeps the process from exiting


def test_calls_beyond_the_workers_wait_for_a_free_one_without_losing_time(monkeypatch):
    monkeypatch.setattr(offload, "MAX_WORKERS", 2)
    offload._SLOTS.clear()

    def work(i):
        time.sleep(0.3)
        return i

    async def main():
        owner = Owner()
        return await asyncio.gather(*(bounded(work, i, limit=0.5, owner=owner, what="w") for i in range(6)))

    # six calls of 0.3 s, two at a time: 0.9 s in all, but each within its 0.5 s limit
    assert asyncio.run(main()) == list(range(6))


# ---- what the function raises: only ordinary errors reach the loop
def test_a_stop_iteration_reaches_the_caller_at_once_as_a_runtime_error():
    def stop():
        return next(iter([]))

    async def stop_async():
        raise StopAsyncIteration("done")

    for fn, name in ((stop, "StopIteration"), (lambda: stop_async().send(None), "StopAsyncIteration")):
        begun = time.monotonic()
        with pytest.raises(RuntimeError, match=f"the call raised {name}") as info:
            asyncio.run(bounded(fn, limit=2, owner=Owner(), what="f"))
        assert time.monotonic() - begun < 1  # not a false overrun after the whole limit
        assert type(info.value.__cause__).__name__ == name
        assert not isinstance(info.value, TimeLimitError)


def test_a_python_function_raising_stop_iteration_fails_its_row_with_what_it_raised():
    from decomp.handlers.registry import Registry
    from decomp.runtime.engine.session import Session

    registry = builtin_registry()
    registry.add_function(lambda query: next(iter([])), "work")
    session = Session(registry=registry)
    module = session.load("x.decomp", text='handler f = python(function="work", timeout=2)\n'
                                           'program p(question) {\n    QS: [f] #question\n}\nmain p\n')
    begun = time.monotonic()
    result = session.run(module, {"question": "q"})
    assert time.monotonic() - begun < 1.5
    assert "function work raised RuntimeError: the call raised StopIteration()" in result.error
    assert "time limit" not in result.error


class Stop(BaseException):
    """Not an `Exception`: would end the whole run if it reached the event loop."""


@pytest.mark.parametrize("error", [SystemExit(3), KeyboardInterrupt(), GeneratorExit(), Stop("halt"),
                                   asyncio.CancelledError()], ids=lambda e: type(e).__name__)
def test_a_base_exception_from_the_function_fails_its_own_call_only(error):
    def bye():
        raise error

    async def other():
        await asyncio.sleep(0.1)
        return "other row done"

    async def main():
        return await asyncio.gather(bounded(bye, limit=2, owner=Owner(), what="f"), other(), return_exceptions=True)

    failed, done = asyncio.run(main())  # before: SystemExit & co. left asyncio.run, ending the run
    assert done == "other row done"
    assert type(failed) is RuntimeError and failed.__cause__ is error
    assert str(failed) == f"the call raised {error!r}"


# ---- the bounds hold: slots are held until the thread returns
def test_a_burst_of_calls_leaves_at_most_max_overruns_running_past_their_limit():
    owner, (stuck, started, release) = Owner(), stuck_work()

    async def main():
        return await asyncio.gather(*(bounded(stuck, limit=0.05, owner=owner, what="the work") for _ in range(10)),
                                    return_exceptions=True)

    begun = time.monotonic()
    try:
        errors = asyncio.run(main())
        assert time.monotonic() - begun < 2
        assert len(started) == MAX_OVERRUNS and overruns(owner) == MAX_OVERRUNS  # before: all 10 ran on
    finally:
        release.set()
    assert all(isinstance(e, TimeLimitError) for e in errors)
    overran = [e for e in errors if "ran longer than its time limit" in str(e)]
    refused = [e for e in errors if f"{MAX_OVERRUNS} earlier calls of this handler ran past" in str(e)]
    assert len(overran) == MAX_OVERRUNS and len(refused) == 10 - MAX_OVERRUNS


def _settled(owner, seconds=5.0):
    """Wait until `owner`'s abandoned threads returned (its slots are free again)."""
    deadline = time.monotonic() + seconds
    held = getattr(offload._POOL, "held", {})
    while (owner in held or overruns(owner)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return owner not in held and not overruns(owner)


def busy():
    """Worker slots of the running loop held now."""
    return getattr(offload._SLOTS[asyncio.get_running_loop()], "busy", None)


def test_a_call_that_overran_keeps_its_worker_until_its_thread_returns(monkeypatch):
    monkeypatch.setattr(offload, "MAX_WORKERS", 2)
    offload._SLOTS.clear()
    release, ran = threading.Event(), []
    owners = [Owner(), Owner()]

    async def main():
        for owner in owners:  # two calls overrun, their threads run on
            with pytest.raises(TimeLimitError, match="ran longer"):
                await bounded(release.wait, 30, limit=0.05, owner=owner, what="stuck")
        threads = threading.active_count()
        late = asyncio.ensure_future(bounded(lambda: ran.append(time.monotonic()) or "late", limit=0.1,
                                             owner=Owner(), what="late"))
        await asyncio.sleep(0.3)
        waited = not ran and not late.done()  # before: it ran at once, a third thread at work
        released = time.monotonic()
        release.set()
        answer = await late  # its clock started when it got a worker: 0.3 s waited, yet no overrun
        await asyncio.sleep(0.05)
        return waited, threads, answer, ran[0] - released, busy()

    try:
        waited, threads, answer, delay, busy_after = asyncio.run(main())
    finally:
        release.set()
    assert waited and answer == "late" and delay >= 0 and busy_after == 0
    assert all(_settled(owner) for owner in owners)


def test_a_cancelled_call_keeps_its_worker_until_its_thread_returns_and_leaks_none(monkeypatch):
    monkeypatch.setattr(offload, "MAX_WORKERS", 1)
    offload._SLOTS.clear()
    release, ran = threading.Event(), []
    owner = Owner()

    async def main():
        running = asyncio.ensure_future(bounded(release.wait, 30, limit=5, owner=owner, what="running"))
        await asyncio.sleep(0.1)
        waiting = asyncio.ensure_future(bounded(ran.append, "waiting", limit=5, owner=owner, what="waiting"))
        await asyncio.sleep(0.05)
        waiting.cancel()  # cancelled while waiting for a worker
        running.cancel()  # cancelled while its thread runs: the worker stays taken
        await asyncio.gather(running, waiting, return_exceptions=True)
        after_cancel = busy()
        third = asyncio.ensure_future(bounded(ran.append, "third", limit=5, owner=owner, what="third"))
        await asyncio.sleep(0.2)
        before_release = list(ran)  # before: the cancelled call's worker was free at once
        release.set()
        await third
        await asyncio.sleep(0.05)
        waiters = getattr(offload._SLOTS[asyncio.get_running_loop()], "waiters", ())
        return after_cancel, before_release, busy(), len(waiters)

    try:
        after_cancel, before_release, busy_after, waiters = asyncio.run(main())
    finally:
        release.set()
    assert before_release == [] and ran == ["third"] and after_cancel == 1
    assert busy_after == 0 and waiters == 0 and _settled(owner)


def test_a_call_waits_for_its_handlers_calls_left_by_an_earlier_run():
    owner, release = Owner(), threading.Event()

    async def leave():  # the run ends with its calls cancelled, their threads running on
        for _ in range(MAX_OVERRUNS):
            asyncio.ensure_future(bounded(release.wait, 30, limit=5, owner=owner, what="left"))
        await asyncio.sleep(0.1)

    async def later():
        threading.Timer(0.3, release.set).start()
        begun = time.monotonic()
        answer = await bounded(lambda: "fine", limit=5, owner=owner, what="later")
        return answer, time.monotonic() - begun

    try:
        asyncio.run(leave())
        answer, waited = asyncio.run(later())  # another loop: woken when those threads return
    finally:
        release.set()
    assert answer == "fine" and 0.2 < waited < 2  # before: it ran at once, a fifth thread of the handler
    assert _settled(owner)


def test_a_thread_that_cannot_start_leaves_no_call_behind(monkeypatch):
    monkeypatch.setattr(offload, "_POOL", offload._Pool())  # no idle thread: the call must start one
    monkeypatch.setattr(offload, "MAX_WORKERS", 1)
    offload._SLOTS.clear()
    owner = Owner()

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    async def main():
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", no_thread)
            with pytest.raises(RuntimeError, match="can't start new thread"):
                await bounded(lambda: "never", limit=5, owner=owner, what="f")
        assert offload._POOL._running == {} and overruns(owner) == 0  # before: registered for ever
        return await bounded(lambda: "fine", limit=5, owner=owner, what="f")  # its worker is free again

    assert asyncio.run(main()) == "fine"
    assert _settled(owner)
