"""Queue time: the part of a call's time it waited for a slot before it could go on.

    with counting_waits(for_caller=False) as waits:   # the engine, around one handler call
        ...
            with waiting():                            # wherever a call waits for a slot
                await slot.acquire()
    node.queued = waits.seconds

A handler call's time, and a model or service request's, is kept whole and in two parts: the
time it waited for a slot (its queue time: a worker process or thread, the scheduler's
concurrency limit, a rate limit, the local model's one thread) and the rest (its service time,
the time it ran). The engine gives each call a `Waits` (`counting_waits`, in the context
variable `WAITS`); each place a call may wait wraps the wait in `waiting()`, wherever it is
(handler kinds, model backends, the scheduler), which is why this module sits below them all.
A request's waits count for the handler call that made it too; a handler call's own waits are
its own, not its caller's (the caller's service time holds the whole nested call).
"""
from __future__ import annotations

import contextvars
import time


class Waits:
    """The time one call (a handler call, a model or service request) waited for a slot before
    it could go on. Waits that overlap (the concurrent requests of one handler call) count once,
    so `seconds` is never more than the call's own time. `parent`: the call this one's waits
    count for too (the handler call that made a request), told of each wait as well."""

    __slots__ = ("parent", "_spans")

    def __init__(self, parent: "Waits | None" = None):
        self.parent = parent
        self._spans: list[tuple[float, float]] = []

    def add(self, start: float, end: float) -> None:
        """A wait from `start` to `end` (`time.perf_counter()` seconds), here and in each parent."""
        waits: Waits | None = self
        while waits is not None:
            waits._spans.append((start, end))
            waits = waits.parent

    @property
    def seconds(self) -> float:
        """The seconds the waits cover, overlaps counted once."""
        total, reach = 0.0, float("-inf")
        for start, end in sorted(self._spans):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        return total


#: The `Waits` of the call running in this context (None: outside any timed call).
WAITS: contextvars.ContextVar[Waits | None] = contextvars.ContextVar("decomp_waits", default=None)


class waiting:
    """Count the block (a wait for a slot) as the current call's queue time (see `Waits`).

    (A class, not a generator: it wraps every slot taken, and a generator-based context
    manager costs a few times more per use.)"""

    __slots__ = ("_waits", "_start")

    def __enter__(self) -> None:
        self._waits = WAITS.get()
        if self._waits is not None:
            self._start = time.perf_counter()

    def __exit__(self, *exc) -> None:
        if self._waits is not None:
            self._waits.add(self._start, time.perf_counter())


class counting_waits:
    """A new `Waits` for the call run in the block, where `waiting` counts; with `for_caller`,
    its waits count for the enclosing call's too (a request a handler call makes)."""

    __slots__ = ("_for_caller", "_token")

    def __init__(self, *, for_caller: bool):
        self._for_caller = for_caller

    def __enter__(self) -> Waits:
        waits = Waits(WAITS.get() if self._for_caller else None)
        self._token = WAITS.set(waits)
        return waits

    def __exit__(self, *exc) -> None:
        WAITS.reset(self._token)
