"""Prompt-cache and reasoning tokens in the usage (decomp.runtime.engine.budgets): `cached_tokens`
(of the prompt tokens, those the provider served from its cache) and `reasoning_tokens` (of the
completion tokens) are counted per row, per run and per model, priced at `price_cached`, added
up, written and read back; a record written before them reads as 0."""
from __future__ import annotations

import pytest

from decomp.dsl.errors import BudgetExceeded
from decomp.runtime.engine.budgets import Budget, ModelUsage, RowContext, Usage
from decomp.runtime.models.prices import Price
from decomp.runtime.storage.summary import summarize

PRICE = Price(price_in=2.0, price_out=10.0, price_cached=0.5)


def charged(*requests, price=PRICE, budget=None) -> RowContext:
    """A row charged with each (prompt, completion, cached, reasoning) request of model "m"."""
    row = RowContext(0, budget or Budget(), Usage())
    for prompt, completion, cached, reasoning in requests:
        row.charge(prompt, completion, 0, model="m", seconds=0.1, price=price,
                   cached_tokens=cached, reasoning_tokens=reasoning)
    return row


def test_a_charge_counts_them_in_the_row_the_run_and_the_model():
    row = charged((100, 20, 60, 5), (50, 10, None, None))
    for usage in (row.usage, row.run):
        assert (usage.prompt_tokens, usage.completion_tokens, usage.tokens) == (150, 30, 180)  # parts, not more
        assert (usage.cached_tokens, usage.reasoning_tokens) == (60, 5)
        entry = usage.models["m"]
        assert (entry.requests, entry.cached_tokens, entry.reasoning_tokens) == (2, 60, 5)
    cost = ((100 - 60) * 2.0 + 60 * 0.5 + 20 * 10.0) / 1e6 + (50 * 2.0 + 10 * 10.0) / 1e6
    assert row.run.cost == pytest.approx(cost) and row.run.spent == pytest.approx(cost)


@pytest.mark.parametrize("cached, reasoning, counted", [
    (500, 90, (100, 20)),   # more than the tokens they are part of: at most all of them
    (-3, -1, (0, 0)),       # no count: nothing
    (True, 2.5, (0, 0)),
    ("7", None, (0, 0)),
])
def test_a_servers_odd_counts_are_bounded_by_the_tokens_they_are_part_of(cached, reasoning, counted):
    row = charged((100, 20, cached, reasoning))
    assert (row.run.cached_tokens, row.run.reasoning_tokens) == counted
    assert row.run.spent == pytest.approx(PRICE.cost(100, 20, counted[0]))
    assert row.run.spent >= 0


def test_usage_adds_them_up_and_round_trips_through_its_record():
    a, b = charged((100, 20, 60, 5)).run, charged((40, 8, 40, 0), (10, 2, 0, 2)).run
    a.add(b)
    assert (a.prompt_tokens, a.cached_tokens, a.reasoning_tokens) == (150, 100, 7)
    assert (a.models["m"].cached_tokens, a.models["m"].reasoning_tokens) == (100, 7)
    record = a.to_dict()
    assert (record["cached_tokens"], record["reasoning_tokens"]) == (100, 7)
    assert (record["models"]["m"]["cached_tokens"], record["models"]["m"]["reasoning_tokens"]) == (100, 7)
    back = Usage.from_dict(record)
    assert (back.prompt_tokens, back.cached_tokens, back.reasoning_tokens) == (150, 100, 7)
    assert back.models["m"].to_dict() == record["models"]["m"]
    assert back.cost == pytest.approx(a.cost)


def test_a_usage_without_them_writes_what_it_always_did():
    usage = charged((100, 20, None, None), price=None).run
    assert "cached_tokens" not in usage.to_dict() and "reasoning_tokens" not in usage.to_dict()
    assert set(usage.models["m"].latency()) == {"requests", "prompt_tokens", "completion_tokens", "mean_s",
                                                "p50_s", "p95_s", "service_mean_s", "queue_mean_s"}


def test_an_old_record_without_them_reads_as_zero_and_sums_with_a_new_one():
    old = {"index": 0, "answer": "a", "usage": {
        "calls": 1, "cache_hits": 0, "prompt_tokens": 10, "completion_tokens": 4,
        "handlers": {"h": {"calls": 1, "seconds": 0.5, "mean_ms": 500.0}},
        "models": {"m": {"requests": 1, "prompt_tokens": 10, "completion_tokens": 4, "seconds": [0.5]}}}}
    usage = Usage.from_dict(old["usage"])
    assert (usage.cached_tokens, usage.reasoning_tokens) == (0, 0)
    assert (usage.models["m"].cached_tokens, usage.models["m"].reasoning_tokens) == (0, 0)
    new = {"index": 1, "answer": "b", "usage": charged((100, 20, 60, 5), price=None).run.to_dict()}
    summary = summarize([old, new], {"sessions": []})
    assert (summary["prompt_tokens"], summary["cached_tokens"], summary["reasoning_tokens"]) == (110, 60, 5)
    assert (summary["models"]["m"]["cached_tokens"], summary["models"]["m"]["requests"]) == (60, 2)
    assert "cached_tokens" not in summarize([old], {"sessions": []})
    with pytest.raises(ValueError, match="not a count"):
        ModelUsage.from_dict({"requests": 1, "cached_tokens": -1})


def test_the_money_budget_counts_cached_tokens_at_their_price():
    limit = 500 / 1e6  # the 1,000 prompt tokens at price_in would cost 1,000 / 1e6: past it
    price = Price(1.0, 1.0, price_cached=0.1)
    row = charged((1000, 0, 900, 0), price=price, budget=Budget(run_cost=limit))
    assert row.run.spent == pytest.approx((100 * 1.0 + 900 * 0.1) / 1e6)
    row.before_call("model", "m", price)  # 190 / 1e6 spent: admitted
    row = charged((1000, 0, 0, 0), price=price, budget=Budget(run_cost=limit))
    with pytest.raises(BudgetExceeded, match="cost for the run reached"):
        row.before_call("model", "m", price)


def test_the_token_budgets_count_cached_tokens_as_tokens():
    row = charged((100, 20, 100, 20), budget=Budget(row_tokens=120))
    with pytest.raises(BudgetExceeded, match="tokens for this row reached 120"):
        row.before_call("model", "m", PRICE)
