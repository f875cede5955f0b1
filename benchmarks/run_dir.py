"""Benchmark: writing and reading a large run directory.

Runs `decomp/letter_cat_llm` (an LLM decomposer: 11 model calls per 5-word row, each with its
few-shot prompt in the trace) on ROWS rows against an in-process FakeModel that answers like
the oracle, twice: once into a null sink, once into a `RunDir` (each row's trace committed to
traces.sqlite, then its results line appended and flushed). Then reads the run back. Prints:

    write_ms_per_row   (wall with the run directory - wall with the null sink) / rows
    write_fraction     that extra time over the null run's wall
    results_bytes, traces_bytes, trace_bytes_per_row
    open_s             RunDir.open: reading and checking every results line
    trace_ms           mean time to load one row's tree (200 random rows, a fresh reader)
    scan_s             loading every tree

    python benchmarks/run_dir.py [--rows 10000]
"""
from __future__ import annotations

import asyncio
import random
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    PROGRAM,
    dataset_rows,
    load_program,
    make_rows,
    respond,
)


def _run(batch, sink) -> float:
    from decomp.runtime.testing.fake import FakeModel
    from decomp.runtime.runs.batch import run_rows
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session

    model = FakeModel(default=lambda request: respond(request.prompt), name="oracle")
    model.history = _Forgetful()  # the fake keeps every request otherwise: 110,000 prompts
    model.replies = _Forgetful()
    session = Session(model=model, scheduler=Scheduler(16), cache=None)
    module = load_program(session)
    started = time.perf_counter()
    asyncio.run(run_rows(session, module, batch, sink))
    return time.perf_counter() - started


class _Forgetful(list):
    def append(self, item) -> None:
        pass


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=10000, server=False)
    args = p.parse_args(argv)

    from decomp.runtime.storage.jsonl import write_jsonl
    from decomp.runtime.storage.layout import RESULTS, TRACES
    from decomp.runtime.storage.manifest import make_manifest
    from decomp.runtime.storage.rundir import RunDir
    batch = dataset_rows(make_rows(args.rows, args.words, args.seed))
    null_wall = _run(batch, lambda record, trace: None)
    with tempfile.TemporaryDirectory() as tmp:
        path, data = Path(tmp) / "run", Path(tmp) / "rows.jsonl"
        write_jsonl(data, ({"id": r.id, **r.fields} for r in batch))
        run = RunDir.create(path, make_manifest(Path(PROGRAM), "letter_cat", [], data, {}))
        wall = _run(batch, run.add)
        run.finish(args.rows, wall)
        results_bytes = (path / RESULTS).stat().st_size
        traces_bytes = sum(f.stat().st_size for f in path.glob(TRACES + "*"))

        started = time.perf_counter()
        reader = RunDir.open(path)
        open_s = time.perf_counter() - started
        picks = random.Random(args.seed).sample(sorted(reader.done), min(200, len(reader.done)))
        started = time.perf_counter()
        for index in picks:
            reader.trace(index)
        trace_ms = 1000 * (time.perf_counter() - started) / len(picks)
        started = time.perf_counter()
        scanned = sum(1 for _ in reader.traces())
        scan_s = time.perf_counter() - started
        reader.close()

    record = {
        "benchmark": "run_dir", "rows": args.rows, "null_wall_s": round(null_wall, 3), "wall_s": round(wall, 3),
        "write_ms_per_row": round(1000 * (wall - null_wall) / args.rows, 4),
        "write_fraction": round((wall - null_wall) / null_wall, 4),
        "results_bytes": results_bytes, "traces_bytes": traces_bytes,
        "trace_bytes_per_row": round(traces_bytes / args.rows), "open_s": round(open_s, 4),
        "trace_ms": round(trace_ms, 4), "scan_s": round(scan_s, 3), "scanned": scanned,
    }
    emit(record)
    return record


if __name__ == "__main__":
    main()
