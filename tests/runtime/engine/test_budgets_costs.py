"""Honest counters, per-model latency and cost, and the money budget (decomp.runtime.engine.budgets
through Session): `calls` counts model requests only, each request is timed and priced under
its model, and `Budget.run_cost` (`--max-cost`) refuses calls once the run has spent it."""
from __future__ import annotations

import asyncio
import io
import json

import numpy
import pytest

from decomp.dsl.errors import BudgetExceeded
from decomp.runtime.engine.budgets import Budget, ModelUsage, RowContext, Usage
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.session import Session
from decomp.runtime.models.prices import Price
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.storage.datasets import Row
from decomp.runtime.testing.fake import FakeModel, fake_tokens

from tests.helpers import THREE_CALLS


class SlowFake(FakeModel):
    """FakeModel that takes `delay` seconds to answer, as a network model would."""

    def __init__(self, *args, delay=0.02, **kwargs):
        super().__init__(*args, **kwargs)
        self.delay = delay

    async def complete(self, request):
        await asyncio.sleep(self.delay)
        return await super().complete(request)


def batch(session, module, n):
    out = io.StringIO()
    rows = [Row(i, f"r{i}", {"question": f"q{i}"}, None) for i in range(n)]
    summary = asyncio.run(run_rows(session, module, rows, out, window=1))
    return summary, {line["index"]: line for line in map(json.loads, out.getvalue().splitlines())}


def test_each_request_is_counted_timed_and_tokened_under_its_model():
    model = SlowFake(default='"ok"', delay=0.03)
    session = Session(model=model)
    result = session.run(session.load("x.decomp", text=THREE_CALLS), {"question": "q"})
    assert result.ok, result.error
    entry = result.usage.models["fake"]
    assert (result.usage.calls, entry.requests) == (3, 3)
    assert entry.prompt_tokens == sum(fake_tokens(r.prompt) for r in model.history) == result.usage.prompt_tokens
    assert entry.completion_tokens == 3 * fake_tokens('"ok"') == result.usage.completion_tokens
    assert len(entry.seconds) == 3 and all(0.03 <= s < 2 for s in entry.seconds)
    assert entry.cost is None and result.usage.cost is None  # no price: no cost figure, not 0
    assert "cost" not in result.usage.to_dict()


def test_a_cache_hit_is_not_a_call_nor_a_timed_request(tmp_path):
    cache = StepCache(tmp_path / "s.sqlite")
    session = Session(model=FakeModel(default='"ok"'), cache=cache)
    module = session.load("x.decomp", text=THREE_CALLS)
    first = session.run(module, {"question": "q"})
    again = Session(model=FakeModel(default='"ok"'), cache=cache)
    second = again.run(again.load("x.decomp", text=THREE_CALLS), {"question": "q"})
    assert (first.usage.calls, first.usage.cache_hits) == (3, 0)
    assert (second.usage.calls, second.usage.cache_hits, second.usage.models) == (0, 3, {})


def test_cost_of_requests_at_a_sessions_prices():
    model = FakeModel(default='"ok"')
    price = Price(price_in=2.0, price_out=10.0)
    session = Session(model=model, prices={"fake": price})
    result = session.run(session.load("x.decomp", text=THREE_CALLS), {"question": "q"})
    prompt = sum(fake_tokens(r.prompt) for r in model.history)
    completion = 3 * fake_tokens('"ok"')
    assert result.usage.cost == pytest.approx(prompt * 2.0 / 1e6 + completion * 10.0 / 1e6)
    assert result.usage.to_dict()["cost"] == pytest.approx(result.usage.cost)
    assert session.usage.cost == pytest.approx(result.usage.cost)  # the run's total too


def test_a_declared_models_price_options_price_its_requests(tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"default": '"ok"'}))
    src = '''
model default = "fake:answers.json" (price_in=1.5, price_out=3)
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
}
main p
'''
    (tmp_path / "x.decomp").write_text(src)
    session = Session()
    module = session.load(tmp_path / "x.decomp")
    result = session.run(module, {"question": "q"})
    assert result.ok, result.error
    (name, entry), = result.usage.models.items()
    assert entry.cost == pytest.approx(entry.prompt_tokens * 1.5 / 1e6 + entry.completion_tokens * 3 / 1e6)
    assert entry.cost > 0 and name.startswith("fake:")
    assert session.spec_price("default") == Price(1.5, 3)


def test_max_cost_refuses_calls_once_the_run_has_spent_it():
    per_row = Session(model=FakeModel(default='"ok"'), prices={"fake": Price(1e6, 0)})
    first = per_row.run(per_row.load("x.decomp", text=THREE_CALLS), {"question": "q0"})
    row_cost = first.usage.cost  # a price of 1e6 a million: one unit of money per prompt token

    model = FakeModel(default='"ok"')
    session = Session(model=model, prices={"fake": Price(1e6, 0)}, budget=Budget(run_cost=2 * row_cost))
    summary, lines = batch(session, session.load("x.decomp", text=THREE_CALLS), 4)
    assert [i for i in range(4) if "error" not in lines[i]] == [0, 1]
    for i in (2, 3):
        assert "budget exhausted: cost for the run reached" in lines[i]["error"] and "--max-cost" in lines[i]["error"]
        assert lines[i]["usage"]["calls"] == 0
    assert len(model.history) == 6 and summary.failed == 2
    assert summary.usage.cost == pytest.approx(2 * row_cost)


def test_max_cost_without_a_price_refuses_the_call_in_words():
    session = Session(model=FakeModel(default='"ok"'), budget=Budget(run_cost=1.0))
    result = session.run(session.load("x.decomp", text=THREE_CALLS), {"question": "q"})
    assert result.error is not None and "--max-cost needs a price for model fake" in result.error
    assert result.usage.calls == 0


def test_max_cost_must_not_be_negative():
    with pytest.raises(ValueError, match="run_cost"):
        Budget(run_cost=-1)
    row = RowContext(0, Budget(run_cost=0.0), Usage())
    with pytest.raises(BudgetExceeded, match="reached 0"):
        row.before_call("model", "m", Price(1, 1))


def test_latency_figures_are_numpys_percentiles_over_every_request():
    seconds = [0.1, 0.2, 0.3, 0.4, 1.0]
    usage = ModelUsage(requests=5, prompt_tokens=50, completion_tokens=5, seconds=seconds)
    figures = usage.latency()
    p50, p95 = numpy.percentile(seconds, [50, 95])
    assert figures == {"requests": 5, "prompt_tokens": 50, "completion_tokens": 5, "mean_s": 0.4,
                       "p50_s": round(float(p50), 6), "p95_s": round(float(p95), 6),
                       "service_mean_s": 0.4, "queue_mean_s": 0.0}  # no request queued
    assert figures["p50_s"] == 0.3 and figures["p95_s"] == 0.88
    one = ModelUsage(requests=1, seconds=[0.25]).latency()
    assert (one["mean_s"], one["p50_s"], one["p95_s"]) == (0.25, 0.25, 0.25)
    assert "p50_s" not in ModelUsage().latency()  # no request: no latency figure


def test_model_usage_round_trips_and_adds_up():
    a = ModelUsage(2, 10, 4, [0.5, 0.25], priced=2, spent=0.01)
    b = ModelUsage.from_dict(a.to_dict())
    assert (b.requests, b.prompt_tokens, b.completion_tokens, b.seconds, b.cost) == (2, 10, 4, [0.5, 0.25], 0.01)
    b.add(ModelUsage(1, 1, 1, [1.0]))  # one request with no price: the total cost is unknown
    assert b.requests == 3 and b.seconds == [0.5, 0.25, 1.0] and b.cost is None
    for bad in ({"requests": "2"}, {"seconds": "0.5"}, {"seconds": [-1]}, {"cost": True}):
        with pytest.raises((TypeError, ValueError)):
            ModelUsage.from_dict(bad)


def test_usage_listener_hears_each_call_as_it_ends():
    heard = []
    model = SlowFake(default='"ok"')
    session = Session(model=model)
    session.usage.listener = lambda: heard.append((session.usage.calls, session.usage.tokens))
    session.run(session.load("x.decomp", text=THREE_CALLS), {"question": "q"})
    assert [calls for calls, _ in heard] == [1, 2, 3]
    assert heard[0][1] < heard[1][1] < heard[2][1]


def test_calls_in_flight_hold_what_they_may_cost_until_they_end():
    run = Usage()
    first = RowContext(0, Budget(run_cost=2.0), run)
    first.before_call("model", "m", Price(1, 1), hold=1.5)
    first.before_call("model", "m", Price(1, 1), hold=1.5)  # 1.5 held < 2: allowed
    with pytest.raises(BudgetExceeded, match="3 more held by calls in flight"):
        first.before_call("model", "m", Price(1, 1), hold=1.5)
    first.release(1.5)
    first.release(1.5)
    assert run.held == 0 and run.calls == 2
    first.before_call("model", "m", Price(1, 1), hold=1.5)  # both ended, nothing spent: allowed again
