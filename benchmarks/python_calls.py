"""Benchmark: the wall time of one `python` handler call of a trivial function, contained in a
worker process (a function of a helpers.py beside the program) and in a thread (the same function
registered as a lambda, which a worker cannot import).

Each path: CALLS calls one after another (`session.arun_handler`, no cache), then CALLS calls at
once (`asyncio.gather`), after WARMUP calls that start the workers (the first call's time, which
includes the worker pool's start, is reported on its own):

    process_us_per_call / thread_us_per_call            one after another
    process_us_per_call_gathered / thread_us_...        CALLS at once, wall time / CALLS

    python benchmarks/python_calls.py [--calls 2000]

Run against a checkout from before the worker processes, both paths are threads.
"""
from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import emit, parser  # noqa: E402

HELPERS = "def echo(query):\n    return query\n"


def _sessions(folder: Path):
    from decomp import Session
    from decomp.handlers.plugins import builtin_registry

    (folder / "helpers_bench.py").write_text(HELPERS)
    (folder / "p.decomp").write_text('handler f = python(function="helpers_bench:echo")\nmain f\n')
    contained = Session()
    process = contained.load(folder / "p.decomp").handlers["f"]
    registry = builtin_registry()
    registry.add_function(lambda query: query, "echo_lambda")
    threaded = Session(registry=registry)
    thread = threaded.load("t.decomp", text='handler f = python(function="echo_lambda")\nmain f\n').handlers["f"]
    return (contained, process), (threaded, thread)


async def _measure(session, handler, calls: int, warmup: int) -> dict:
    started = time.perf_counter()
    await session.arun_handler(handler, "q")
    first = time.perf_counter() - started
    for _ in range(warmup):
        await session.arun_handler(handler, "q")
    started = time.perf_counter()
    for i in range(calls):
        await session.arun_handler(handler, f"q{i}")
    serial = time.perf_counter() - started
    started = time.perf_counter()
    answers = await asyncio.gather(*(session.arun_handler(handler, f"g{i}") for i in range(calls)))
    gathered = time.perf_counter() - started
    assert answers == [f"g{i}" for i in range(calls)]
    return {"first_call_s": round(first, 3), "us_per_call": round(serial / calls * 1e6, 1),
            "us_per_call_gathered": round(gathered / calls * 1e6, 1)}


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=50)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        (contained, process), (threaded, thread) = _sessions(Path(folder))

        async def both() -> tuple[dict, dict]:
            return (await _measure(contained, process, args.calls, args.warmup),
                    await _measure(threaded, thread, args.calls, args.warmup))
        proc, thr = asyncio.run(both())
    record = {"benchmark": "python_calls", "calls": args.calls, "python": sys.version.split()[0]}
    record.update({f"process_{k}": v for k, v in proc.items()})
    record.update({f"thread_{k}": v for k, v in thr.items()})
    record["ratio"] = round(proc["us_per_call"] / thr["us_per_call"], 2)
    return emit(record)


if __name__ == "__main__":
    main()
