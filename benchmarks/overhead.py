"""Benchmark: the interpreter's own CPU time per handler call.

Runs `decomp/letter_cat_llm` on ROWS letter-concatenation questions with an in-process `FakeModel`
whose `default` is the perfect oracle (benchmarks/letter_cat_oracle.py): zero latency, no
network, no cache. Measures the process CPU time (`time.process_time`) of the batch run, then
subtracts the oracle's own CPU time (measured afterwards by answering every recorded prompt
again), and divides by the number of handler calls:

    us_per_call       = (run CPU - oracle CPU) / (model calls + symbolic handler calls)
    us_per_model_call = (run CPU - oracle CPU) / model calls

Symbolic handler calls are the `usage.handler_calls` of handlers that call no model (regex,
python, calculator, ...); letter_cat has none, so there both figures are the same. The time
includes the FakeModel's own bookkeeping (its script/mapping lookups and history), reported on
its own as `fake_model_us_per_model_call` (measured like the oracle's, by replaying its lookups).

    python benchmarks/overhead.py [--rows 300] [--profile 25]

`--profile N` runs under cProfile and prints the N top functions by cumulative and by own time
to stderr (the JSON figures of a profiled run are inflated by the profiler, and say so).
"""
from __future__ import annotations

import asyncio
import io
import sys
import time

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import arguments, emit  # noqa: E402
from benchmarks.letter_cat_oracle import (  # noqa: E402
    dataset_rows,
    fraction_correct,
    load_program,
    make_rows,
    records_in_order,
    respond,
)

MODEL_KINDS = frozenset({"prompt", "decomposer", "score"})  # kinds whose calls are model calls


def main(argv: list[str] | None = None) -> dict:
    p = arguments(__doc__, argv, rows=300, server=False)
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print the N top functions (cProfile)")
    p.add_argument("--repeat", type=int, default=15, help="timed runs; the fastest is reported (CPU noise only adds)")
    args = p.parse_args(argv)

    from decomp.runtime.testing.fake import FakeModel
    from decomp.runtime.engine import interpreter  # noqa: F401  (imported before timing, as a run would)
    from decomp.runtime.runs.batch import run_rows
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.engine.session import Session

    rows = make_rows(args.rows, args.words, args.seed)
    batch = dataset_rows(rows)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    timings = []
    for _ in range(max(1, args.repeat)):
        model = FakeModel(default=lambda request: respond(request.prompt), name="oracle")
        session = Session(model=model, scheduler=Scheduler(16), cache=None)
        module = load_program(session)
        out = io.StringIO()
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        summary = asyncio.run(run_rows(session, module, batch, out))
        if profiler:
            profiler.disable()
        timings.append((time.process_time() - cpu, time.perf_counter() - wall))
    cpu, wall = min(timings)

    prompts = model.prompts
    oracle_cpu = time.process_time()
    for prompt in prompts:
        respond(prompt)
    oracle_cpu = time.process_time() - oracle_cpu
    lookups_cpu = time.process_time()
    for request in model.history:
        model._answer(request)  # the fake's lookups, then the oracle (as during the run)
    lookups_cpu = time.process_time() - lookups_cpu - oracle_cpu

    records = records_in_order(out.getvalue())
    usage = summary.usage
    model_calls = usage.calls
    symbolic = sum(n for name, n in usage.handler_calls.items()
                   if getattr(module.handlers.get(name), "kind", "") not in MODEL_KINDS)
    calls = model_calls + symbolic
    own = cpu - oracle_cpu
    record = {
        "benchmark": "overhead", "rows": args.rows, "words": args.words, "calls": calls,
        "model_calls": model_calls, "symbolic_calls": symbolic,
        "handler_calls": sum(usage.handler_calls.values()),
        "cpu_s": round(cpu, 4), "wall_s": round(wall, 4), "oracle_cpu_s": round(oracle_cpu, 4),
        "us_per_call": round(1e6 * own / calls, 2) if calls else None,
        "us_per_model_call": round(1e6 * own / model_calls, 2) if model_calls else None,
        "fake_model_us_per_model_call": round(1e6 * lookups_cpu / model_calls, 2) if model_calls else None,
        "max_in_flight": max(summary.max_in_flight.values(), default=0), "concurrency": 16,
        "failed": summary.failed, "correct": fraction_correct(records, rows),
        "profiled": bool(profiler), "repeat": len(timings),
        "us_per_model_call_runs": [round(1e6 * t[0] / max(1, summary.usage.calls), 1) for t in timings],
    }
    emit(record)
    if profiler:
        import pstats

        for order in ("cumulative", "tottime"):
            print(f"\n---- top {args.profile} by {order}", file=sys.stderr)
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(order).print_stats(args.profile)
    return record


if __name__ == "__main__":
    main()
