"""Rows on a Ray cluster: the driver keeps the run directory, Ray actors run the rows.

`run_rows_on_ray` is `batch.run_rows` spread over `workers` actors (`RowWorker`), each holding
the loaded program and a session of its own, in a process of its own. Rows are handed out as
they are asked for: each worker holds at most `per_worker` rows at once and gets the next as
one ends, so a fast worker takes more rows. Each row's record and trace come back to the
driver as the row ends and go to its sink (the run directory), exactly as in one process.

Limits and budgets hold for the whole run (`ray_limits`): one `Limiter` actor holds the
request slots and rate limits, one `RunLedger` actor the budgets of the whole run.

A worker that dies (its process killed, its node lost) loses no row: the rows it held are
handed to the others, a new worker takes its place, the limiter takes back the slots it held,
and a row is sent to the sink only once, when a worker returned it. An error in a row stays
that row's error. A worker that cannot load the program, or workers that keep dying with no
row done, stop the run with a `RayError` (the run directory can be resumed).

Ray is an optional extra (`pip install 'decomp-lang[ray]'`).
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.batch import BatchSummary, _run_row, error_row
from decomp.runtime.runs.datasets import Row
from decomp.runtime.runs.programs import load_program
from decomp.runtime.runs.ray_limits import (
    RUN_BUDGETS,
    ClusterScheduler,
    LedgerClient,
    RayError,
    RunLedger,
    on_this_node,
    ray_module,
    shared_limits,
)

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
    `HOST:PORT`; None: a new local Ray instance started for the run, or the one this process
    has joined already), `workers` actors (None: one per CPU of the cluster), each holding at most
    `per_worker` rows at once (None: four times the run's concurrency over the workers, at
    least 2: a row waiting on its own earlier calls leaves slots to the others' rows)."""

    address: str | None = None
    workers: int | None = None
    per_worker: int | None = None


def worker_session(spec: WorkerSpec, limiter: Any | None, holder: str = "",
                   ledger: Any | None = None) -> tuple[Any, Any, contextlib.ExitStack]:
    """What a worker process runs rows with: a session of `spec.options` (its scheduler taking
    its slots at `limiter`, the run's `Limiter` actor, in the name `holder`, when one is given;
    the run's budgets counted at `ledger`, a `RunLedger` actor, when one is given), the program
    loaded in it, and the trust the driver had, held open until the returned stack is closed."""
    from decomp.handlers.trust import allowing

    trust = contextlib.ExitStack()
    trust.enter_context(allowing(spec.trust, spec.roots))
    session = spec.options.session()
    if limiter is not None:
        session.scheduler = ClusterScheduler(limiter, spec.options.concurrency, holder)
    if ledger is not None:
        session.shared_run = LedgerClient(ledger, holder)
    module, _ = load_program(session, Path(spec.program), spec.main)
    return session, module, trust


class RowWorker:
    """One worker: the program loaded once, a session whose scheduler is the run's limiter's;
    `run` runs one row as `batch.run_rows` would and returns its record and trace (as a dict);
    `close` commits the worker's step cache and closes its clients."""

    def __init__(self, spec: WorkerSpec, limiter: Any, name: str, ledger: Any = None):
        self.session, self.module, self._trust = worker_session(spec, limiter, name, ledger)

    async def run(self, row: Row) -> tuple[dict, dict]:
        record, trace = await _run_row(self.session, self.module, row)
        return record, trace.to_dict()

    async def close(self) -> None:
        await self.session.aclose()
        self._trust.close()


#: Seconds a cluster's address may take to accept a connection before the run gives up on it.
CONNECT_SECONDS = 10.0


def connect(cluster: Cluster) -> Any:
    """Join `cluster` (once per process; a new local instance when it names no address) and give
    `ray` back. An address nobody answers at is a `RayError` within `CONNECT_SECONDS`, not Ray's
    own minutes of retrying."""
    ray = ray_module()
    if ray.is_initialized():
        return ray
    address = cluster.address
    if address not in (None, "auto"):
        _probe(address)
    try:
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False)
    except (ConnectionError, ValueError) as err:
        raise RayError(f"cannot reach the Ray cluster at {address}: {err}") from None
    return ray


def _probe(address: str) -> None:
    """A `RayError` unless HOST:PORT (or ray://HOST:PORT) accepts a TCP connection."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RayError(f"cannot reach the Ray cluster at {address}: not auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as err:
        raise RayError(f"cannot reach the Ray cluster at {address}: {err.strerror or err}") from None


async def run_rows_on_ray(spec: WorkerSpec, rows: Iterable[Row], sink: Callable[[dict, TraceNode], None],
                          skip: Any = (), cluster: Cluster = Cluster()) -> BatchSummary:
    """Run `rows` (but those whose index is in `skip`) on the actors of `cluster`; every row's
    (record, trace) goes to `sink` as it comes back."""
    ray = connect(cluster)
    options = spec.options
    count = cluster.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    limiter = shared_limits(options.concurrency, options.rpm, options.tpm)
    ledger = None
    if any(getattr(options, name) is not None for name in RUN_BUDGETS):
        ledger = ray.remote(RunLedger).options(num_cpus=0, scheduling_strategy=on_this_node(ray)).remote(options.budget())
    pool = _Workers(ray, spec, count, cluster.per_worker or max(2, -(-4 * options.concurrency // count)),
                    limiter, ledger)
    summary = BatchSummary()
    started = time.perf_counter()
    todo: Iterator[Row] = (row for row in rows if row.index not in skip)
    again: deque[Row] = deque()  # rows of a worker that died, sent first

    def next_row() -> Row | None:
        return again.popleft() if again else next(todo, None)

    def done(record: dict, trace: TraceNode) -> None:
        summary.rows += 1
        summary.failed += "error" in record
        sink(record, trace)

    try:
        await pool.start_all()
        pool.hand_out(next_row)
        while pool.held:
            finished, _ = await asyncio.wait(pool.held, return_when=asyncio.FIRST_COMPLETED)
            for future in finished:
                ran, row = await pool.returned(future)
                if ran is not None:
                    done(ran[0], TraceNode.from_dict(ran[1]))
                elif pool.strikes.get(row.index, 0) >= ROW_STRIKES:  # it kills every worker it is on
                    done(*_died_row(row))
                else:
                    again.append(row)
            pool.hand_out(next_row)
        summary.max_in_flight = await limiter.max_in_flight.remote()
        await pool.close()
    finally:
        pool.kill(limiter, ledger)
    summary.seconds = time.perf_counter() - started
    return summary


#: A row whose worker died this many times with it is recorded with that error, not run again.
ROW_STRIKES = 3
#: Seconds a worker may take to start (a process placed on a node, the program loaded).
START_SECONDS = 120.0


def _died_row(row: Row) -> tuple[dict, TraceNode]:
    """The record and trace of a row that every worker it ran on died running."""
    record, trace = error_row(row, f"its Ray worker died while running it, {ROW_STRIKES} times (out of memory, "
                                   "or a crash)")
    record["outcome"] = "error"
    if row.gold is not None:
        record.update(gold=row.gold, score=0.0)
    return record, trace


class _Workers:
    """The run's `RowWorker` actors, each named (so that the limiter and the ledger can forget a
    dead one) and holding at most `per_worker` rows; `held` maps each row's pending result to
    (slot, the worker's name, row); `strikes` counts, by row index, the workers that died with
    the row on them. A slot whose worker cannot start in `START_SECONDS` (no node has room for
    it) is left empty."""

    def __init__(self, ray: Any, spec: WorkerSpec, count: int, per_worker: int, limiter: Any, ledger: Any):
        self.ray, self.spec, self.per_worker = ray, spec, per_worker
        self.limiter, self.ledger = limiter, ledger
        self.actor_class = ray.remote(RowWorker).options(max_concurrency=per_worker + 1, max_restarts=0,
                                                         max_task_retries=0, num_cpus=1)  # one per CPU: spread
        self.actors: list[Any] = [None] * count
        self.names = [""] * count
        self.load = [0] * count
        self.held: dict[asyncio.Future, tuple[int, str, Row]] = {}
        self.strikes: dict[int, int] = {}
        self.deaths = 0  # workers that died since a row last came back

    def _launch(self, slot: int) -> Any:
        self.names[slot] = f"worker-{slot}-{uuid.uuid4().hex[:12]}"
        self.actors[slot] = self.actor_class.remote(self.spec, self.limiter, self.names[slot], self.ledger)
        return asyncio.wrap_future(self.actors[slot].__ray_ready__.remote().future())

    async def start_all(self) -> None:
        """Start every worker; those not up in `START_SECONDS` are dropped (a `RayError` when
        none is, or when one cannot load the program)."""
        ready = [self._launch(slot) for slot in range(len(self.actors))]
        failures = await asyncio.gather(*(self._up(slot, future) for slot, future in enumerate(ready)))
        if all(failures):
            raise RayError(f"no Ray worker started: {failures[0]}")

    async def _up(self, slot: int, ready: Any) -> str | None:
        """None when the worker in `slot` came up; else why not (and the slot is emptied)."""
        try:
            await asyncio.wait_for(ready, START_SECONDS)
            return None
        except self.ray.exceptions.RayActorError as err:
            _refuse_unloadable(err)
            why = " ".join(_said(err)[:3])
        except asyncio.TimeoutError:
            why = f"not up within {START_SECONDS:g}s (does the cluster have a free CPU for it?)"
        self._drop(slot)
        return why

    def _drop(self, slot: int) -> None:
        with contextlib.suppress(Exception):
            self.ray.kill(self.actors[slot])
        self.actors[slot] = None

    def hand_out(self, next_row: Callable[[], Row | None]) -> None:
        """Give each worker rows until it holds `per_worker` or none are left."""
        if not any(self.actors) and not self.held:
            raise RayError("every Ray worker of the run is gone and none could be started again")
        for slot, actor in enumerate(self.actors):
            while actor is not None and self.load[slot] < self.per_worker:
                row = next_row()
                if row is None:
                    return
                self.held[asyncio.wrap_future(actor.run.remote(row).future())] = (slot, self.names[slot], row)
                self.load[slot] += 1

    async def returned(self, future: asyncio.Future) -> tuple[tuple[dict, dict] | None, Row]:
        """A row's (record, trace) and the row; None for a row whose worker died (counted in
        `strikes`; the worker is replaced when the first of its rows comes back, the slots and
        money it held given back to the run)."""
        slot, name, row = self.held.pop(future)
        self.load[slot] -= 1
        try:
            ran = future.result()
        except self.ray.exceptions.RayActorError as err:
            self.strikes[row.index] = self.strikes.get(row.index, 0) + 1
            if self.names[slot] == name:
                await self._replace(slot, err)
            return None, row
        self.deaths = 0
        return ran, row

    async def _replace(self, slot: int, err: Exception) -> None:
        """The worker in `slot` died (or cannot be reached: it is ended, to be sure): forget it
        and start another in its place."""
        self.deaths += 1
        _check_death(err, self.deaths, len(self.actors))
        self._drop(slot)
        self.limiter.forget.remote(self.names[slot])
        if self.ledger is not None:
            self.ledger.forget.remote(self.names[slot])
        await self._up(slot, self._launch(slot))

    async def close(self) -> None:
        """Let every worker close (its step cache committed); one that died or hangs is left."""
        closing = [asyncio.wrap_future(actor.close.remote().future()) for actor in self.actors if actor is not None]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_SECONDS)

    def kill(self, *others: Any) -> None:
        """End every worker and the `others` actors (None ones skipped)."""
        for actor in [*self.actors, *others]:
            if actor is not None:
                with contextlib.suppress(Exception):
                    self.ray.kill(actor)


#: Workers (per worker of the run) that may die one after another, no row coming back between
#: them, before the run stops: a node that kills every worker it starts would loop for ever.
DEATHS_PER_WORKER = 3


def _check_death(err: Exception, deaths: int, workers: int) -> None:
    """Stop the run (a `RayError`) when a worker could not start (the program does not load
    there) or when workers keep dying with no row coming back."""
    _refuse_unloadable(err)
    if deaths > DEATHS_PER_WORKER * workers:
        raise RayError(f"{deaths} Ray workers died one after another with no row done; the last: "
                       f"{' '.join(_said(err)[:3])}")


def _refuse_unloadable(err: Exception) -> None:
    """A `RayError` when `err` says a worker died in its constructor (the program did not load)."""
    if getattr(err, "actor_init_failed", False):
        raise RayError(f"a Ray worker could not load the program: {(_said(err) or [str(err)])[-1]}")


def _said(err: Exception) -> list[str]:
    """The non-blank lines of what `err` says."""
    return [line.strip() for line in str(err).splitlines() if line.strip()]


#: Seconds the workers have to commit their step caches and close their clients at the end.
CLOSE_SECONDS = 30.0
