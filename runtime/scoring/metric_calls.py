"""A user's metric function, called contained: in a worker process of `decomp.handlers.sandbox.workers`,
under a deadline and a memory cap, as python handlers' functions are.

    metric = ContainedMetric("mine:score", function, MetricLimits(timeout=10.0))
    scores = await metric.scores([[prediction, gold] for gold in alternatives], "the prediction ...")

Which metrics: every metric that is not decomp's own (`em`, `set_em`, `f1`, `exact`, `outcome`),
that is a plugin's registered function, a `module:function` path, imported under the rules of
python handlers (its module in the working folder, or trusted), or a function given itself to
the Python API. The caller decides the calls by the function's form
(`decomp.dsl.checker.metric_form`): the worker calls `function(*args)` for each. Decomp's own run in the caller's
process: their code is decomp's, and their time is bounded by the size of their inputs (em and
set_em are linear in the answer's tokens, f1 aligns spans in polynomial time), which answers
themselves are bounded by (`--max-answer-size`).

A row's calls (one per gold alternative, or one `function(row, answer, trace)`) run in one
worker, one after another, under one deadline (`MetricLimits.timeout`, `--metric-timeout`,
default 10 s: a python handler's default) and one memory cap (`MetricLimits.memory_mb`,
`--metric-memory`, default 1,024 MiB). Past the deadline the worker is killed; past the cap the
call fails; whatever the function raises (`SystemExit`, `KeyboardInterrupt` too), a worker that
dies, and a result that is not a finite number are a `MetricError` for that row, worded, and the
caller scores the other rows. A function no worker can import (a lambda or a closure a plugin
registered) runs in a thread under the deadline, as such python functions do
(`decomp.handlers.sandbox.offload.bounded`): abandoned past it, no memory cap.

Many rows at once (`ContainedMetric.many`: `decomp eval`, `decomp compare`, `decomp optimize`)
go `BATCH_ROWS` to a request, since a request's round trip costs far more than a quick metric
(about 0.5 ms against microseconds): a batch has the deadline of one row, and each of its rows
the memory cap. A batch that fails as a whole (past the deadline, the cap, its worker dead) is
scored again row by row, each row under its own deadline, and so are the rows after it: no row
fails for another row's time or crash. (Memory is the worker's: what a metric's earlier calls
kept in its worker, a module-level cache, counts against later rows' cap, as for python
handlers.)

The worker's side is `score_in_worker`, a function of decomp's own that imports the function
from the very file the parent allowed (`decomp.handlers.kinds.python.worker_function`).
"""
from __future__ import annotations

import asyncio
import json
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.dsl.errors import DecompError, HandlerError
from decomp.handlers.kinds.python import function_sources, user_traceback, worker_function, worker_target
from decomp.handlers.sandbox.offload import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, TimeLimitError, bounded
from decomp.handlers.sandbox.workers import MemoryLimitError, call_in_worker, capped, mib

#: Seconds one row's metric calls may take when nothing else says (a python handler's default).
DEFAULT_METRIC_TIMEOUT = DEFAULT_TIMEOUT
#: MiB one row's metric calls may add to their worker process when nothing else says.
DEFAULT_METRIC_MEMORY_MB = DEFAULT_MEMORY_MB
#: What a worker runs for a row (`score_in_worker`).
WORKER_ENTRY = "decomp.runtime.scoring.metric_calls:score_in_worker"
#: Rows sent in one request by `ContainedMetric.many`, and requests in flight at once.
BATCH_ROWS, IN_FLIGHT = 32, 8


class MetricError(DecompError, ValueError):
    """A metric could not score one row (its message says which metric, on what, and why)."""


@dataclass(frozen=True)
class MetricLimits:
    """How long (seconds) one row's metric calls may take, and how much memory (MiB) they may
    add to their worker process."""

    timeout: float = DEFAULT_METRIC_TIMEOUT
    memory_mb: float = DEFAULT_METRIC_MEMORY_MB

    def __post_init__(self) -> None:
        for name, unit in (("timeout", "seconds"), ("memory_mb", "MiB")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"the metric's {name} must be a number > 0 {unit}, got {value!r}")


class ContainedMetric:
    """One user metric function, called contained (see the module's text)."""

    def __init__(self, name: str, function: Callable[..., Any], limits: MetricLimits | None = None,
                 folder: Path | None = None):
        self.name, self.function = name, function
        self.limits = limits or MetricLimits()
        self.folder = folder
        self.what = f"metric {name!r}"
        self._sources: list[tuple[str, str, str | None]] | None = None
        self._batching = True

    async def scores(self, calls: list[list[Any]], subject: str) -> list[float]:
        """`function(*args)` for each `args` of `calls` (one row's), as floats; a `MetricError`
        naming `subject` (what the row is: "the prediction ... (gold ...)", "row q3") otherwise."""
        target = worker_target(self.function)
        try:
            if target is None:
                reply = await bounded(_in_thread, self.function, calls, limit=self.limits.timeout, owner=self,
                                      what=self.what, option=None)
            else:
                reply = await self._request(target, {"calls": calls})
        except TimeLimitError as err:
            if err.message.startswith(f"{self.what} ran longer"):
                raise MetricError(f"{self.what} ran longer than its time limit of {self.limits.timeout:g} s on "
                                  f"{subject} (raise it with --metric-timeout SECONDS)") from None
            raise self._failed(subject, err) from None  # refused: earlier calls in threads still run
        except MemoryLimitError:
            raise MetricError(f"{self.what} used more than its memory limit of {mib(self.limits.memory_mb)} MiB on "
                              f"{subject} (raise it with --metric-memory MB)") from None
        except HandlerError as err:  # its worker died, or could not be started
            raise self._failed(subject, err) from None
        return self._scores(reply, subject)

    def _failed(self, subject: str, err: HandlerError) -> MetricError:
        why = err.message.removeprefix(f"{self.what}: ").removeprefix(f"{self.what} ")
        return MetricError(f"{self.what} failed on {subject}: {why}")

    async def many(self, rows: list[tuple[list[list[Any]], str]]) -> list[list[float] | MetricError]:
        """`scores` of each (calls, subject), or that row's `MetricError`: `BATCH_ROWS` rows to a
        request, `IN_FLIGHT` requests at once (see the module's text)."""
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one(calls: list[list[Any]], subject: str) -> list[float] | MetricError:
            async with gate:
                try:
                    return await self.scores(calls, subject)
                except MetricError as err:
                    return err

        async def part(batch: list[tuple[list[list[Any]], str]]) -> list[list[float] | MetricError]:
            if len(batch) > 1 and self._batching:
                async with gate:
                    found = await self._batch(batch)
                if found is not None:
                    return found
                self._batching = False  # this metric can fail a batch: row by row from now on
            return list(await asyncio.gather(*(one(calls, subject) for calls, subject in batch)))

        parts = await asyncio.gather(*(part(rows[i:i + BATCH_ROWS]) for i in range(0, len(rows), BATCH_ROWS)))
        return [found for found_part in parts for found in found_part]

    async def _batch(self, batch: list[tuple[list[list[Any]], str]]) -> list[list[float] | MetricError] | None:
        """The rows of `batch` scored in one request; None when it failed as a whole (or no worker
        can import the function: each row then runs on its own)."""
        target = worker_target(self.function)
        if target is None:
            return None
        try:
            reply = await self._request(target, {"rows": [calls for calls, _ in batch]})
        except HandlerError:  # past the deadline or the cap, or its worker died: each row on its own
            return None
        if "rows" not in reply:
            return None
        found: list[list[float] | MetricError] = []
        for one_reply, (_, subject) in zip(reply["rows"], batch):
            try:
                found.append(self._scores(one_reply, subject))
            except MetricError as err:
                found.append(err)
        return found

    async def _request(self, target: dict[str, Any], work: dict[str, Any]) -> dict[str, Any]:
        if self._sources is None:  # hashed once: the function this process imported is the one called
            self._sources = [(s.module, str(s.path), s.sha256) for s in function_sources(self.function, self.folder)]
        payload = {"target": target, "folder": None if self.folder is None else str(self.folder),
                   "sources": self._sources, **work}
        return await call_in_worker(WORKER_ENTRY, payload, limit=self.limits.timeout, memory_mb=self.limits.memory_mb,
                                    what=self.what, option=None, memory_option=None)

    def _scores(self, reply: dict[str, Any], subject: str) -> list[float]:
        if "scores" in reply:
            return [float(score) for score in reply["scores"]]
        if "raised" in reply:
            kind, message = reply["raised"]
            raise MetricError(f"{self.what} failed on {subject}: {kind}: {message}" if message
                              else f"{self.what} failed on {subject}: {kind}")
        if "not_number" in reply:
            raise MetricError(f"{self.what} returned {reply['not_number']}, not a {reply['wanted']} (a metric returns "
                              f"a float, usually between 0 and 1; on {subject})")
        raise MetricError(f"{self.what}: its worker process could not import it: {reply.get('unloadable')}")


def shown(value: Any, width: int = 60) -> str:
    """`value` as JSON text, cut to `width` characters (for messages)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, allow_nan=False)
    except (ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


# ---- the worker's side (and the thread's, for a function no worker can import)
def score_in_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """In a worker: import the function `payload["target"]` names (the file the parent allowed)
    and call it on each of `payload["calls"]` (one row's) under the memory cap (`call_all`), or
    on each row of `payload["rows"]` ({"rows": [one reply per row]}, each row under the cap); or
    {"unloadable": why, "details": traceback} when it cannot be imported."""
    try:
        function = worker_function(payload)
    except BaseException as err:  # the module's own import error, whatever it is
        return {"unloadable": f"{type(err).__name__}: {err}", "details": user_traceback(err)}
    if "rows" in payload:
        return {"rows": [_capped_call(function, calls) for calls in payload["rows"]]}
    return _capped_call(function, payload["calls"])


def _capped_call(function: Callable[..., Any], calls: list[list[Any]]) -> dict[str, Any]:
    with capped():
        return call_all(function, calls)


def call_all(function: Callable[..., Any], calls: list[list[Any]]) -> dict[str, Any]:
    """{"scores": [float, ...]}: `function(*args)` for each `args` of `calls`; or the first
    failure: {"raised": [type, message], "details": traceback} (whatever it raised, `SystemExit`
    and `KeyboardInterrupt` too, but for the `MemoryError` of a worker's cap, which the worker
    reports) or {"not_number": shown, "wanted": "number" | "finite number"}."""
    scores: list[float] = []
    for args in calls:
        try:
            value = function(*args)
            score = _score(value)
        except MemoryError:
            raise
        except BaseException as err:  # the user's code: any error is this call's, never the caller's end
            return {"raised": [type(err).__name__, _said(err)], "details": user_traceback(err)}
        if isinstance(score, str):
            return {"not_number": _shown_value(value), "wanted": score}
        scores.append(score)
    return {"scores": scores}


def _in_thread(function: Callable[..., Any], calls: list[list[Any]]) -> dict[str, Any]:
    """`call_all` in a thread of this process, where no cap holds: running out of memory is the
    call's error too."""
    try:
        return call_all(function, calls)
    except MemoryError:
        return {"raised": ["MemoryError", "out of memory"], "details": ""}


def _score(value: Any) -> float | str:
    """`value` as a float when it is a finite real number (not a bool); else what was wanted."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "number"
    number = float(value)
    return number if math.isfinite(number) else "finite number"


def _said(err: BaseException) -> str:
    try:
        return str(err)
    except Exception:  # a __str__ of the user's that fails
        return f"(its message could not be read: {type(err).__name__}.__str__ raised)"


def _shown_value(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."
