"""Benchmark: how close a batch run comes to its critical-path bound.

Runs `decomp/letter_cat_llm` (an LLM decomposer) on ROWS letter-concatenation questions of WORDS
words against the mock OpenAI server in a child process, which answers every request after
LATENCY seconds with a perfect answer (benchmarks/letter_cat_oracle.py). Concurrency C, no cache.

No schedule can finish sooner than

    bound = max(chain x latency, calls x latency / C)

where `calls` is the number of model requests the run made and `chain` the longest run of model
calls that each waited for the one before (derived from the rows' traces; for letter_cat it is
7: decomposer line, split, line, the str_position calls at once, line, merge, line). Prints one
JSON line with the wall time, the bound, `ratio` = wall / bound, and the largest number of
requests the server saw in flight at once (`max_in_flight`, which must not exceed C).

Before the timed run one throw-away row warms the process up (the openai client imports its
HTTP stack on its first request); the server's statistics are reset after it. `client_cpu_s`
is this process's CPU time during the run (interpreter, openai client, event loop).

    python benchmarks/critical_path.py [--rows 200] [--latency 0.1] [--concurrency 16]
"""
from __future__ import annotations

import time

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    dataset_rows,
    dependent_calls,
    fraction_correct,
    load_program,
    make_rows,
    mock_server,
    openai_session,
    run_batch,
    tracing_session_class,
    warm_up,
)


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=200)
    args = p.parse_args(argv)

    rows = make_rows(args.rows, args.words, args.seed)
    batch = dataset_rows(rows)
    with mock_server(args.latency) as server:
        warm_up(server.base_url)
        session = openai_session(server.base_url, args.concurrency, session_class=tracing_session_class())
        module = load_program(session)
        server.reset_stats()
        server_cpu = server.cpu_seconds()
        cpu, started = time.process_time(), time.perf_counter()
        summary, records = run_batch(session, module, batch)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        stats = server.stats()
        if server_cpu is not None:
            server_cpu = server.cpu_seconds() - server_cpu

    calls = stats["requests"]
    chain = max((dependent_calls(t) for t in session.traces), default=0)
    bound = max(chain * args.latency, calls * args.latency / args.concurrency)
    record = {
        "benchmark": "critical_path", "rows": args.rows, "words": args.words, "calls": calls,
        "usage_calls": summary.usage.calls, "chain": chain, "latency_s": args.latency,
        "concurrency": args.concurrency, "wall_s": round(wall, 3), "bound_s": round(bound, 3),
        "ratio": round(wall / bound, 4) if bound else None, "max_in_flight": stats["max_in_flight"],
        "scheduler_max_in_flight": max(summary.max_in_flight.values(), default=0),
        "client_cpu_s": round(cpu, 3), "client_cpu_ms_per_call": round(1000 * cpu / calls, 3) if calls else None,
        "server_cpu_s": None if server_cpu is None else round(server_cpu, 3),
        "failed": summary.failed, "correct": fraction_correct(records, rows),
    }
    emit(record)
    return record


if __name__ == "__main__":
    main()
