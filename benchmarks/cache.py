"""Benchmark: re-running a batch from the step cache.

Runs `decomp/letter_cat_llm` on ROWS letter-concatenation questions against the mock OpenAI server
in a child process (LATENCY seconds per request, concurrency C) with a read-write `StepCache` in
a temporary folder, then runs the same rows again in a second `Session` over the same cache
file (a new `StepCache` object: nothing is shared in memory). Prints one JSON line:

    first_wall_s, rerun_wall_s, rerun_fraction = rerun wall / first wall,
    rerun_model_calls  requests the server received during the re-run (its statistics are reset
                       between the runs); rerun_usage_calls is the session's own count,
    max_in_flight      the most requests the server saw in flight at once (first run).

    python benchmarks/cache.py [--rows 1000] [--latency 0.1] [--concurrency 16]

One throw-away row (without the cache) warms the process up first, as in critical_path.py.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    dataset_rows,
    fraction_correct,
    load_program,
    make_rows,
    mock_server,
    openai_session,
    run_batch,
    warm_up,
)


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=1000)
    args = p.parse_args(argv)

    from decomp.runtime.engine.cache import StepCache

    rows = make_rows(args.rows, args.words, args.seed)
    batch = dataset_rows(rows)
    with tempfile.TemporaryDirectory(prefix="decomp-bench-cache-") as folder, \
            mock_server(args.latency) as server:
        path = Path(folder) / "steps.sqlite"
        warm_up(server.base_url)
        runs = []
        for _ in range(2):
            cache = StepCache(path, "read-write")
            session = openai_session(server.base_url, args.concurrency, cache=cache)
            module = load_program(session)
            server.reset_stats()
            started = time.perf_counter()
            summary, records = run_batch(session, module, batch)
            wall = time.perf_counter() - started
            cache.close()
            runs.append((wall, summary, records, server.stats()))
        cache = StepCache(path, "read-write")
        entries = len(cache)
        cache.close()

    (wall1, first, records1, stats1), (wall2, rerun, records2, stats2) = runs
    record = {
        "benchmark": "cache", "rows": args.rows, "words": args.words, "latency_s": args.latency,
        "concurrency": args.concurrency, "calls": stats1["requests"], "first_cache_hits": first.usage.cache_hits,
        "cache_entries": entries,
        "first_wall_s": round(wall1, 3), "rerun_wall_s": round(wall2, 3),
        "rerun_fraction": round(wall2 / wall1, 5) if wall1 else None,
        "rerun_model_calls": stats2["requests"], "rerun_usage_calls": rerun.usage.calls,
        "rerun_cache_hits": rerun.usage.cache_hits,
        "max_in_flight": stats1["max_in_flight"], "rerun_max_in_flight": stats2["max_in_flight"],
        "failed": first.failed + rerun.failed, "correct": fraction_correct(records1, rows),
        "rerun_correct": fraction_correct(records2, rows),
    }
    emit(record)
    return record


if __name__ == "__main__":
    main()
