"""Batch runs: every dataset row through a module, one JSON line per row as soon as it ends.

A bad row (malformed JSON, missing question) or a failing program records its error in that
row's line; the other rows go on. Lines are flushed as they are written, so nothing already
finished is lost if the run is interrupted.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .datasets import Row, read_rows
from .loader import LoadedModule
from .session import Session


@dataclass
class BatchSummary:
    rows: int = 0
    failed: int = 0


async def run_rows(session: Session, module: LoadedModule, rows: list[Row], out: IO[str],
                   concurrency: int = 8) -> BatchSummary:
    """Run `rows` with at most `concurrency` at once, writing each result line when it ends."""
    summary = BatchSummary()
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(row: Row) -> None:
        async with gate:
            record = await _run_row(session, module, row)
        summary.rows += 1
        summary.failed += "error" in record
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()

    await asyncio.gather(*(one(row) for row in rows))
    return summary


async def _run_row(session: Session, module: LoadedModule, row: Row) -> dict[str, Any]:
    if row.error is not None:
        return {"id": row.id, "answer": None, "error": row.error}
    result = await session.arun(module, {"id": row.id, **row.fields})
    record: dict[str, Any] = {"id": row.id, "answer": result.answer}
    if result.error is not None:
        record["error"] = result.error
    return record


def run_file(session: Session, module: LoadedModule, data: Path, output: Path, concurrency: int = 8) -> BatchSummary:
    """Run every row of `data` (JSONL or DecomP's DROP-style JSON) into `output` (JSONL)."""
    rows = list(read_rows(data))
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", encoding="utf-8") as out:
        return asyncio.run(run_rows(session, module, rows, out, concurrency))
