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
process from exiting. A call holds its worker slot, and counts against its handler, until its
thread returns (not until its caller stops waiting): a handler runs at most `MAX_OVERRUNS` calls
in worker threads at once (more wait for one of them to return), so at most that many can be left
running past their limit, and while that many are, its further calls (waiting ones included) are
refused at once with an error saying so (they end the row, as a timeout would), instead of piling
up threads. At most `MAX_WORKERS` calls run at once per event loop; more wait for a free worker
(the wait does not count against their limit: a call's clock starts when it gets one).

What the function raises reaches the caller, except what cannot pass through the event loop as
an ordinary error: `StopIteration` (a future refuses it) and exceptions that are not `Exception`s
(`SystemExit`, `KeyboardInterrupt`, `GeneratorExit`, ...; raised on the loop they would end the
whole run) come as a `RuntimeError` naming them, with the original as its `__cause__`.

The limit of a call is the handler's `timeout=` option when written, else its session's
(`Limits`, handed to the call as `Call.limits`: the session's `handler_timeout`, the CLI's
`--handler-timeout`), else `DEFAULT_TIMEOUT`. User Python functions run in worker processes
instead, where a deadline stops them for real (`decomp.handlers.sandbox.workers`); their memory limit is
the handler's `memory=`, else the session's (`handler_memory_mb`, `--handler-memory`), else
`DEFAULT_MEMORY_MB`.

The wait for a worker thread is the call's queue time (`decomp.dsl.waits.waiting`), not its
service time.
"""
from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from decomp.dsl.errors import HandlerError
from decomp.dsl.waits import waiting

#: Seconds one handler call's synchronous work may take when nothing else says.
DEFAULT_TIMEOUT = 10.0
#: Calls of one handler that may run in worker threads at once, so the most that can be left
#: running past their limit: while that many are, its calls are refused.
MAX_OVERRUNS = 4
#: Calls running at once in worker threads, per event loop.
MAX_WORKERS = 32
#: MiB one call of a user's Python function may add to its worker process when nothing else says.
DEFAULT_MEMORY_MB = 1024.0

class TimeLimitError(HandlerError):
    """A call ran over its time limit, or was refused because earlier ones still run past theirs."""


@dataclass(frozen=True)
class Limits:
    """What one session lets each handler call use, handed to every call it makes (`Call.limits`)
    and never set for the process: two sessions in one process keep their own.

    timeout:   seconds one call's synchronous work may take when the handler writes no
               `timeout=` (`--handler-timeout`; None: `DEFAULT_TIMEOUT`)
    memory_mb: MiB one call of a user's Python function may add to its worker process when the
               handler writes no `memory=` (`--handler-memory`; None: `DEFAULT_MEMORY_MB`)
    answer_mb: MiB of text an answer made elsewhere (a worker process) may hold, refused there
               before it reaches the run's process (the budget's `answer_mb`; None: no limit)
    workers:   True: user Python runs in worker processes, stopped at its limits; False: in
               threads of this process, not contained (for test doubles that patch a helper's
               module in this process, and for a debugger)
    """

    timeout: float | None = None
    memory_mb: float | None = None
    answer_mb: float | None = None
    workers: bool = True

    def __post_init__(self) -> None:
        for name, keyword, unit in (("timeout", "handler_timeout", "seconds"),
                                    ("memory_mb", "handler_memory_mb", "MiB"), ("answer_mb", "answer_mb", "MiB")):
            value = getattr(self, name)  # named as the session's keyword (Session, RunOptions, Budget)
            if value is not None and not value > 0:
                raise ValueError(f"{keyword} must be > 0 {unit}, got {value}")

    @property
    def seconds(self) -> float:
        """The time limit of one call whose handler sets none."""
        return DEFAULT_TIMEOUT if self.timeout is None else self.timeout

    @property
    def memory(self) -> float:
        """The memory limit (MiB) of one python handler call whose handler sets none."""
        return DEFAULT_MEMORY_MB if self.memory_mb is None else self.memory_mb


#: The limits of a call whose session says nothing: every default.
DEFAULT_LIMITS = Limits()


def overrun_message(what: str, limit: float, option: str | None) -> str:
    """The error of a call that ran over its limit: what, the limit, how to raise it."""
    how = (f"raise it with the handler's {option}=SECONDS option or the run's --handler-timeout SECONDS"
           if option else "raise it with the run's --handler-timeout SECONDS")
    return f"{what} ran longer than its time limit of {limit:g} s ({how})"


async def bounded(fn: Callable[..., Any], *args: Any, limit: float, owner: Any, what: str,
                  option: str | None = "timeout", grace: float = 0.0) -> Any:
    """`fn(*args)` in a worker thread, waited for at most `limit` seconds.

    owner:  what the calls are counted against (the handler): at most `MAX_OVERRUNS` of its calls
            run at once, and while that many run past their limit, further ones are refused.
    what:   the work, for messages ("function helpers:slow", "the template").
    option: the handler's option that sets the limit (None: only the run's setting does).
    grace:  seconds waited beyond `limit` for work that stops itself at the limit (the
            message names `limit`, the one the user set).
    Raises what `fn` raised (see the module's docstring for `StopIteration` and exceptions that
    are not `Exception`s), or `TimeLimitError` (a `HandlerError`) on an overrun or a refusal."""
    loop = asyncio.get_running_loop()
    gate = _gate(loop)
    with waiting():
        await gate.acquire(owner, what)  # a worker slot and one of the owner's, held until the thread returns
    future = loop.create_future()
    job = _Job(fn, args, future, loop, gate, owner, limit + grace, contextvars.copy_context())
    try:
        _POOL.submit(job)
    except BaseException:
        gate.release()  # no thread runs it: the slots are free again at once
        raise
    timer = loop.call_later(limit + grace, _expire, job, what, limit, option)
    try:
        return await future
    finally:
        timer.cancel()
        future.cancel()  # given up (cancelled): a job not yet begun is skipped; its thread frees the slots


def _expire(job: "_Job", what: str, limit: float, option: str | None) -> None:
    job.expired = True
    if not job.future.done():
        job.future.set_exception(TimeLimitError(overrun_message(what, limit, option)))
    job.gate.pump()  # the owner's waiting calls are refused if it now has too many overruns


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    """The worker's outcome, on the loop (unless the call was given up)."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _finish(job: "_Job", result: Any, error: BaseException | None) -> None:
    """On the loop, once the job's thread returned: its outcome, and its worker slot freed."""
    try:
        _settle(job.future, result, error)
    finally:
        job.gate.release()


def _plain(err: BaseException) -> BaseException:
    """What the caller gets for `err`: itself, or a `RuntimeError` naming it (its cause) when it
    cannot be set on a future (`StopIteration`) or must not reach the loop (not an `Exception`:
    `SystemExit`, `KeyboardInterrupt`, `GeneratorExit`, a `CancelledError` that is not the
    caller's own, ...)."""
    if isinstance(err, Exception) and not isinstance(err, (StopIteration, StopAsyncIteration)):
        return err
    wrapped = RuntimeError(f"the call raised {err!r}").with_traceback(err.__traceback__)
    wrapped.__cause__ = err
    return wrapped


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
    __slots__ = ("fn", "args", "future", "loop", "gate", "owner", "limit", "context", "started", "expired")

    def __init__(self, fn, args, future, loop, gate, owner, limit, context):
        self.fn, self.args, self.future, self.loop, self.gate = fn, args, future, loop, gate
        self.owner, self.limit, self.context = owner, limit, context
        self.started = time.monotonic()  # its clock: it has its slots, a thread is on its way
        self.expired = False  # its caller stopped waiting at the limit

    def run(self) -> tuple[Any, BaseException | None]:
        """`fn(*args)` in the caller's context: (result, None) or (None, what the caller gets)."""
        if self.future.done():  # the caller gave up (cancelled) before it started
            return None, None
        try:
            return self.context.run(self.fn, *self.args), None
        except BaseException as err:  # handed to the caller, as an ordinary error
            return None, _plain(err)

    def overran(self, now: float) -> bool:
        return self.expired or now - self.started > self.limit


class _Pool:
    """Daemon worker threads: one is started whenever a job finds none idle; a thread whose job
    is done waits for the next, or ends when enough others are idle. It also counts, for each
    owner, its calls holding a slot (`held`: granted, until their thread returns) and those
    given to a thread (`running`), for all event loops: `lock` guards these and `waiting`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = 0
        self._running: dict[Any, set[_Job]] = {}
        self.held: dict[Any, int] = {}
        self.waiting: set[_Gate] = set()  # gates with calls waiting: woken when any job returns

    def submit(self, job: _Job) -> None:
        with self.lock:
            self._running.setdefault(job.owner, set()).add(job)
            start = self._idle == 0
            if not start:
                self._idle -= 1  # that idle thread is this job's
        if start:
            try:
                threading.Thread(target=self._work, name="decomp-handler", daemon=True).start()
            except BaseException:
                self._forget(job)  # never runs: not counted against its owner
                raise
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            result, error = None, None
            try:
                result, error = job.run()
            finally:
                self._forget(job)
                try:
                    job.loop.call_soon_threadsafe(_finish, job, result, error)
                except RuntimeError:  # the loop is closed: nobody waits for this answer any more
                    pass
                with self.lock:
                    if self._idle >= MAX_WORKERS:
                        return
                    self._idle += 1
            job = result = error = None  # nothing of it kept alive while this thread waits

    def _forget(self, job: _Job) -> None:
        """`job` runs no more: its owner's slot is free (for every loop, so wake the waiting)."""
        with self.lock:
            jobs = self._running.get(job.owner)
            if jobs is not None:
                jobs.discard(job)
                if not jobs:
                    del self._running[job.owner]
            self.give(job.owner)
            gates = [gate for gate in self.waiting if gate is not job.gate]
        for gate in gates:  # its own gate is pumped by `_finish`
            gate.wake()

    def give(self, owner: Any) -> None:
        """One of `owner`'s slots back (under `lock`)."""
        held = self.held.get(owner, 0) - 1
        if held > 0:
            self.held[owner] = held
        else:
            self.held.pop(owner, None)

    def stuck_locked(self, owner: Any, now: float) -> int:
        return sum(job.overran(now) for job in self._running.get(owner, ()))

    def stuck(self, owner: Any) -> int:
        now = time.monotonic()
        with self.lock:
            return self.stuck_locked(owner, now)

    def next_overrun(self, owner: Any, now: float) -> float | None:
        """When the next of `owner`'s running calls runs past its limit (under `lock`)."""
        return min((job.started + job.limit for job in self._running.get(owner, ()) if not job.overran(now)),
                   default=None)


def _refusal(what: str, stuck: int) -> TimeLimitError:
    return TimeLimitError(f"{what}: {stuck} earlier calls of this handler ran past their time limit and are "
                          "still running (a Python thread cannot be stopped), so it takes no more calls until "
                          "one of them returns")


class _Waiter:
    __slots__ = ("owner", "what", "future")

    def __init__(self, owner: Any, what: str, future: asyncio.Future) -> None:
        self.owner, self.what, self.future = owner, what, future


class _Gate:
    """One event loop's worker slots (`MAX_WORKERS`), and its calls waiting for a slot or for one
    of their owner's (`MAX_OVERRUNS`), first come first served. Used on the loop's thread; a
    worker thread only `wake`s it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)
        self.size = MAX_WORKERS
        self.busy = 0  # slots held: granted, until the job's thread returns
        self.waiters: deque[_Waiter] = deque()
        self.timer: asyncio.TimerHandle | None = None

    async def acquire(self, owner: Any, what: str) -> None:
        """A slot and one of `owner`'s, or `TimeLimitError` when `owner` has `MAX_OVERRUNS` calls
        still running past their limit (now or while this call waits)."""
        pool = _POOL
        with pool.lock:
            stuck = pool.stuck_locked(owner, time.monotonic())
            if stuck >= MAX_OVERRUNS:
                raise _refusal(what, stuck)
            if not self.waiters and self._free(pool, owner):
                self._grant(pool, owner)
                return
        waiter = _Waiter(owner, what, asyncio.get_running_loop().create_future())
        self.waiters.append(waiter)
        self.pump()
        try:
            await waiter.future
        except asyncio.CancelledError:
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                self.give_back(owner)  # granted, but the caller is gone
            else:
                self._drop(waiter)
            raise

    def _free(self, pool: _Pool, owner: Any) -> bool:
        return self.busy < self.size and pool.held.get(owner, 0) < MAX_OVERRUNS

    def _grant(self, pool: _Pool, owner: Any) -> None:
        self.busy += 1
        pool.held[owner] = pool.held.get(owner, 0) + 1

    def _drop(self, waiter: _Waiter) -> None:
        try:
            self.waiters.remove(waiter)
        except ValueError:
            pass
        if not self.waiters:
            with _POOL.lock:
                _POOL.waiting.discard(self)

    def give_back(self, owner: Any) -> None:
        """A granted slot and the owner's, never given to a thread."""
        with _POOL.lock:
            _POOL.give(owner)
        self.release()

    def release(self) -> None:
        """A slot free again (the owner's is given back by the pool)."""
        self.busy -= 1
        self.pump()

    def wake(self) -> None:
        """From any thread: look at the waiting calls again."""
        loop = self.loop()
        try:
            if loop is None:
                raise RuntimeError("the loop is gone")
            loop.call_soon_threadsafe(self.pump)
        except RuntimeError:  # the loop is closed: nobody waits there any more
            with _POOL.lock:
                _POOL.waiting.discard(self)

    def pump(self) -> None:
        """On the loop: refuse the waiting calls whose owner has too many overruns, and grant
        slots in order to those that can have them."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.waiters:
            return
        pool, now = _POOL, time.monotonic()
        wake_at: float | None = None
        with pool.lock:
            kept: deque[_Waiter] = deque()
            for waiter in self.waiters:
                if waiter.future.done():  # cancelled
                    continue
                stuck = pool.stuck_locked(waiter.owner, now)
                if stuck >= MAX_OVERRUNS:
                    waiter.future.set_exception(_refusal(waiter.what, stuck))
                elif self._free(pool, waiter.owner):
                    self._grant(pool, waiter.owner)
                    waiter.future.set_result(None)
                else:
                    kept.append(waiter)
                    when = pool.next_overrun(waiter.owner, now)  # may be another loop's, or given up
                    if when is not None and (wake_at is None or when < wake_at):
                        wake_at = when
            self.waiters = kept
            if kept:
                pool.waiting.add(self)
            else:
                pool.waiting.discard(self)
        if wake_at is not None:
            loop = asyncio.get_running_loop()
            self.timer = loop.call_later(max(0.0, wake_at - now) + 0.001, self.pump)


_POOL = _Pool()
_SLOTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate]" = weakref.WeakKeyDictionary()


def _gate(loop: asyncio.AbstractEventLoop) -> _Gate:
    """The loop's bound on calls in worker threads at once."""
    gate = _SLOTS.get(loop)
    if gate is None:
        gate = _SLOTS[loop] = _Gate(loop)
    return gate
