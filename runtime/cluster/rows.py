"""Rows on a Ray cluster: the driver keeps the run directory, Ray actors run the rows.

`run_rows_on_ray` is `batch.run_rows` spread over `workers` actors (`RowWorker`), each holding
the loaded program and a session of its own, in a process of its own. Rows are handed out as
they are asked for: each worker holds at most `per_worker` rows at once and gets the next as
one ends, so a fast worker takes more rows. Each row's record and trace come back to the
driver as the row ends and go to its sink (the run directory), exactly as in one process.

Limits and budgets hold for the whole run (`limits`): one `Limiter` actor holds the
request slots and rate limits, one `RunLedger` actor the budgets of the whole run.

A worker whose process dies loses no row: the rows it held are handed to the others, a new
worker starts in its place while the run goes on, the limiter takes back the slots it held, and
a row is sent to the sink only once, when a worker returned it. An error in a row stays that
row's error. What the run cannot go on without stops it with a `RayError` that names it, the
rows already sent to the sink kept (the run directory can be resumed): a worker that cannot
load the program; workers that keep dying with no row done; a node the run had workers on
that dies; the limiter or the ledger dying (a worker that loses one returns no row after:
`limits.ActorLost`). Every wait on Ray is bounded: every `Cluster.check_seconds` the driver
checks, beside the rows, that the limiter, the ledger and every worker answer within that time
and that no node of the run is dead, so a dead or silent part of the cluster stops the run
within twice `check_seconds` at most.

Ray is an optional extra (`pip install 'decomp-lang[ray]'`).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.batch import BatchSummary, _run_row, error_row, program_scorer
from decomp.runtime.storage.datasets import Row
from decomp.runtime.runs.programs import load_program
from decomp.runtime.runs.remote import WorkerSpec
from decomp.runtime.cluster.limits import (
    RUN_BUDGETS,
    ActorLost,
    ClusterScheduler,
    LedgerClient,
    RayError,
    RunLedger,
    on_this_node,
    ray_module,
    shared_limits,
)

#: Seconds between the driver's checks of the cluster, and that each part checked has to answer.
CHECK_SECONDS = 30.0


@dataclass(frozen=True)
class Cluster:
    """Where a run's rows go: `address` of a Ray cluster (`auto`, `ray://HOST:PORT`,
    `HOST:PORT`; None: a new local Ray instance started for the run, or the one this process
    has joined already), `workers` actors (None: one per CPU of the cluster), each holding at most
    `per_worker` rows at once (None: four times the run's concurrency over the workers, at
    least 2: a row waiting on its own earlier calls leaves slots to the others' rows). Every
    `check_seconds` the driver checks the cluster, and what does not answer in that time stops
    the run: a lost node or actor ends it within twice `check_seconds`."""

    address: str | None = None
    workers: int | None = None
    per_worker: int | None = None
    check_seconds: float = CHECK_SECONDS

    def connect(self) -> None:
        """Join the cluster now (`connect`): an address nobody answers at is a `RayError`."""
        connect(self)

    async def run_rows(self, spec: WorkerSpec, rows: Iterable[Row], sink: Callable[[dict, TraceNode], None],
                       skip: Any = ()) -> BatchSummary:
        """`run_rows_on_ray` on this cluster (`decomp.runtime.runs.remote.Workers`)."""
        return await run_rows_on_ray(spec, rows, sink, skip=skip, cluster=self)


def worker_session(spec: WorkerSpec, limiter: Any | None, holder: str = "",
                   ledger: Any | None = None) -> tuple[Any, Any]:
    """What a worker process runs rows with: a session of `spec.options` trusting what the
    driver's session trusted (`spec.trust`, `spec.roots`; its scheduler taking its slots at
    `limiter`, the run's `Limiter` actor, in the name `holder`, when one is given; the run's
    budgets counted at `ledger`, a `RunLedger` actor, when one is given), and the program loaded
    in it."""
    options = spec.options
    if spec.trust or spec.roots:
        options = dataclasses.replace(options, trust=(*options.trust, *spec.trust),
                                      allow_roots=(*options.allow_roots, *spec.roots))
    session = options.session()
    if limiter is not None:
        session.scheduler = ClusterScheduler(limiter, spec.options.concurrency, holder)
    if ledger is not None:
        session.shared_run = LedgerClient(ledger, holder)
    module, _ = load_program(session, Path(spec.program), spec.main)
    return session, module


class RowWorker:
    """One worker: the program loaded once, a session whose scheduler is the run's limiter's;
    `run` runs one row as `batch.run_rows` would and returns its record and trace (as a dict);
    `close` commits the worker's step cache and closes its clients."""

    def __init__(self, spec: WorkerSpec, limiter: Any, name: str, ledger: Any = None):
        self.session, self.module = worker_session(spec, limiter, name, ledger)
        self.scorer = program_scorer(self.module, spec.options.metric_limits(), spec.options.metric,
                                     self.session.trust)

    async def run(self, row: Row) -> tuple[dict, dict]:
        """The row's record and trace; an `ActorLost` instead once this worker has lost the
        run's limiter or ledger (the row may have run without the run's limits)."""
        record, trace = await _run_row(self.session, self.module, row, self.scorer)
        lost = getattr(self.session.scheduler, "lost", None) or getattr(self.session.shared_run, "lost", None)
        if lost is not None:
            raise ActorLost(lost.message)
        return record, trace.to_dict()

    def where(self) -> tuple[str, str]:
        """The id and the address of the node this worker runs on."""
        ray = ray_module()
        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    async def close(self) -> None:
        await self.session.aclose()


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
    (record, trace) goes to `sink` as it comes back. A `RayError` stops the run when the cluster
    cannot go on with it (see the module's docstring); the rows sent to `sink` before stay."""
    ray = connect(cluster)
    options = spec.options
    count = cluster.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    limiter = shared_limits(options.concurrency, options.rpm, options.tpm)
    ledger = None
    if any(getattr(options, name) is not None for name in RUN_BUDGETS):
        ledger = ray.remote(RunLedger).options(num_cpus=0, scheduling_strategy=on_this_node(ray)).remote(options.budget())
    pool = _Workers(ray, spec, count, cluster.per_worker or max(2, -(-4 * options.concurrency // count)),
                    (limiter, ledger), cluster.check_seconds)
    summary = BatchSummary()
    started = time.perf_counter()
    queue = _Rows(row for row in rows if row.index not in skip)

    def done(record: dict, trace: TraceNode) -> None:
        summary.rows += 1
        summary.failed += "error" in record
        sink(record, trace)

    try:
        await pool.start_all()
        pool.hand_out(queue)
        while pool.busy(queue):
            for ran, row in await pool.next_returned():
                if ran is not None:
                    done(ran[0], TraceNode.from_dict(ran[1]))
                elif pool.strikes.get(row.index, 0) >= ROW_STRIKES:  # it kills every worker it is on
                    done(*_died_row(row))
                else:
                    queue.again.append(row)
            pool.hand_out(queue)
        summary.max_in_flight = await pool.ask(limiter.max_in_flight) or {}
        await pool.close()
    finally:
        pool.kill()
    summary.seconds = time.perf_counter() - started
    return summary


#: A row whose worker died this many times with it is recorded with that error, not run again.
ROW_STRIKES = 3
#: Seconds a worker may take to start (a process placed on a node, the program loaded).
START_SECONDS = 120.0
#: What every error that stops a run midway adds.
STOPS = "; the run stops: the rows that ended are kept in its run directory, and --resume runs the rest"


def _died_row(row: Row) -> tuple[dict, TraceNode]:
    """The record and trace of a row that every worker it ran on died running."""
    record, trace = error_row(row, f"its Ray worker died while running it, {ROW_STRIKES} times (out of memory, "
                                   "or a crash)")
    record["outcome"] = "error"
    if row.gold is not None:
        record.update(gold=row.gold, score=0.0)
    return record, trace


class _Rows:
    """The rows left to hand out: those whose worker died (`again`) first, then the input's."""

    def __init__(self, rows: Iterable[Row]):
        self._rows: Iterator[Row] = iter(rows)
        self._ahead: list[Row] = []
        self.again: deque[Row] = deque()

    def take(self) -> Row | None:
        """The next row to hand out; None when none is left now."""
        if self.again:
            return self.again.popleft()
        return self._ahead.pop() if self._ahead else next(self._rows, None)

    def left(self) -> bool:
        """Whether a row is left to hand out."""
        if not (self.again or self._ahead):
            self._ahead.extend(row for row in [next(self._rows, None)] if row is not None)
        return bool(self.again or self._ahead)


class _Workers:
    """The run's `RowWorker` actors, each named (so that the limiter and the ledger can forget a
    dead one) and holding at most `per_worker` rows; `held` maps each row's pending result to
    (slot, the worker's name, row); `strikes` counts, by row index, the workers that died with
    the row on them. A slot is empty while its worker starts; one whose worker cannot start in
    `START_SECONDS` (no node has room for it) is left empty. `run_actors` are the run's limiter
    and ledger (None: the run has no ledger); every `check_seconds` the cluster is checked
    (`check`) while the rows go on."""

    def __init__(self, ray: Any, spec: WorkerSpec, count: int, per_worker: int, run_actors: tuple[Any, Any],
                 check_seconds: float):
        self.ray, self.spec, self.per_worker = ray, spec, per_worker
        self.limiter, self.ledger = run_actors
        self.actor_class = ray.remote(RowWorker).options(max_concurrency=per_worker + 1, max_restarts=0,
                                                         max_task_retries=0, num_cpus=1)  # one per CPU: spread
        self.actors: list[Any] = [None] * count
        self.names = [""] * count  # the name of the slot's worker, or of the one starting there
        self.load = [0] * count
        self.launched: list[Any] = []  # every worker started, to end them all
        self.nodes: dict[str, tuple[str, list[str]]] = {}  # node id -> (address, workers) the run had there
        self.held: dict[asyncio.Future, tuple[int, str, Row]] = {}
        self.starting: set[asyncio.Future] = set()
        self.strikes: dict[int, int] = {}
        self.deaths = 0  # workers that died since a row last came back
        self.check_seconds = check_seconds
        self.checking: asyncio.Future | None = None
        self.next_check = time.monotonic() + check_seconds

    def _launch(self, slot: int) -> asyncio.Future:
        """Start a worker for `slot`; it takes the slot when it is up (`_up`)."""
        name = self.names[slot] = f"worker-{slot}-{uuid.uuid4().hex[:12]}"
        actor = self.actor_class.remote(self.spec, self.limiter, name, self.ledger)
        self.launched.append(actor)
        return asyncio.ensure_future(self._up(slot, name, actor))

    async def start_all(self) -> None:
        """Start every worker; those not up in `START_SECONDS` are dropped (a `RayError` when
        none is, or when one cannot load the program)."""
        failures = await asyncio.gather(*(self._launch(slot) for slot in range(len(self.actors))))
        if all(failures):
            raise RayError(f"no Ray worker started: {failures[0]}")

    async def _up(self, slot: int, name: str, actor: Any) -> str | None:
        """None when `actor` came up and took `slot`; else why not (and it is ended)."""
        try:
            node, address = await asyncio.wait_for(_future(actor.where.remote()), START_SECONDS)
        except self.ray.exceptions.RayActorError as err:
            _refuse_unloadable(err)
            why = " ".join(_said(err)[:3])
        except asyncio.TimeoutError:
            why = f"not up within {START_SECONDS:g}s (does the cluster have a free CPU for it?)"
        else:
            self.actors[slot] = actor
            self.nodes.setdefault(node, (address, []))[1].append(name)
            return None
        with contextlib.suppress(Exception):
            self.ray.kill(actor)
        return why

    def _drop(self, slot: int) -> None:
        with contextlib.suppress(Exception):
            self.ray.kill(self.actors[slot])
        self.actors[slot] = None

    def busy(self, rows: _Rows) -> bool:
        """Rows are out, or workers are starting and rows wait for them."""
        return bool(self.held) or (bool(self.starting) and rows.left())

    def hand_out(self, rows: _Rows) -> None:
        """Give each worker rows until it holds `per_worker` or none are left."""
        if not any(self.actors) and not self.held and not self.starting and rows.left():
            raise RayError("every Ray worker of the run is gone and none could be started again")
        for slot, actor in enumerate(self.actors):
            while actor is not None and self.load[slot] < self.per_worker:
                row = rows.take()
                if row is None:
                    return
                self.held[_future(actor.run.remote(row))] = (slot, self.names[slot], row)
                self.load[slot] += 1

    async def next_returned(self) -> list[tuple[tuple[dict, dict] | None, Row]]:
        """The rows that came back next (as `returned` gives them), once one does, a worker is
        up or the cluster's check is due; the check runs beside the rows (a `RayError` when it
        finds what stops the run), every `check_seconds`."""
        if self.checking is None and time.monotonic() >= self.next_check:
            self.checking = asyncio.ensure_future(self.check())
        waits = {*self.held, *self.starting, *([self.checking] if self.checking else [])}
        timeout = None if self.checking else max(0.0, self.next_check - time.monotonic())
        finished, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if self.checking in finished:
            checked, self.checking = self.checking, None
            self.next_check = time.monotonic() + self.check_seconds
            checked.result()
        for started in finished & self.starting:
            self.starting.discard(started)
            started.result()  # a RayError when the program does not load there; else up, or its slot left empty
        return [await self.returned(future) for future in finished if future in self.held]

    async def returned(self, future: asyncio.Future) -> tuple[tuple[dict, dict] | None, Row]:
        """A row's (record, trace) and the row; None for a row whose worker died (counted in
        `strikes`; the worker is replaced when the first of its rows comes back, the slots and
        money it held given back to the run). A worker that fails otherwise (it lost the run's
        limiter or ledger: `limits.ActorLost`) stops the run with a `RayError`."""
        slot, name, row = self.held.pop(future)
        self.load[slot] -= 1
        try:
            ran = future.result()
        except self.ray.exceptions.RayActorError as err:
            self.strikes[row.index] = self.strikes.get(row.index, 0) + 1
            if self.names[slot] == name:
                await self._replace(slot, err)
            return None, row
        except self.ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            said = str(cause) if isinstance(cause, ActorLost) else \
                f"Ray worker {name} failed running row {row.id}: {(_said(err) or [type(err).__name__])[-1]}"
            raise RayError(said + STOPS) from None
        self.deaths = 0
        return ran, row

    async def _replace(self, slot: int, err: Exception) -> None:
        """The worker in `slot` died (or cannot be reached: it is ended, to be sure): a `RayError`
        when its node died; else it is forgotten and another starts in its place, while the
        run goes on."""
        self.deaths += 1
        _check_death(err, self.deaths, len(self.actors))
        await self._check_nodes()
        self._drop(slot)
        self.limiter.forget.remote(self.names[slot])
        if self.ledger is not None:
            self.ledger.forget.remote(self.names[slot])
        self.starting.add(self._launch(slot))

    async def check(self) -> None:
        """A `RayError` naming what stops the run: the run's limiter or ledger actor that died or
        does not answer within `check_seconds`; a node the run had workers on that Ray's control
        store has found dead; a worker that does not answer within `check_seconds`. (A worker
        that died is not stopping it: its rows come back failed and it is replaced.)"""
        for what, actor in (("limiter", self.limiter), ("ledger", self.ledger)):
            why = None if actor is None else await self._answers(actor)
            if why is not None:
                raise RayError(f"the run's {what} actor {why}{STOPS}")
        await self._check_nodes()
        up = [(self.names[slot], actor) for slot, actor in enumerate(self.actors) if actor is not None]
        for (name, _), why in zip(up, await asyncio.gather(*(self._answers(actor) for _, actor in up))):
            if why is not None and not why.startswith("died"):
                raise RayError(f"Ray worker {name} (on node {self._node_of(name)}) {why}{STOPS}")

    async def _answers(self, actor: Any) -> str | None:
        """None when `actor` answers within `check_seconds`; else "died (why)" or "did not answer"."""
        try:
            await asyncio.wait_for(_future(actor.__ray_ready__.remote()), self.check_seconds)
        except self.ray.exceptions.RayActorError as err:
            return f"died ({(_said(err) or [type(err).__name__])[0]})"
        except asyncio.TimeoutError:
            return f"did not answer within {self.check_seconds:g} s"
        return None

    async def _check_nodes(self) -> None:
        """A `RayError` when a node the run had workers on is dead, as Ray's control store sees it."""
        nodes = await _bounded(self.ray.nodes, self.check_seconds, "the Ray cluster's control store (GCS)")
        for node in nodes:
            address, names = self.nodes.get(node.get("NodeID"), ("", []))
            if names and not node.get("Alive", True):
                reason = node.get("DeathReasonMessage") or ""
                raise RayError(f"node {address} ({node['NodeID'][:12]}) of the Ray cluster died"
                               f"{f' ({reason})' if reason else ''}, with {', '.join(names)} on it{STOPS}")

    def _node_of(self, name: str) -> str:
        return next((f"{address} ({node[:12]})" for node, (address, names) in self.nodes.items() if name in names),
                    "unknown")

    async def ask(self, method: Any) -> Any:
        """What `method.remote()` answers; None when its actor died or does not answer within
        `check_seconds`."""
        with contextlib.suppress(Exception):
            return await asyncio.wait_for(_future(method.remote()), self.check_seconds)
        return None

    async def close(self) -> None:
        """Let every worker close (its step cache committed); one that died or hangs is left."""
        closing = [_future(actor.close.remote()) for actor in self.actors if actor is not None]
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), CLOSE_SECONDS)

    def kill(self) -> None:
        """Stop the check and the workers starting; end every worker, the limiter and the ledger."""
        for future in [*self.held, *self.starting, *([self.checking] if self.checking else [])]:
            if future.done() and not future.cancelled():
                future.exception()  # taken: nobody waits for it any more
            future.cancel()
        for actor in [*self.launched, self.limiter, self.ledger]:
            if actor is not None:
                with contextlib.suppress(Exception):
                    self.ray.kill(actor)


def _future(ref: Any) -> asyncio.Future:
    """An asyncio future of a Ray object ref."""
    return asyncio.wrap_future(ref.future())


async def _bounded(call: Callable[[], Any], seconds: float, what: str) -> Any:
    """`call()`, a blocking call, run on a thread of its own; a `RayError` naming `what` when it
    does not return within `seconds` (the thread is left to end by itself: the run stops)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future = loop.create_future()

    def settle(value: Any, err: BaseException | None) -> None:
        if not answer.done():
            answer.set_exception(err) if err is not None else answer.set_result(value)

    def work() -> None:
        try:
            value, err = call(), None
        except BaseException as failed:  # handed to the loop, raised there
            value, err = None, failed
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, value, err)

    threading.Thread(target=work, name="decomp-ray-check", daemon=True).start()
    try:
        return await asyncio.wait_for(answer, seconds)
    except asyncio.TimeoutError:
        raise RayError(f"{what} did not answer within {seconds:g} s{STOPS}") from None


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
