"""Benchmark: a dataset run on Ray with 1, 2 and 4 workers against the critical-path bound.

Runs `decomp/letter_cat_llm` on ROWS letter-concatenation questions (benchmarks/letter_cat_oracle.py)
with `run_dataset(..., cluster=Cluster(address, workers))`, as `decomp run --input DATA --ray
ADDRESS --ray-workers N` does, against the mock OpenAI server in a child process answering every
request after LATENCY seconds. A local Ray instance of `--cpus` CPUs is started for it, every
node on 127.0.0.1. Concurrency C for the whole run, no cache. The same rows in one process
(`run_dataset` without a cluster) are the baseline (`"process"`).

The bound is critical_path.py's: max(chain x latency, calls x latency / C), `chain` the longest
run of model calls that each waited for the one before (from the rows' traces). Prints one JSON
line: `rows_per_s` and `ratio` (wall / bound) per number of workers, `max_in_flight` (the most
requests the server saw at once, over every run: never above C), the driver's CPU per row
(`driver_cpu_ms_per_row`: this process, Ray's threads in it included), and
`driver_rows_per_cpu_s`, the rows per second at which the driver would be busy all the time:
what one driver can feed before it becomes the limit. `startup_s`: what starting the workers
adds to a run (a one-row run on Ray, less the same row in this process), part of each wall time.

    python benchmarks/ray_scale.py [--rows 200] [--latency 0.1] [--concurrency 16] [--workers 1,2,4]
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import PROGRAM, dependent_calls, make_rows, mock_server, warm_up  # noqa: E402

def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=200)
    p.add_argument("--workers", default="1,2,4", help="numbers of workers, comma-separated")
    p.add_argument("--cpus", type=int, default=4, help="CPUs the local Ray instance has (one per worker)")
    args = p.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    from decomp.runtime.cluster.limits import LOOPBACK_ONLY

    os.environ.update(LOOPBACK_ONLY)  # every port of the instance on 127.0.0.1
    os.environ.setdefault("OPENAI_API_KEY", "benchmark")
    import ray

    rows = make_rows(args.rows, args.words, args.seed)
    record: dict = {"benchmark": "ray_scale", "rows": args.rows, "latency_s": args.latency,
                    "concurrency": args.concurrency, "cpus": args.cpus, "workers": counts, "rows_per_s": {},
                    "ratio": {}, "wall_s": {}, "driver_cpu_ms_per_row": {}, "driver_rows_per_cpu_s": {},
                    "startup_s": {}, "max_in_flight": 0, "failed": 0, "calls": {}}
    with tempfile.TemporaryDirectory() as tmp, mock_server(args.latency) as server:
        data, one_row = Path(tmp) / "rows.jsonl", Path(tmp) / "one.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        one_row.write_text(json.dumps(make_rows(1, args.words, args.seed + 1)[0]) + "\n")
        warm_up(server.base_url)
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            alone = _run(server, one_row, Path(tmp) / "one-0", 0, args)["wall_s"]
            for workers in [0, *counts]:
                key = "process" if workers == 0 else str(workers)
                if workers:  # starting the workers: a one-row run's wall time over one row's in this process
                    started = _run(server, one_row, Path(tmp) / f"one-{workers}", workers, args)["wall_s"]
                    record["startup_s"][key] = round(started - alone, 3)
                one = _run(server, data, Path(tmp) / f"run-{workers}", workers, args)
                for name in ("rows_per_s", "ratio", "wall_s", "driver_cpu_ms_per_row", "driver_rows_per_cpu_s",
                             "calls"):
                    record[name][key] = one[name]
                record["max_in_flight"] = max(record["max_in_flight"], one["max_in_flight"])
                record["failed"] += one["failed"]
        finally:
            ray.shutdown()
    emit(record)
    return record


def _run(server, data: Path, run_dir: Path, workers: int, args) -> dict:
    """One run (workers 0: in this process), measured."""
    from decomp.runtime.runs.api import RunOptions, run_dataset
    from decomp.runtime.cluster.rows import Cluster
    from decomp.runtime.storage.rundir import RunDir
    options = RunOptions(model="openai:oracle", base_url=server.base_url, concurrency=args.concurrency,
                         cache_mode="off")
    server.reset_stats()
    cpu, started = time.process_time(), time.perf_counter()
    done = run_dataset(PROGRAM, data, options=options, run_dir=run_dir,
                       cluster=Cluster(workers=workers) if workers else None)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    stats = server.stats()
    run = RunDir.open(run_dir)
    try:
        chain = max((dependent_calls(run.trace(i)) for i in range(done.rows)), default=0)
    finally:
        run.close()
    calls = stats["requests"]
    bound = max(chain * args.latency, calls * args.latency / args.concurrency)
    return {"rows_per_s": round(done.rows / wall, 2), "ratio": round(wall / bound, 4) if bound else None,
            "wall_s": round(wall, 3), "driver_cpu_ms_per_row": round(1000 * cpu / done.rows, 3),
            "driver_rows_per_cpu_s": round(done.rows / cpu, 1) if cpu else None,
            "max_in_flight": stats["max_in_flight"], "failed": done.failed, "calls": calls}


if __name__ == "__main__":
    main()
