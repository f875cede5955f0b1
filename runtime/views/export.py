"""A run directory as JSON: `decomp trace show RUN --json` (its summary and rows, or one row
with its tree) and `decomp trace export RUN --jsonl` (one line per row: its results line and
its decomposition tree)."""
from __future__ import annotations

from collections.abc import Iterator

from decomp.dsl.values import storable_json
from decomp.runtime.storage.rundir import RunDir
def rows_json(run: RunDir) -> dict:
    """The run's summary and every row's results line (what `trace show` tabulates)."""
    return {"run_dir": str(run.path), "program": run.program_path, "main": run.main, "input": run.input_path,
            "model": run.model, "summary": run.summary(), "rows": run.records()}


def row_json(run: RunDir, record: dict) -> dict:
    """One row's results line with its tree (`trace: null` when the run kept none for it)."""
    tree = run.trace(record["index"])
    return {**record, "trace": tree.to_dict() if tree is not None else None}


def export_lines(run: RunDir) -> Iterator[str]:
    """One JSON line per row, in input order: `row_json` of each."""
    for record in run.records():
        yield storable_json(row_json(run, record))
