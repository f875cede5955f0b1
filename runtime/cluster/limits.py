"""The limits and budgets of a run whose rows run on a Ray cluster, held for all its workers.

One `Limiter` actor (`shared_limits`) holds the run's concurrency limit and its requests- and
tokens-per-minute limits per endpoint; every worker's scheduler (`ClusterScheduler`) takes its
slots there, in the worker's name, so that the slots of a worker that died can be given back
(`Limiter.forget`). One `RunLedger` actor counts the budgets of the whole run (`--max-calls` and
the like), which every worker's rows ask before each call through a `LedgerClient`
(`budgets.SharedRun`). A worker whose limiter or ledger dies (or, for the ledger, does not
answer within `ACTOR_SECONDS`) raises `ActorLost` in the call and keeps it in `lost`, so that
`rows` returns none of its rows after and stops the run. `rows` runs the rows;
`data.Predictor` can share a limiter too.
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from decomp.dsl.errors import BudgetExceeded, DecompError
from decomp.runtime.engine.budgets import Budget, ModelUsage, Usage, admit_call, admit_handler_call
from decomp.runtime.engine.scheduler import PrioritySemaphore, RateLimit, Scheduler

#: The environment that makes Ray give its nodes 127.0.0.1 (else it gives them the machine's own
#: address, even for a cluster on 127.0.0.1): every port of such a cluster is then on loopback
#: alone. The tests' clusters and the benchmark's instance are started with it.
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}

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


class WorkerGone(RayError, RuntimeError):
    """A worker the driver took for dead asked for a slot or a budget: it gets none (its rows are
    the driver's to run again). A `RuntimeError` too, as it was; it crosses Ray as `holder`."""

    def __init__(self, holder: str):
        super().__init__(f"the run took the Ray worker {holder!r} for dead: it gets no slot or budget")
        self.holder = holder

    def __reduce__(self):
        return type(self), (self.holder,)


class ActorLost(RayError):
    """A worker lost the run's limiter or ledger actor (it died, or did not answer): a row that
    ran on without it would not have held the run's limits, so the worker returns no row after
    it (`rows.RowWorker`) and the driver stops the run."""


def actor_lost(what: str, err: BaseException) -> ActorLost:
    """The `ActorLost` for `what` ("the run's limiter actor") failing with `err`."""
    if isinstance(err, TimeoutError):
        return ActorLost(f"{what} did not answer within {ACTOR_SECONDS:g} s")
    said = [line.strip() for line in str(err).splitlines() if line.strip()]
    return ActorLost(f"{what} died ({said[0] if said else type(err).__name__})")


#: Seconds a worker waits for the run's ledger to admit a call before taking it for lost.
ACTOR_SECONDS = 60.0


#: Calls the `Limiter` actor runs at once, waiting ones included (one event loop: its slots are
#: asyncio's, so a concurrency group of their own, on another loop, could not wake a waiter). No
#: worker has more than `--concurrency` calls waiting there (`ClusterScheduler`), so this bounds
#: workers x concurrency, far above what a run has.
LIMITER_TASKS = 100_000


class Limiter:
    """The run's limits for every worker: a concurrency limit per endpoint (lowest priority
    number served first) and the per-minute limits; the most requests in flight at once.

    Each slot is held by a worker (`holder`, its name): when a worker dies, `forget(holder)`
    gives back the slots it held and every slot it was still waiting for, as each comes (a
    worker killed mid-request would otherwise keep its slots for the rest of the run); a
    forgotten worker that still asks is refused (`WorkerGone`)."""

    def __init__(self, concurrency: int, rpm: float | None = None, tpm: float | None = None):
        self.concurrency, self.rpm, self.tpm = max(1, concurrency), rpm, tpm
        self._slots: dict[str, PrioritySemaphore] = {}
        self._limits: dict[tuple[str, str], RateLimit] = {}
        self._held: dict[str, dict[str, int]] = {}  # holder -> endpoint -> slots it holds
        self._gone: set[str] = set()
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}

    async def acquire(self, endpoint: str, priority: int, tokens: float, holder: str = "") -> None:
        """Wait for a slot of `endpoint`, then for the rate limits; the slot is `holder`'s."""
        if holder in self._gone:
            raise WorkerGone(holder)
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
        if holder in self._gone:  # its worker died while it waited: nobody will give it back
            pool.release()
            raise WorkerGone(holder)
        held = self._held.setdefault(holder, {})
        held[endpoint] = held.get(endpoint, 0) + 1
        self.in_flight[endpoint] = self.in_flight.get(endpoint, 0) + 1
        self.most[endpoint] = max(self.most.get(endpoint, 0), self.in_flight[endpoint])

    def release(self, endpoint: str, holder: str = "") -> None:
        """Give back a slot of `endpoint` that `holder` holds."""
        held = self._held.get(holder, {})
        if held.get(endpoint, 0) <= 0:  # already given back by `forget`
            return
        held[endpoint] -= 1
        self.in_flight[endpoint] -= 1
        self._slots[endpoint].release()

    def forget(self, holder: str) -> int:
        """`holder`'s worker is dead: give back every slot it holds (and each it still waits
        for, when it comes). Returns how many were given back now."""
        self._gone.add(holder)
        freed = 0
        for endpoint, count in self._held.pop(holder, {}).items():
            for _ in range(count):
                self.in_flight[endpoint] -= 1
                self._slots[endpoint].release()
            freed += count
        return freed

    def holding(self) -> dict[str, int]:
        """Slots held now, per endpoint."""
        return {endpoint: count for endpoint, count in self.in_flight.items() if count}

    def max_in_flight(self) -> dict[str, int]:
        """The most requests that were in flight at once, per endpoint."""
        return dict(self.most)


class ClusterScheduler(Scheduler):
    """A worker's scheduler: retries and deadlines here, slots and rate limits at the run's
    `Limiter` actor, held in the name `holder` (a slot asked for and then cancelled is given
    back when it comes). A worker first takes a slot of its own pool (`concurrency`, as the
    run's), so that it never has more requests waiting at the limiter than the run could send."""

    def __init__(self, limiter: Any, concurrency: int, holder: str = "", **kwargs: Any):
        super().__init__(concurrency, **kwargs)
        self._limiter, self._holder = limiter, holder
        self.lost: ActorLost | None = None  # the limiter died under a call: no row is returned after

    def _take_now(self, endpoint: str) -> bool:
        return False

    async def _take(self, endpoint: str, priority: int, tokens: float) -> None:
        pool = await self._turn_in(endpoint, priority)
        ref = self._limiter.acquire.remote(endpoint, priority, tokens, self._holder)
        try:
            await asyncio.shield(ref)
        except BaseException as err:
            pool.release()
            if isinstance(err, asyncio.CancelledError):
                asyncio.ensure_future(self._release_when_taken(ref, endpoint))
            elif isinstance(err, ray_module().exceptions.RayActorError):
                self.lost = actor_lost("the run's limiter actor", err)
                raise self.lost from None
            raise
        self._count_in(endpoint)

    async def _release_when_taken(self, ref: Any, endpoint: str) -> None:
        with contextlib.suppress(Exception):
            await ref
            self._limiter.release.remote(endpoint, self._holder)

    def _give_back(self, endpoint: str) -> None:
        self.in_flight[endpoint] -= 1
        self._slots[endpoint].release()
        self._limiter.release.remote(endpoint, self._holder)


class RunLedger:
    """The budgets of the whole run, for every worker (`--max-calls`, `--max-tokens`,
    `--max-cost`, `--max-handler-calls`): each worker's calls are admitted and counted here, one
    at a time, by the same rules as in one process (`budgets.admit_call`, `admit_handler_call`).
    The money held by each worker's calls in flight is kept by worker, so that `forget` gives
    back what a dead worker held; a forgotten worker is refused."""

    def __init__(self, budget: Budget):
        self.budget, self.run = budget, Usage()
        self.run.models["run"] = ModelUsage()  # the money spent, over every model
        self._holds: dict[str, float] = {}
        self._gone: set[str] = set()

    def admit(self, kind: str, hold: float, holder: str = "") -> str | None:
        """Count a call of `kind` ("model" or "handler"); the reason it is refused, or None."""
        if holder in self._gone:
            return f"budget: worker {holder} was taken for dead"
        try:
            if kind == "model":
                admit_call(self.budget, self.run, hold)
                self._holds[holder] = self._holds.get(holder, 0.0) + hold
            else:
                admit_handler_call(self.budget, self.run)
        except BudgetExceeded as err:
            return err.message
        return None

    def release(self, hold: float, holder: str = "") -> None:
        """Give back `hold` of `holder`'s held money (a call that failed)."""
        self.charge(0, 0.0, hold, holder)

    def charge(self, tokens: int, spent: float, held: float = 0.0, holder: str = "") -> None:
        """Add a call's tokens and cost and give back the money held for it, in one step."""
        if holder in self._gone:
            return
        given = min(held, self._holds.get(holder, 0.0))
        self._holds[holder] = self._holds.get(holder, 0.0) - given
        self.run.held = max(0.0, self.run.held - given)
        self.run.prompt_tokens += tokens
        self.run.models["run"].spent += spent

    def forget(self, holder: str) -> None:
        """`holder`'s worker is dead: the money its calls held goes back."""
        self._gone.add(holder)
        self.run.held = max(0.0, self.run.held - self._holds.pop(holder, 0.0))

    def totals(self) -> dict[str, float]:
        """What the run used so far: model calls, tokens, handler calls, money (spent, held)."""
        run = self.run
        return {"calls": run.calls, "tokens": run.tokens, "handler_calls": run.started, "spent": run.spent,
                "held": run.held}


class LedgerClient:
    """A worker's side of the `RunLedger` actor (`budgets.SharedRun`), in the name `holder`: a
    call is admitted there before it is made (a round trip, waited for: the worker's other rows
    wait meanwhile; only runs with a budget of the whole run pay it), and its tokens and cost
    are sent on without waiting."""

    def __init__(self, ledger: Any, holder: str = ""):
        self._ledger, self._holder = ledger, holder
        self.lost: ActorLost | None = None  # the ledger died or did not answer: no row is returned after

    def admit(self, kind: str, hold: float) -> None:
        """Count a call at the ledger (`ACTOR_SECONDS` at most); a `BudgetExceeded` when it is
        refused, an `ActorLost` when the ledger died or did not answer."""
        ray = ray_module()
        try:
            refused = ray.get(self._ledger.admit.remote(kind, hold, self._holder), timeout=ACTOR_SECONDS)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            self.lost = actor_lost("the run's ledger actor", err)
            raise self.lost from None
        if refused is not None:
            raise BudgetExceeded(refused)

    def release(self, hold: float) -> None:
        self._ledger.release.remote(hold, self._holder)

    def charge(self, tokens: int, spent: float, held: float) -> None:
        self._ledger.charge.remote(tokens, spent, held, self._holder)


#: The budgets of a whole run (`RunOptions` names): counted by a `RunLedger` when any is set.
RUN_BUDGETS = ("max_calls", "max_tokens", "max_cost", "max_handler_calls")


def shared_limits(concurrency: int, rpm: float | None = None, tpm: float | None = None) -> Any:
    """A `Limiter` actor holding these limits for every worker that is given it (`decomp run
    --ray` makes one per run; `data.Predictor` takes one as `limits=`), on this process's
    node where it can be."""
    ray = ray_module()
    return ray.remote(Limiter).options(max_concurrency=LIMITER_TASKS, num_cpus=0,
                                       scheduling_strategy=on_this_node(ray)).remote(concurrency, rpm, tpm)


def on_this_node(ray: Any) -> Any:
    """Ray's scheduling strategy for an actor on this process's node (soft: elsewhere if it
    cannot be there): the run's own actors live and die with the driver's node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=True)
