"""The limiter and the ledger of a Ray run, as plain objects (no cluster): a dead worker's
request slots and held money go back to the run, and the budgets of the whole run are admitted
by the rules of one process."""
from __future__ import annotations

import asyncio

import pytest

from decomp.runtime.engine.budgets import Budget
from decomp.runtime.cluster.limits import Limiter, RunLedger, WorkerGone


def test_a_dead_workers_slots_go_back_to_the_run():
    """A worker killed mid-request never gives its slots back itself: the limiter does, when the
    driver tells it the worker is gone, and a slot it was still waiting for is given back as it
    comes. Without this a killed worker holding every slot stalls the run for good."""
    async def scenario() -> None:
        limiter = Limiter(2)
        await limiter.acquire("e", 0, 0, "dead")
        await limiter.acquire("e", 1, 0, "dead")
        waiting = asyncio.ensure_future(limiter.acquire("e", 2, 0, "dead"))  # queued behind its own slots
        alive = asyncio.ensure_future(limiter.acquire("e", 3, 0, "alive"))
        await asyncio.sleep(0.01)
        assert not alive.done() and limiter.holding() == {"e": 2}
        assert limiter.forget("dead") == 2
        await asyncio.wait_for(asyncio.gather(waiting, alive, return_exceptions=True), 1)
        assert isinstance(waiting.exception(), WorkerGone)  # its queued slot went straight back
        assert limiter.holding() == {"e": 1}
        with pytest.raises(WorkerGone):  # a worker taken for dead that still asks gets nothing
            await limiter.acquire("e", 0, 0, "dead")
        limiter.release("e", "dead")  # a late release of a forgotten holder takes nothing back
        assert limiter.holding() == {"e": 1}
        limiter.release("e", "alive")
        assert limiter.holding() == {} and limiter.max_in_flight() == {"e": 2}

    asyncio.run(scenario())


def test_the_run_ledger_admits_by_the_rules_of_one_process():
    ledger = RunLedger(Budget(run_calls=2, run_handler_calls=1))
    assert ledger.admit("model", 0.0) is None and ledger.admit("model", 0.0) is None
    assert ledger.admit("model", 0.0) == "budget exhausted: model calls for the run reached 2"
    assert ledger.admit("handler", 0.0) is None
    assert "handler calls for the run reached 1 (raise it with --max-handler-calls N)" in ledger.admit("handler", 0)
    money = RunLedger(Budget(run_cost=1.0))
    assert money.admit("model", 0.6, "a") is None  # 0.6 held while the call is in flight
    assert money.admit("model", 0.6, "b") is None  # 0.6 < 1.0: a second may start
    assert "cost for the run reached 1" in money.admit("model", 0.1, "a")
    money.charge(100, 0.5, 0.6, "a")  # its cost counted and its hold given back in one step
    assert money.totals() == {"calls": 2, "tokens": 100, "handler_calls": 0, "spent": 0.5, "held": 0.6}
    money.forget("b")  # b died with its call in flight: what it held goes back, and b is refused
    assert money.totals()["held"] == 0.0 and "taken for dead" in money.admit("model", 0.1, "b")
    money.charge(10, 0.1, 0.6, "b")  # a late message of a forgotten worker changes nothing
    assert money.admit("model", 0.4, "a") is None and money.totals() == {"calls": 3, "tokens": 100,
                                                                         "handler_calls": 0, "spent": 0.5,
                                                                         "held": 0.4}
