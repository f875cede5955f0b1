"""Every handler call runs through `run_kind`: plugin kinds contained, every answer sized.

    answer = await run_kind(handler, call)

**Plugin kinds run on a loop of their own.** The built-in kinds (the classes of the `decomp`
package) run on the run's event loop. A kind from anywhere else (an installed plugin, a
`--plugin` module, a class a test or notebook defines) runs each call's `run` on an event loop
in a thread of its own (`_KindThread`, reused by later calls once free), so that what its code
does cannot stop the run's loop: a blocking `time.sleep`, a loop that never awaits, an endless
`await`. Two calls may run on two loops at once: asyncio objects (locks, events, client
sessions) must not be shared between calls; services are reached through `call.request`, whose
work runs on the run's loop. A kind that must share them, and never blocks, says
`contained = False` (`Handler.contained`) and runs on the run's loop.
Everything it asks of the engine (`complete`, `run_handler`, `request`, ...) crosses back to the
run's loop through `ContainedCall`, in the row's context, and its time there (model calls,
nested handlers) is the engine's, not the kind's.

**A deadline on the kind's own time.** The time the kind's code takes, not counting what it
awaits of the engine, is bounded by the handler's time limit (`Handler.time_limit(call)`: its
`timeout=` option, else `--handler-timeout`, default 10 s). Past it the call is a
`TimeLimitError`, its task on the kind's loop is cancelled (which stops an endless await or a
spin that awaits), and the row goes on; code that blocks its thread without awaiting cannot be
interrupted, so that thread is left to finish on its own and the next calls get another.

**What the kind raises is that call's error.** `SystemExit`, `KeyboardInterrupt`,
`CancelledError` and any other exception that is not an `Exception` become a `HandlerError`
naming it; they never end the run.

**Answer size.** An answer (of any kind, built-ins too) whose text would be over the row's
`Budget.answer_mb` (`--max-answer-size`, `DEFAULT_ANSWER_MB` unless told) is a row error before
it is kept, cached or traced (`check_answer`); a large one also has the process's memory checked
against `--max-memory` at once (`RowContext.after_answer`).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from decomp.dsl.errors import HandlerError
from decomp.handlers.call import Call
from decomp.handlers.sandbox.offload import TimeLimitError, overrun_message
from decomp.runtime.engine.budgets import current_row

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.base import Handler

#: How often (seconds) a contained call's clock is looked at while its kind awaits the engine.
POLL = 0.25


def contained(handler: "Handler") -> bool:
    """Whether `handler` runs contained: its kind's `contained`, else whether the kind comes
    from outside this package."""
    said = getattr(handler, "contained", None)
    return not type(handler).__module__.startswith("decomp.") if said is None else bool(said)


async def run_kind(handler: "Handler", call: Call) -> Any:
    """`handler.run(call)`: on the run's loop for a built-in kind, contained otherwise (module
    docstring); the answer checked against the row's answer size limit."""
    if contained(handler):
        answer = await run_contained(handler, call)
    else:
        answer = await handler.run(call)
    current_row().after_answer(answer, handler.name)
    return answer


# ---- the kind's own clock
class _Clock:
    """The kind's own time: wall time since the start, less the time it spent awaiting the
    engine (while any of its engine calls is in flight, its clock stops). Used from both threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._own = 0.0
        self._since: float | None = time.monotonic()  # None while the engine works for it
        self._engine = 0

    def enter(self) -> None:
        with self._lock:
            if self._engine == 0 and self._since is not None:
                self._own += time.monotonic() - self._since
                self._since = None
            self._engine += 1

    def leave(self) -> None:
        with self._lock:
            self._engine -= 1
            if self._engine == 0:
                self._since = time.monotonic()

    def own(self) -> tuple[float, bool]:
        """(the kind's own seconds so far, whether its clock runs now)."""
        with self._lock:
            if self._since is None:
                return self._own, False
            return self._own + time.monotonic() - self._since, True


# ---- the kind's threads
class _KindThread:
    """A daemon thread running an event loop of its own, for one contained call at a time."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="decomp-kind", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


_IDLE: list[_KindThread] = []
_IDLE_LOCK = threading.Lock()
#: Idle kind threads kept for the next calls; more are stopped.
MAX_IDLE = 8


def _take() -> _KindThread:
    with _IDLE_LOCK:
        if _IDLE:
            return _IDLE.pop()
    return _KindThread()


def _give(worker: _KindThread) -> None:
    with _IDLE_LOCK:
        if len(_IDLE) < MAX_IDLE:
            _IDLE.append(worker)
            return
    worker.stop()


async def run_contained(handler: "Handler", call: Call) -> Any:
    """`handler.run(call)` on a kind thread's loop, bounded by the kind's own time (module
    docstring). Raises what the kind raised (an `Exception`), a `HandlerError` naming anything
    else it raised, or a `TimeLimitError`."""
    main = asyncio.get_running_loop()
    context = contextvars.copy_context()
    clock = _Clock()
    proxy = ContainedCall(call, main, context, clock)
    worker = _take()
    outcome: concurrent.futures.Future = concurrent.futures.Future()
    started: concurrent.futures.Future = concurrent.futures.Future()

    def start() -> None:  # on the kind's loop
        task = worker.loop.create_task(_guarded(handler, proxy), context=context.copy())
        started.set_result(task)
        task.add_done_callback(lambda t: _finished(t, outcome, worker))

    worker.loop.call_soon_threadsafe(start)
    limit = handler.time_limit(call)
    waiting = asyncio.wrap_future(outcome)
    try:
        while True:
            own, running = clock.own()
            if own >= limit:
                raise TimeLimitError(overrun_message(f"the {handler.kind} kind's own code", limit, _option(handler)))
            done, _ = await asyncio.wait({waiting}, timeout=limit - own if running else POLL)
            if done:
                break
    except BaseException:
        waiting.cancel()
        _cancel(worker, started)
        raise
    kind, value = waiting.result()
    if kind == "ok":
        return value
    if isinstance(value, Exception):
        raise value
    raise HandlerError(f"the {handler.kind} kind's code raised {type(value).__name__}"
                       + (f": {value}" if str(value) else "") + " (taken as this call's error)")


def _option(handler: "Handler") -> str | None:
    return "timeout" if "timeout" in getattr(type(handler.options), "model_fields", {}) else None


async def _guarded(handler: "Handler", proxy: "ContainedCall") -> tuple[str, Any]:
    try:
        return "ok", await handler.run(proxy)
    except BaseException as err:  # the kind's own SystemExit, CancelledError, ...: its call's error
        return "error", err


def _finished(task: asyncio.Task, outcome: concurrent.futures.Future, worker: _KindThread) -> None:
    """On the kind's loop, once its task ended: the outcome to the caller, the thread freed."""
    if task.cancelled():
        result: tuple[str, Any] = ("error", asyncio.CancelledError())
    else:
        result = task.result()
    if not outcome.done():
        outcome.set_result(result)
    _give(worker)


def _cancel(worker: _KindThread, started: concurrent.futures.Future) -> None:
    """Cancel the kind's task (given up: overrun, or the row's own cancellation)."""
    def cancel() -> None:
        if started.done():
            started.result().cancel()
    try:
        worker.loop.call_soon_threadsafe(cancel)
    except RuntimeError:  # its loop is closed already
        pass


class ContainedCall(Call):
    """The `Call` a contained kind gets: the real call's fields, and its engine methods run on
    the run's loop (in the row's context), each awaited from the kind's loop with its clock stopped."""

    __slots__ = ("query", "values", "inputs", "stack", "span", "_call", "_main", "_context", "_clock")

    def __init__(self, call: Call, main: asyncio.AbstractEventLoop, context: contextvars.Context, clock: _Clock):
        self.query, self.values, self.inputs, self.stack, self.span = (call.query, call.values, call.inputs,
                                                                       call.stack, call.span)
        self._call, self._main, self._context, self._clock = call, main, context, clock

    def __repr__(self) -> str:
        return f"ContainedCall({self._call!r})"

    async def _engine(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`await method(*args, **kwargs)` on the run's loop, from the kind's loop."""
        result: concurrent.futures.Future = concurrent.futures.Future()

        def start() -> None:
            if not result.set_running_or_notify_cancel():
                return
            task = self._main.create_task(method(*args, **kwargs), context=self._context.copy())
            task.add_done_callback(lambda t: _copy_outcome(t, result))
            result.add_done_callback(lambda f: f.cancelled() and self._main.call_soon_threadsafe(task.cancel))

        self._clock.enter()
        try:
            self._main.call_soon_threadsafe(start)
            return await asyncio.wrap_future(result)
        finally:
            self._clock.leave()

    async def complete(self, prompt: str, **options: Any) -> list[str]:
        return await self._engine(self._call.complete, prompt, **options)

    async def converse(self, prompt: str, messages, **options: Any) -> list:
        return await self._engine(self._call.converse, prompt, messages, **options)

    async def score(self, prefix: str, text: str, **options: Any) -> tuple[float, int]:
        return await self._engine(self._call.score, prefix, text, **options)

    async def request(self, service, method, *args: Any, **options: Any) -> Any:
        return await self._engine(self._call.request, service, method, *args, **options)

    async def run_handler(self, name: str, query: str, values: tuple[Any, ...] = ()) -> Any:
        return await self._engine(self._call.run_handler, name, query, values)

    async def run_step(self, step, answers) -> Any:
        return await self._engine(self._call.run_step, step, answers)

    async def run_program(self, body: tuple, inputs, *, numbers=None) -> Any:
        return await self._engine(self._call.run_program, body, inputs, numbers=numbers)

    async def delegate(self, handler: Any, stack: tuple[str, ...] | None = None) -> Any:
        return await self._engine(self._call.delegate, handler, stack)

    def environment(self, handler: str, *, fresh: bool = False):
        return self._context.run(self._call.environment, handler, fresh=fresh)

    def child(self, kind: str, **fields: Any) -> Any:
        return self._call.child(kind, **fields)

    @property
    def max_steps(self) -> int | None:
        return self._call.max_steps

    @property
    def registry(self):
        return self._call.registry

    @property
    def trust(self):
        return self._call.trust

    @property
    def limits(self):
        return self._call.limits


def _copy_outcome(task: asyncio.Task, result: concurrent.futures.Future) -> None:
    if result.done():
        return
    if task.cancelled():
        result.cancel()
    elif task.exception() is not None:
        result.set_exception(task.exception())
    else:
        result.set_result(task.result())
