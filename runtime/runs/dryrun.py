"""Dry runs: every row run on a stand-in model (the replay of the prompts' own examples), to
count the model calls a real run would make, and to find the rows that would fail."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from decomp.runtime.runs.datasets import Row
from decomp.runtime.testing.fake import ReplayModel


@dataclass
class DryRun:
    """Model calls per row, and each failing row as (where, error)."""

    calls: list[int] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)

    def estimate(self) -> dict:
        return dry_run_estimate(self.calls, len(self.failures))


def dry_run(session: Any, loaded: Any, rows: Iterable[Row], dataset: bool = True) -> DryRun:
    """Run each row of `rows` through `session` (whose model is the stand-in); a row that cannot
    be read, lacks an input or fails on the stand-in's answers is a failure, its calls up to the
    failure counted. `dataset` False: one question (its row gets no `id`)."""
    found = DryRun()
    replay = session.model_override
    for row in rows:
        if isinstance(replay, ReplayModel):
            replay.new_row()
        if row.error is not None:
            used, error = 0, row.error
        else:
            result = session.run(loaded, {"id": row.id, **row.fields} if dataset else row.fields)
            used, error = result.usage.calls, result.error
        found.calls.append(used)
        if error is not None:
            where = f"row {row.id} (index {row.index})" if dataset else "the question"
            found.failures.append((where, str(error)))
    return found


def dry_run_estimate(calls: list[int], failed: int = 0) -> dict:
    """Summary of model calls per row from a dry run (`failed`: rows that would fail, when any)."""
    n = len(calls)
    estimate = {"rows": n, "calls_per_row": round(sum(calls) / n, 3) if n else 0.0,
                "max_calls_per_row": max(calls, default=0), "estimated_calls": sum(calls)}
    if failed:
        estimate["failed"] = failed
    return estimate
