"""Run directories written straight from results lines, for the comparison's tests."""
from __future__ import annotations

import json
from pathlib import Path

from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.layout import SUMMARY
from decomp.runtime.storage.manifest import make_manifest
from decomp.runtime.storage.rundir import RunDir
def make_run(root: Path, name: str, records: list[dict], metric: str = "em", data: Path | None = None,
             extra_summary: dict | None = None) -> Path:
    """A run directory `root/name` holding `records` (each given an `index` when it has none);
    `extra_summary` is merged into its summary.json (a `cost` another tool wrote)."""
    program = root / "p.decomp"
    if not program.exists():
        program.write_text('handler up = python(function="capwords")\nmain up\n')
    if data is None:
        data = root / "data.jsonl"
        if not data.exists():
            data.write_text("")
    path = root / name
    run = RunDir.create(path, make_manifest(program, None, [], data, {}, metric=metric))
    for i, record in enumerate(records):
        run.add({"index": i, **record}, TraceNode("row", label=str(record.get("id"))))
    run.finish(len(records), 1.0)
    if extra_summary:
        summary = json.loads((path / SUMMARY).read_text())
        (path / SUMMARY).write_text(json.dumps({**summary, **extra_summary}))
    return path


def scored(ids_scores: dict[str, float], **fields) -> list[dict]:
    """Results lines with gold and a stored score, one per id."""
    return [{"id": row_id, "answer": "x", "gold": ["x"], "score": score, "outcome": "ok", **fields}
            for row_id, score in ids_scores.items()]
