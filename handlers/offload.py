"""Bounded synchronous work: a handler's blocking code runs off the event loop, under a time limit.

    answer = await bounded(fn, query, limit=10.0, owner=handler, what="the calculation")

Every synchronous piece of handler work (a Python function, the calculator, a regex match, a
template render) goes through `bounded` (kinds call `Handler.offload`), so a slow call stalls its
own row only: the other rows' steps go on. `bounded` runs `fn(*args)` in a worker thread (with
the caller's context variables) and waits at most `limit` seconds; an overrun is a
`HandlerError` that says what ran over, the limit and how to raise it. Async functions are
awaited under the same limit (`bounded_await`).

Python threads cannot be stopped: a call that overran is abandoned, not killed, and its thread
runs on until the function returns. The threads are daemon threads, so they never keep the
process from exiting, and each handler may leave at most `MAX_OVERRUNS` calls running past
their limit: while that many are, its further calls are refused at once with an error saying so
(they end the row, as a timeout would), instead of piling up threads. At most `MAX_WORKERS` calls
run at once per event loop; more wait for a free worker (the wait does not count against their
limit).

The limit of a call is the handler's `timeout=` option when written, else the run's setting
(`timeout_scope`: the session's `handler_timeout`, the CLI's `--handler-timeout`), else
`DEFAULT_TIMEOUT`.
"""
from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
import weakref
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator

from decomp.dsl.errors import HandlerError

#: Seconds one handler call's synchronous work may take when nothing else says.
DEFAULT_TIMEOUT = 10.0
#: Calls of one handler that may be left running past their limit before its calls are refused.
MAX_OVERRUNS = 4
#: Calls running at once in worker threads, per event loop.
MAX_WORKERS = 32

class TimeLimitError(HandlerError):
    """A call ran over its time limit, or was refused because earlier ones still run past theirs."""


_RUN_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar("decomp_handler_timeout", default=None)


def run_timeout() -> float:
    """The run's time limit for one handler call (`timeout_scope`), else `DEFAULT_TIMEOUT`."""
    seconds = _RUN_TIMEOUT.get()
    return DEFAULT_TIMEOUT if seconds is None else seconds


@contextmanager
def timeout_scope(seconds: float | None) -> Iterator[None]:
    """Within the block (and the tasks started in it), handlers that set no `timeout=` of their
    own get `seconds` (None: `DEFAULT_TIMEOUT`)."""
    if seconds is not None and not seconds > 0:
        raise ValueError(f"the handler time limit must be > 0 seconds, got {seconds}")
    token = _RUN_TIMEOUT.set(seconds)
    try:
        yield
    finally:
        _RUN_TIMEOUT.reset(token)


def overrun_message(what: str, limit: float, option: str | None) -> str:
    """The error of a call that ran over its limit: what, the limit, how to raise it."""
    how = (f"raise it with the handler's {option}=SECONDS option or the run's --handler-timeout SECONDS"
           if option else "raise it with the run's --handler-timeout SECONDS")
    return f"{what} ran longer than its time limit of {limit:g} s ({how})"


async def bounded(fn: Callable[..., Any], *args: Any, limit: float, owner: Any, what: str,
                  option: str | None = "timeout", grace: float = 0.0) -> Any:
    """`fn(*args)` in a worker thread, waited for at most `limit` seconds.

    owner:  what the calls are counted against (the handler): while `MAX_OVERRUNS` of its calls
            run past their limit, further ones are refused.
    what:   the work, for messages ("function helpers:slow", "the template").
    option: the handler's option that sets the limit (None: only the run's setting does).
    grace:  seconds waited beyond `limit` for work that stops itself at the limit (the
            message names `limit`, the one the user set).
    Raises what `fn` raised, or `TimeLimitError` (a `HandlerError`) on an overrun or a refusal."""
    _POOL.refuse_if_stuck(owner, what)
    loop = asyncio.get_running_loop()
    async with _slots(loop):
        future = loop.create_future()
        _POOL.submit(_Job(fn, args, future, loop, owner, limit + grace, contextvars.copy_context()))
        timer = loop.call_later(limit + grace, _expire, future, what, limit, option)
        try:
            return await future
        finally:
            timer.cancel()


def _expire(future: asyncio.Future, what: str, limit: float, option: str | None) -> None:
    if not future.done():
        future.set_exception(TimeLimitError(overrun_message(what, limit, option)))


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    """The worker's outcome, on the loop (unless the call was given up)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def bounded_await(awaitable: Awaitable[Any], *, limit: float, what: str, option: str | None = "timeout") -> Any:
    """`await awaitable` for at most `limit` seconds (cancelled past it: a `TimeLimitError`).

    Only awaiting is bounded: an async function that blocks the loop with synchronous code
    cannot be interrupted."""
    scope = asyncio.timeout(limit)  # in this task: no task of its own to cancel and wait for
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if not scope.expired():  # the function's own TimeoutError
            raise
        raise TimeLimitError(overrun_message(what, limit, option)) from None


def overruns(owner: Any) -> int:
    """How many calls of `owner` are running past their time limit now."""
    return _POOL.stuck(owner)


# ---- the workers
class _Job:
    __slots__ = ("fn", "args", "future", "loop", "owner", "limit", "context", "started")

    def __init__(self, fn, args, future, loop, owner, limit, context):
        self.fn, self.args, self.future, self.loop = fn, args, future, loop
        self.owner, self.limit, self.context = owner, limit, context
        self.started: float | None = None

    def run(self) -> None:
        if self.future.done():  # the caller gave up (cancelled) before it started
            return
        self.started = time.monotonic()
        result, error = None, None
        try:
            result = self.context.run(self.fn, *self.args)
        except BaseException as err:  # handed to the caller, whatever it is
            error = err
        try:
            self.loop.call_soon_threadsafe(_settle, self.future, result, error)
        except RuntimeError:  # the loop is closed: nobody waits for this answer any more
            pass

    def overran(self, now: float) -> bool:
        return self.started is not None and now - self.started > self.limit


class _Pool:
    """Daemon worker threads: one is started whenever a job finds none idle; a thread whose job
    is done waits for the next, or ends when enough others are idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = 0
        self._running: dict[Any, set[_Job]] = {}

    def submit(self, job: _Job) -> None:
        with self._lock:
            self._running.setdefault(job.owner, set()).add(job)
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that idle thread is this job's
        if start:
            threading.Thread(target=self._work, name="decomp-handler", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job.run()
            finally:
                with self._lock:
                    jobs = self._running.get(job.owner)
                    if jobs is not None:
                        jobs.discard(job)
                        if not jobs:
                            del self._running[job.owner]
                    if self._idle >= MAX_WORKERS:
                        return
                    self._idle += 1

    def stuck(self, owner: Any) -> int:
        now = time.monotonic()
        with self._lock:
            return sum(job.overran(now) for job in self._running.get(owner, ()))

    def refuse_if_stuck(self, owner: Any, what: str) -> None:
        jobs = self._running.get(owner)
        if jobs is None or len(jobs) < MAX_OVERRUNS:
            return
        stuck = self.stuck(owner)
        if stuck >= MAX_OVERRUNS:
            raise TimeLimitError(f"{what}: {stuck} earlier calls of this handler ran past their time limit and are "
                               "still running (a Python thread cannot be stopped), so it takes no more calls until "
                               "one of them returns")


_POOL = _Pool()
_SLOTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = weakref.WeakKeyDictionary()


def _slots(loop: asyncio.AbstractEventLoop) -> asyncio.Semaphore:
    """The loop's bound on calls in worker threads at once."""
    slots = _SLOTS.get(loop)
    if slots is None:
        slots = _SLOTS[loop] = asyncio.Semaphore(MAX_WORKERS)
    return slots
