"""Batch runs: every dataset row through a module, each row handed on as soon as it ends.

A bad row (malformed JSON, missing question) or a failing program records its error in that
row's record; the other rows go on. Each row's record and trace go to a sink when the row ends
(a run directory appends them at once, in the order rows end); `InOrder` instead writes lines
in input order, each as soon as it and every row before it have ended. Each record carries the
row's `index`; with gold in the data, its `gold` and `score` too: the run's metric, else the
module's `metric` (em, set_em, f1, exact, a plugin's or `module:function`; DROP exact match when
it declares none), called as docs/runs.md "The metric function" says (a metric not decomp's own
runs contained, see `decomp.runtime.scoring.metrics.Scorer`). A row the metric fails on (it raised, looped past its time
limit, exhausted its memory, returned no finite number) ends in that error: its answer is kept,
its score is 0, and the other rows are scored.
"""
from __future__ import annotations

import asyncio
import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Container, Iterable

from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.runtime.engine.budgets import Usage
from decomp.runtime.storage.datasets import Row, read_rows
from decomp.runtime.scoring.metric_calls import MetricError, MetricLimits
from decomp.runtime.scoring.metrics import Metric, RowToScore, Scorer, metric_row
from decomp.runtime.engine.loader import LoadedModule
from decomp.runtime.storage.jsonl import json_line
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.tracing import TraceNode

#: Receives each row's result record and its decomposition tree, as the row ends.
Sink = Callable[[dict, TraceNode], None]


@dataclass
class BatchSummary:
    rows: int = 0
    failed: int = 0
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    max_in_flight: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "failed": self.failed, "seconds": round(self.seconds, 3),
                **self.usage.to_dict(), "max_in_flight": self.max_in_flight}


async def run_rows(session: Session, module: LoadedModule, rows: Iterable[Row], sink: IO[str] | Sink,
                   window: int = 256, skip: Container[int] = (), metric: MetricLimits | None = None,
                   scorer: Scorer | None = None) -> BatchSummary:
    """Run `rows` (but those whose index is in `skip`), at most `window` at once.

    `sink` gets each row's (record, trace) as the row ends; a text stream gets JSON lines in
    input order instead (`InOrder`). The window only bounds memory: the number of model calls
    in flight is the scheduler's. `metric`: the limits of a contained metric's call per row;
    `scorer`: what scores rows with gold (None: `program_scorer`)."""
    summary = BatchSummary()
    started = time.perf_counter()
    gate = asyncio.Semaphore(max(1, window))
    if hasattr(sink, "write"):
        writer = InOrder(sink)
        emit = lambda record, trace, position: writer.done(position, record)  # noqa: E731
    else:
        emit = lambda record, trace, position: sink(record, trace)  # noqa: E731
    todo = (row for row in rows if row.index not in skip)
    scorer = scorer or program_scorer(module, metric, trust=session.trust)

    async def one(position: int, row: Row) -> None:
        try:
            record, trace = await _run_row(session, module, row, scorer)
        finally:
            gate.release()
        summary.rows += 1
        summary.failed += "error" in record
        emit(record, trace, position)

    pending: set[asyncio.Future] = set()  # rows running now: finished ones are let go (memory stays flat)
    failures: list[BaseException] = []

    def finished(task: asyncio.Future) -> None:
        pending.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())

    with _light_gc():
        for position, row in enumerate(todo):
            await gate.acquire()
            if failures:
                gate.release()
                break
            task = asyncio.ensure_future(one(position, row))
            pending.add(task)
            task.add_done_callback(finished)
        await asyncio.gather(*pending)
    if failures:
        raise failures[0]
    await session.aclose()
    summary.seconds = time.perf_counter() - started
    summary.usage = session.usage
    summary.max_in_flight = dict(session.scheduler.max_in_flight)
    return summary


def program_scorer(module: LoadedModule, limits: MetricLimits | None = None, metric: Metric | None = None,
                   trust: Trust = NO_TRUST) -> Scorer:
    """What scores a row of `module`: `metric` (a name, its module looked for in the working
    folder, or a function), else the module's `metric` statement (a `module:function` of the
    program's folder), else exact match; a contained one's calls under `limits` (the run's
    `--metric-timeout` / `--metric-memory`), a module imported when local or one `trust`
    trusts (the session's). `ValueError` for a metric that cannot be used."""
    if metric is not None:
        return Scorer(metric, limits=limits, trust=trust)
    return Scorer(module.metric or "em", Path(module.path).parent, limits, trust)


async def _run_row(session: Session, module: LoadedModule, row: Row,
                   scorer: Scorer | None = None) -> tuple[dict[str, Any], TraceNode]:
    if row.error is not None:
        return error_row(row, row.error)
    started = time.perf_counter()
    result = await session.arun(module, {"id": row.id, **row.fields}, index=row.index)
    record: dict[str, Any] = {"id": row.id, "index": row.index, "answer": result.answer,
                              "outcome": "error" if result.error is not None else "failed" if result.failed else "ok"}
    if result.error is not None:
        record["error"] = result.error
    if result.reason is not None:  # why the outcome failed (an answer that does not fit its type)
        record["reason"] = result.reason
    if result.also_failed:  # other steps that failed at the same time, each under its own name
        record["also_failed"] = list(result.also_failed)
    if result.environments:
        record["environment"] = result.environments
    if row.gold is not None:
        record["gold"] = row.gold
        await _score(record, row, result, scorer or program_scorer(module, trust=session.trust))
    record["usage"] = result.usage.to_dict()
    record["seconds"] = round(time.perf_counter() - started, 6)
    return record, result.trace


async def _score(record: dict[str, Any], row: Row, result: Any, scorer: Scorer) -> None:
    """The row's `score` (0 when it ended in an error); a metric that fails on it ends the row in
    that error."""
    if "error" in record:
        record["score"] = 0.0
        return
    trace = result.trace.to_dict() if scorer.wants_trace and result.trace is not None else None
    item = RowToScore(result.answer, row.gold, metric_row(row.id, row.fields, row.gold), trace, f"row {row.id}")
    try:
        record["score"] = await scorer.ascore(item)
    except MetricError as err:
        record.update(outcome="error", error=str(err), score=0.0)


def error_row(row: Row, error: str) -> tuple[dict[str, Any], TraceNode]:
    """The record and trace of a row that ended in `error` without running (it could not be
    read, or no worker could run it)."""
    return ({"id": row.id, "index": row.index, "answer": None, "error": error},
            TraceNode("row", label=str(row.id or ""), error=error))


@contextmanager
def _light_gc():
    """Fewer, shorter garbage-collector pauses during a batch: what is loaded before it (modules,
    the program, the model clients' imports) is frozen out of collections, and young objects are
    collected less often. A full collection of that heap takes ~100 ms here, stalling every
    request in flight (benchmarks/critical_path.py: ratio 1.089 -> 1.072 in one paired run)."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(threshold[0], 10_000), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


class InOrder:
    """Writes records as JSON lines in input order, each as soon as all before it are written."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.next = 0
        self.waiting: dict[int, dict] = {}

    def done(self, position: int, record: dict) -> None:
        self.waiting[position] = record
        while self.next in self.waiting:
            self.out.write(json_line(self.waiting.pop(self.next)))
            self.next += 1
        self.out.flush()


def run_file(session: Session, module: LoadedModule, data: Path, output: Path) -> BatchSummary:
    """Run every row of `data` (JSONL or DecomP's DROP-style JSON) into `output` (JSONL)."""
    rows = read_rows(data)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as out:
        return asyncio.run(run_rows(session, module, rows, out))
