"""Rows on a Ray cluster: the driver keeps the run directory, Ray actors run the rows.

`run_rows_on_ray` is `batch.run_rows` spread over `workers` actors (`RowWorker`), each holding
the loaded program and a session of its own, in a process of its own. Rows are handed out as
they are asked for: each worker holds at most `per_worker` rows at once and gets the next as
one ends, so a fast worker takes more rows. Each row's record and trace come back to the
driver as the row ends and go to its sink (the run directory), exactly as in one process.

Limits hold for the whole run: one `Limiter` actor holds the run's concurrency limit and its
requests- and tokens-per-minute limits per endpoint, and every worker's scheduler
(`ClusterScheduler`) takes its slots there; `max_in_flight` is counted there too.

A worker that dies (its process killed, its node lost) loses no row: the rows it held are
handed to the others (and a new worker takes its place), and a row is sent to the sink only
once, when a worker returned it. An error in a row stays that row's error.

Ray is an optional extra (`pip install 'decomp-lang[ray]'`).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.scheduler import PrioritySemaphore, RateLimit, Scheduler
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.batch import BatchSummary, _run_row
from decomp.runtime.runs.datasets import Row

INSTALL_HINT = "Ray is not installed: pip install 'decomp-lang[ray]'"


class RayError(DecompError):
    """Ray is missing, or the cluster cannot be reached."""

    kind = "ray error"


def ray_module() -> Any:
    """`import ray`, or a `RayError` that says how to install it."""
    try:
        import ray
    except ImportError as err:
        raise RayError(INSTALL_HINT) from err
    return ray


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to run rows as the driver would: the program's path, the handler or
    program to run (`main`), the run's options (`api.RunOptions`), and the trust the driver has
    (modules trusted, folders allowed)."""

    program: str
    main: str | None
    options: Any
    trust: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class Cluster:
    """Where a run's rows go: `address` of a Ray cluster (`auto`, `ray://HOST:PORT`,
    `HOST:PORT`; None: a local Ray instance started for the run, or the one this process has
    joined already), `workers` actors (None: one per CPU of the cluster), each holding at most
    `per_worker` rows at once (None: the run's concurrency over the workers, at least 2)."""

    address: str | None = None
    workers: int | None = None
    per_worker: int | None = None


class Limiter:
    """The run's limits for every worker: a concurrency limit per endpoint (lowest priority
    number served first) and the per-minute limits; the most requests in flight at once."""

    def __init__(self, concurrency: int, rpm: float | None = None, tpm: float | None = None):
        self.concurrency, self.rpm, self.tpm = max(1, concurrency), rpm, tpm
        self._slots: dict[str, PrioritySemaphore] = {}
        self._limits: dict[tuple[str, str], RateLimit] = {}
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}

    async def acquire(self, endpoint: str, priority: int, tokens: float) -> None:
        """Wait for a slot of `endpoint`, then for the rate limits."""
        pool = self._slots.setdefault(endpoint, PrioritySemaphore(self.concurrency))
        await pool.acquire(priority)
        try:
            if self.rpm:
                await self._limits.setdefault((endpoint, "rpm"), RateLimit(self.rpm)).take(1)
            if self.tpm:
                await self._limits.setdefault((endpoint, "tpm"), RateLimit(self.tpm)).take(tokens)
        except BaseException:
            pool.release()
            raise
        self.in_flight[endpoint] = self.in_flight.get(endpoint, 0) + 1
        self.most[endpoint] = max(self.most.get(endpoint, 0), self.in_flight[endpoint])

    def release(self, endpoint: str) -> None:
        """Give a slot of `endpoint` back."""
        self.in_flight[endpoint] -= 1
        self._slots[endpoint].release()

    def max_in_flight(self) -> dict[str, int]:
        """The most requests that were in flight at once, per endpoint."""
        return dict(self.most)


class ClusterScheduler(Scheduler):
    """A worker's scheduler: retries and deadlines here, slots and rate limits at the run's
    `Limiter` actor (a slot asked for and then cancelled is given back when it comes)."""

    def __init__(self, limiter: Any, concurrency: int, **kwargs: Any):
        super().__init__(concurrency, **kwargs)
        self._limiter = limiter

    def _take_now(self, endpoint: str) -> bool:
        return False

    async def _take(self, endpoint: str, priority: int, tokens: float) -> None:
        ref = self._limiter.acquire.remote(endpoint, priority, tokens)
        try:
            await asyncio.shield(ref)
        except asyncio.CancelledError:
            asyncio.ensure_future(self._release_when_taken(ref, endpoint))
            raise
        self._count_in(endpoint)

    async def _release_when_taken(self, ref: Any, endpoint: str) -> None:
        with contextlib.suppress(Exception):
            await ref
            self._limiter.release.remote(endpoint)

    def _give_back(self, endpoint: str) -> None:
        self.in_flight[endpoint] -= 1
        self._limiter.release.remote(endpoint)


class RowWorker:
    """One worker: the program loaded once, a session whose scheduler is the run's limiter's;
    `run` runs one row as `batch.run_rows` would and returns its record and trace (as a dict)."""

    def __init__(self, spec: WorkerSpec, limiter: Any):
        from decomp.handlers.trust import allowing
        from decomp.runtime.runs.api import _load

        self._trust = contextlib.ExitStack()
        self._trust.enter_context(allowing(spec.trust, spec.roots))
        self.session = spec.options.session()
        self.session.scheduler = ClusterScheduler(limiter, spec.options.concurrency)
        self.module, _ = _load(self.session, Path(spec.program), spec.main)

    async def run(self, row: Row) -> tuple[dict, dict]:
        record, trace = await _run_row(self.session, self.module, row)
        return record, trace.to_dict()

    def pid(self) -> int:
        import os
        return os.getpid()


async def run_rows_on_ray(spec: WorkerSpec, rows: Iterable[Row], sink: Callable[[dict, TraceNode], None],
                          skip: Any = (), cluster: Cluster = Cluster(),
                          on_workers: Callable[[list], None] | None = None) -> BatchSummary:
    """Run `rows` (but those whose index is in `skip`) on the actors of `cluster`; every row's
    (record, trace) goes to `sink` as it comes back. `on_workers` gets the list of actors when
    they start and whenever one is replaced."""
    ray = ray_module()
    if not ray.is_initialized():
        try:
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except ConnectionError as err:
            raise RayError(f"cannot reach the Ray cluster at {cluster.address}: {err}") from None
    options = spec.options
    workers = cluster.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    per_worker = cluster.per_worker or max(2, -(-options.concurrency // workers))
    limiter = ray.remote(Limiter).options(max_concurrency=10_000, num_cpus=0).remote(options.concurrency, options.rpm,
                                                                             options.tpm)
    worker_class = ray.remote(RowWorker).options(max_concurrency=per_worker + 1, max_restarts=0,
                                                  max_task_retries=0, num_cpus=1)  # one per CPU: spread over the nodes
    actors = [worker_class.remote(spec, limiter) for _ in range(workers)]
    if on_workers is not None:
        on_workers(actors)
    summary = BatchSummary()
    started = time.perf_counter()
    todo: Iterator[Row] = (row for row in rows if row.index not in skip)
    again: deque[Row] = deque()  # rows of a worker that died, sent first
    held: dict[Any, tuple[int, Any, Row]] = {}  # pending ref -> (worker slot, its actor, row)
    load = [0] * len(actors)

    def next_row() -> Row | None:
        return again.popleft() if again else next(todo, None)

    def hand_out() -> None:
        for slot in range(len(actors)):
            while load[slot] < per_worker:
                row = next_row()
                if row is None:
                    return
                held[actors[slot].run.remote(row)] = (slot, actors[slot], row)
                load[slot] += 1

    try:
        hand_out()
        while held:
            waiting = {asyncio.wrap_future(ref.future()): ref for ref in held}
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                ref = waiting[future]
                slot, actor, row = held.pop(ref)
                load[slot] -= 1
                try:
                    record, trace = future.result()
                except ray.exceptions.RayActorError:  # the worker died: the row goes to another
                    again.append(row)
                    if actors[slot] is actor:  # the first of its rows to come back: replace it
                        actors[slot] = worker_class.remote(spec, limiter)
                        if on_workers is not None:
                            on_workers(actors)
                    continue
                summary.rows += 1
                summary.failed += "error" in record
                sink(record, TraceNode.from_dict(trace))
            hand_out()
        summary.max_in_flight = await limiter.max_in_flight.remote()
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)
        with contextlib.suppress(Exception):
            ray.kill(limiter)
    summary.seconds = time.perf_counter() - started
    return summary
