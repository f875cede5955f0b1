"""Benchmark: client CPU per request of the OpenAI backend, for each transport.

Sends REQUESTS completions requests through `OpenAIModel.complete` under the engine's
`Scheduler` (concurrency C, so the slot is taken and given back as in a run) to the mock
OpenAI server in a child process, which answers at once (latency 0 unless --latency): its CPU
is not this process's. For each transport (`aiohttp`, the default, and `openai`, the official
client) and each of RUNS runs, alternating, a new model warms its connection pool with C
requests, then the timed requests go out; `time.process_time()` of this process over them,
divided by their number, is the CPU per request (the backend, its HTTP stack, the scheduler and
the event loop; the interpreter adds ~0.05 ms in a real run, measured by benchmarks/overhead.py).

Prints one JSON line: per transport the median CPU ms per request over the runs (`cpu_ms`), each
run's figure, the median wall time of a run and the requests per second it gave.

    python benchmarks/client_cpu.py [--requests 2000] [--concurrency 64] [--runs 5] [--api completions]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import time

if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

TRANSPORTS = ("aiohttp", "openai")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.harness import parser

    p = parser(__doc__)
    p.add_argument("--requests", type=int, default=2000, help="timed requests per run")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--runs", type=int, default=5, help="runs per transport (the median is reported)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds the server takes per request")
    p.add_argument("--api", choices=("completions", "chat"), default="completions")
    p.add_argument("--transport", choices=TRANSPORTS, action="append",
                   help="measure only this transport (repeatable; default: both)")
    return p.parse_args(argv)


async def _one_run(base_url: str, transport: str, args: argparse.Namespace) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, failed requests) of the timed requests of one run."""
    from decomp.runtime.engine.scheduler import Scheduler
    from decomp.runtime.models.base import ModelSettings, Request
    from decomp.runtime.models.openai_backend import OpenAIModel

    model = OpenAIModel("bench", ModelSettings(base_url=base_url, api=args.api, transport=transport))
    scheduler = Scheduler(args.concurrency, retries=0)
    request = Request("Q: What is the capital of France?\nA: Paris", max_tokens=16)
    pending = asyncio.Semaphore(args.concurrency * 2)  # tasks made as slots free, not all at once

    async def one() -> bool:
        try:
            return (await scheduler.complete(model, request)).text == "A: Paris"
        finally:
            pending.release()

    async def many(n: int) -> list[bool]:
        tasks = []
        for _ in range(n):
            await pending.acquire()
            tasks.append(asyncio.ensure_future(one()))
        return await asyncio.gather(*tasks, return_exceptions=True)

    try:
        await many(args.concurrency)  # open the pool's connections, import the HTTP stack
        cpu, wall = time.process_time(), time.perf_counter()
        results = await many(args.requests)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        await model.aclose()
    return cpu, wall, sum(1 for r in results if r is not True)


def main(argv: list[str] | None = None) -> dict:
    from benchmarks.harness import emit
    from decomp.runtime.testing.mock_server import start_subprocess, stop_subprocess

    args = _arguments(argv)
    transports = tuple(args.transport or TRANSPORTS)
    figures: dict[str, list[tuple[float, float, int]]] = {t: [] for t in transports}
    proc, base_url = start_subprocess(latency=args.latency)
    try:
        for _ in range(args.runs):
            for transport in transports:  # alternating: both see the machine in the same state
                figures[transport].append(asyncio.run(_one_run(base_url, transport, args)))
    finally:
        stop_subprocess(proc)

    record: dict = {"benchmark": "client_cpu", "requests": args.requests, "concurrency": args.concurrency,
                    "runs": args.runs, "latency_s": args.latency, "api": args.api}
    for transport, runs in figures.items():
        cpu_ms = [1000 * cpu / args.requests for cpu, _, _ in runs]
        wall = statistics.median(w for _, w, _ in runs)
        record[transport] = {
            "cpu_ms": round(statistics.median(cpu_ms), 4), "cpu_ms_runs": [round(c, 4) for c in cpu_ms],
            "wall_s": round(wall, 3), "requests_per_s": round(args.requests / wall, 1),
            "failed": sum(f for _, _, f in runs),
        }
    if len(transports) == 2:
        record["cpu_ratio"] = round(record["aiohttp"]["cpu_ms"] / record["openai"]["cpu_ms"], 3)
    emit(record)
    return record


if __name__ == "__main__":
    main()
