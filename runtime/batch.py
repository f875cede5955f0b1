"""Batch runs: every dataset row through a module, one JSON line per row as soon as it ends.

A bad row (malformed JSON, missing question) or a failing program records its error in that
row's line; the other rows go on. Lines are written in input order: a row's line goes out (and
is flushed) as soon as it and every row before it have ended. Model calls are served lowest row
first, so rows end nearly in order and little waits. Each line also carries the row's `index`.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable

from .accounting import Usage
from .datasets import Row, read_rows
from .loader import LoadedModule
from .session import Session


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


async def run_rows(session: Session, module: LoadedModule, rows: Iterable[Row], out: IO[str],
                   window: int = 256) -> BatchSummary:
    """Run `rows`, at most `window` at once, writing each result line when its row ends.

    The window only bounds memory: the number of model calls in flight is the scheduler's."""
    summary = BatchSummary()
    started = time.perf_counter()
    gate = asyncio.Semaphore(max(1, window))
    writer = _InOrder(out)

    async def one(position: int, row: Row) -> None:
        try:
            record = await _run_row(session, module, row)
        finally:
            gate.release()
        summary.rows += 1
        summary.failed += "error" in record
        writer.done(position, record)

    tasks = []
    for position, row in enumerate(rows):
        await gate.acquire()
        tasks.append(asyncio.ensure_future(one(position, row)))
    await asyncio.gather(*tasks)
    await session.aclose()
    summary.seconds = time.perf_counter() - started
    summary.usage = session.usage
    summary.max_in_flight = dict(session.scheduler.max_in_flight)
    return summary


async def _run_row(session: Session, module: LoadedModule, row: Row) -> dict[str, Any]:
    if row.error is not None:
        return {"id": row.id, "index": row.index, "answer": None, "error": row.error}
    result = await session.arun(module, {"id": row.id, **row.fields}, index=row.index)
    record: dict[str, Any] = {"id": row.id, "index": row.index, "answer": result.answer}
    if result.error is not None:
        record["error"] = result.error
    record["usage"] = {"calls": result.usage.calls, "cache_hits": result.usage.cache_hits,
                       "prompt_tokens": result.usage.prompt_tokens,
                       "completion_tokens": result.usage.completion_tokens}
    return record


class _InOrder:
    """Writes records in input order, each as soon as all records before it are written."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.next = 0
        self.waiting: dict[int, dict] = {}

    def done(self, position: int, record: dict) -> None:
        self.waiting[position] = record
        while self.next in self.waiting:
            self.out.write(json.dumps(self.waiting.pop(self.next), ensure_ascii=False) + "\n")
            self.next += 1
        self.out.flush()


def run_file(session: Session, module: LoadedModule, data: Path, output: Path) -> BatchSummary:
    """Run every row of `data` (JSONL or DecomP's DROP-style JSON) into `output` (JSONL)."""
    rows = read_rows(data)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as out:
        return asyncio.run(run_rows(session, module, rows, out))
