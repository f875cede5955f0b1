"""Budgets and usage accounting (decomp.runtime.engine.budgets through Session, batch and CLI):
per-row and per-run call and token budgets, usage per row and run totals, per-handler latency,
and the session's max_steps cap on decomposers.

Models here await (like every real backend), so steps and rows really overlap: a budget has to
hold for calls that are in flight at the same time, not only for calls made one after another.
"""
from __future__ import annotations

import asyncio
import io
import json

import pytest
from click.testing import CliRunner

from tests.helpers import registry_with
from decomp.runtime.testing.fake import FakeModel, fake_tokens
from decomp.runtime.engine.budgets import Budget, BudgetExceeded, RowContext, Usage
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.cli import main as cli_main
from decomp.runtime.storage.datasets import Row
from decomp.runtime.engine.session import Session


class SlowFake(FakeModel):
    """FakeModel that awaits a little before answering, as a network model would."""

    def __init__(self, *args, delay=0.01, **kwargs):
        super().__init__(*args, **kwargs)
        self.delay = delay

    async def complete(self, request):
        await asyncio.sleep(self.delay)
        return await super().complete(request)


def rows_of(questions):
    return [Row(i, f"r{i}", {"question": q}, None) for i, q in enumerate(questions)]


def batch(session, module, rows, window=256):
    out = io.StringIO()
    summary = asyncio.run(run_rows(session, module, rows, out, window=window))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return summary, {line["index"]: line for line in lines}


# A row whose first answer is "short" ends after one call; any other row makes three calls,
# one after another (each step needs the previous answer).
CHAIN = '''
handler ask = prompt(text="Q: kind?\\nA: short\\n")
program p(question) {
    QS: [ask] #question
    if #1 == "short" {
        QS: [EOQ]
    }
    QS: [ask] second #1
    QS: [ask] third #2
}
main p
'''


def chain_model(**kw):
    return SlowFake(mapping={"long one": '"long"', "second": '"two"', "third": '"three"'}, default='"short"', **kw)


# ------------------------------------------------------------------ row call budget
def test_row_call_budget_ends_only_the_row_that_needs_more():
    model = chain_model()
    session = Session(model=model, budget=Budget(row_calls=2))
    module = session.load("x.decomp", text=CHAIN)
    summary, lines = batch(session, module, rows_of(["a", "long one", "b", "c"]))
    assert summary.rows == 4 and summary.failed == 1
    assert [lines[i].get("answer") for i in (0, 2, 3)] == ["short", "short", "short"]
    assert all("error" not in lines[i] for i in (0, 2, 3))
    err = lines[1]["error"]
    assert "budget" in err and "model calls for this row" in err and "2" in err
    assert lines[1]["answer"] is None
    assert lines[1]["usage"]["calls"] == 2
    assert len(model.history) == 3 + 2  # three one-call rows, and two calls of the long row


def test_row_call_budget_allows_exactly_the_limit():
    model = chain_model()
    session = Session(model=model, budget=Budget(row_calls=3))
    result = session.run(session.load("x.decomp", text=CHAIN), {"question": "long one"})
    assert result.ok, result.error
    assert result.answer == "three" and result.usage.calls == 3


def test_row_call_budget_holds_for_concurrent_calls_of_a_row():
    """A foreach sends its five calls at once; with a budget of two, at most two may reach the
    model and the row ends with the budget error."""
    src = '''
handler make = fn(fn="make")
handler ask  = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [make] #question
    QS: (foreach) [ask] letter #1
}
main p
'''
    model = SlowFake(default='"ok"')
    session = Session(registry=registry_with({"make": lambda q: list("abcde")}), model=model,
                      budget=Budget(row_calls=2))
    result = session.run(session.load("x.decomp", text=src), {"question": "q"})
    assert result.error is not None and "model calls for this row" in result.error
    assert len(model.history) <= 2, f"{len(model.history)} calls reached the model with a row budget of 2"


def test_budget_exceeded_is_raised_before_the_call():
    row = RowContext(0, Budget(row_calls=1), Usage(), Usage(calls=1))
    with pytest.raises(BudgetExceeded, match="model calls for this row reached 1"):
        row.before_call()
    assert row.usage.calls == 1 and row.run.calls == 0  # a refused call is not counted
    with pytest.raises(BudgetExceeded, match="model calls for the run reached 3"):
        RowContext(1, Budget(run_calls=3), Usage(calls=3)).before_call()
    run = Usage(prompt_tokens=6, completion_tokens=4)
    with pytest.raises(BudgetExceeded, match="tokens for the run reached 10"):
        RowContext(2, Budget(run_tokens=10), run).before_call()
    fresh = RowContext(3, Budget(row_calls=1, run_tokens=11), run)
    fresh.before_call()  # under both limits: allowed
    assert issubclass(BudgetExceeded, Exception)


# ------------------------------------------------------------------ run call budget
ONE_CALL = '''
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
}
main p
'''


def test_run_call_budget_stops_later_rows_but_every_row_has_a_line():
    model = SlowFake(default='"ok"')
    session = Session(model=model, budget=Budget(run_calls=5))
    module = session.load("x.decomp", text=ONE_CALL)
    summary, lines = batch(session, module, rows_of([f"q{i}" for i in range(10)]), window=1)
    assert sorted(lines) == list(range(10))
    assert [i for i in range(10) if "error" not in lines[i]] == [0, 1, 2, 3, 4]
    for i in range(5, 10):
        assert "model calls for the run" in lines[i]["error"] and "budget" in lines[i]["error"]
        assert lines[i]["usage"]["calls"] == 0
    assert summary.failed == 5 and summary.usage.calls == 5
    assert len(model.history) == 5


def test_run_call_budget_holds_when_rows_run_concurrently():
    model = SlowFake(default='"ok"')
    session = Session(model=model, budget=Budget(run_calls=5))
    module = session.load("x.decomp", text=ONE_CALL)
    summary, lines = batch(session, module, rows_of([f"q{i}" for i in range(10)]))
    assert sorted(lines) == list(range(10))
    assert len(model.history) <= 5, f"{len(model.history)} calls reached the model with a run budget of 5"
    assert summary.usage.calls <= 5
    assert summary.failed == 5
    assert sum("model calls for the run" in line.get("error", "") for line in lines.values()) == 5


# ------------------------------------------------------------------ token budgets
def _call_tokens(model):
    """Prompt tokens FakeModel reports per call."""
    return [fake_tokens(r.prompt) for r in model.history]


def _reply_tokens(model):
    """Completion tokens FakeModel reports per call."""
    return [sum(fake_tokens(t) for t in texts) for texts in model.replies]


def test_row_token_budget():
    probe = chain_model()
    session = Session(model=probe)
    result = session.run(session.load("x.decomp", text=CHAIN), {"question": "long one"})
    assert result.ok
    per_call = [p + c for p, c in zip(_call_tokens(probe), _reply_tokens(probe))]
    assert result.usage.tokens == sum(per_call)
    assert result.usage.prompt_tokens == sum(_call_tokens(probe))
    assert result.usage.completion_tokens == sum(_reply_tokens(probe))

    limit = per_call[0] + per_call[1]  # used up after two calls: the third is refused
    model = chain_model()
    session = Session(model=model, budget=Budget(row_tokens=limit))
    result = session.run(session.load("x.decomp", text=CHAIN), {"question": "long one"})
    assert result.error is not None and "tokens for this row" in result.error and str(limit) in result.error
    assert len(model.history) == 2

    model = chain_model()
    session = Session(model=model, budget=Budget(row_tokens=limit + 1))
    result = session.run(session.load("x.decomp", text=CHAIN), {"question": "long one"})
    assert result.ok, result.error
    assert len(model.history) == 3


def test_run_token_budget_stops_later_rows():
    model = SlowFake(default='"ok"')
    session = Session(model=model)
    module = session.load("x.decomp", text=ONE_CALL)
    first = session.run(module, {"question": "q0"})
    per_row = first.usage.tokens
    assert per_row == fake_tokens(model.history[0].prompt) + fake_tokens('"ok"')

    model = SlowFake(default='"ok"')
    session = Session(model=model, budget=Budget(run_tokens=3 * per_row))
    module = session.load("x.decomp", text=ONE_CALL)
    summary, lines = batch(session, module, rows_of([f"q{i}" for i in range(6)]), window=1)
    assert [i for i in range(6) if "error" not in lines[i]] == [0, 1, 2]
    assert all("tokens for the run" in lines[i]["error"] for i in (3, 4, 5))
    assert summary.usage.tokens == 3 * per_row


# ------------------------------------------------------------------ usage
def test_usage_per_row_and_run_totals_add_up(tmp_path):
    questions = ["a", "long one", "b", "long one", "c"]
    model = chain_model()
    session = Session(model=model, cache=StepCache(tmp_path / "s.sqlite"))
    module = session.load("x.decomp", text=CHAIN)
    summary, lines = batch(session, module, rows_of(questions))
    assert summary.failed == 0
    calls = [lines[i]["usage"]["calls"] for i in range(5)]
    # row 3 repeats row 1: identical prompts come from the cache (row 1 may or may not have
    # finished first, so only the total is fixed)
    assert calls[0] == calls[2] == calls[4] == 1
    assert calls[1] + calls[3] + lines[1]["usage"]["cache_hits"] + lines[3]["usage"]["cache_hits"] == 6
    assert summary.usage.calls == sum(calls) == len(model.history)
    for key in ("prompt_tokens", "completion_tokens", "cache_hits"):
        assert getattr(summary.usage, key) == sum(line["usage"][key] for line in lines.values()), key
    assert summary.usage.prompt_tokens == sum(fake_tokens(r.prompt) for r in model.history)
    assert summary.usage.completion_tokens == sum(_reply_tokens(model))
    assert summary.to_dict()["calls"] == summary.usage.calls

    # the same batch again: every call is a cache hit, no tokens
    model2 = chain_model()
    session2 = Session(model=model2, cache=session.cache)
    summary2, lines2 = batch(session2, session2.load("x.decomp", text=CHAIN), rows_of(questions))
    assert model2.history == []
    assert [lines2[i]["usage"]["cache_hits"] for i in range(5)] == [1, 3, 1, 3, 1]
    assert summary2.usage.cache_hits == 9 and summary2.usage.calls == 0 and summary2.usage.tokens == 0


def test_usage_counts_samples_and_cache_hits_of_a_row(tmp_path):
    src = '''
handler ask = prompt(text="Q: x?\\nA: y\\n", temperature=0.7, n=3)
program p(question) {
    QS: [ask] #question
}
main p
'''
    model = SlowFake(default='"two words"')
    session = Session(model=model, cache=StepCache(tmp_path / "s.sqlite"))
    module = session.load("x.decomp", text=src)
    first = asyncio.run(session.arun(module, {"question": "q"}))
    assert first.ok, first.error
    assert (first.usage.calls, first.usage.cache_hits, first.usage.completion_tokens) == (1, 0, 3 * fake_tokens('"two words"'))
    second = asyncio.run(session.arun(module, {"question": "q"}))
    assert (second.usage.calls, second.usage.cache_hits, second.usage.tokens) == (0, 3, 0)
    assert session.usage.calls == 1 and session.usage.cache_hits == 3


def test_per_handler_latency_entries():
    async def nap(query):
        await asyncio.sleep(0.05)
        return query

    src = '''
handler nap  = fn(fn="nap")
handler ask  = prompt(text="Q: x?\\nA: y\\n")
handler make = fn(fn="make")
program p(question) {
    QS: [make] #question
    QS: (foreach) [nap] #1
    QS: [ask] #2
}
main p
'''
    session = Session(registry=registry_with({"nap": nap, "make": lambda q: ["a", "b", "c"]}),
                      model=SlowFake(default='"ok"'))
    result = session.run(session.load("x.decomp", text=src), {"question": "q"})
    assert result.ok, result.error
    usage = result.usage
    assert dict(usage.handler_calls) == {"make": 1, "nap": 3, "ask": 1}
    assert usage.handler_seconds["nap"] >= 3 * 0.04
    assert all(usage.handler_seconds[name] >= 0 for name in usage.handler_calls)
    handlers = usage.to_dict()["handlers"]
    assert sorted(handlers) == ["ask", "make", "nap"]
    assert handlers["nap"]["calls"] == 3
    assert handlers["nap"]["mean_ms"] >= 40
    assert set(handlers["ask"]) == {"calls", "seconds", "queue_seconds", "mean_ms", "service_mean_ms",
                                    "queue_mean_ms"}
    assert dict(session.usage.handler_calls) == dict(usage.handler_calls)  # charged to the run too


def test_usage_add():
    a = Usage(calls=1, cache_hits=2, prompt_tokens=3, completion_tokens=4)
    a.count("x", 1, 0.5)
    b = Usage(calls=10, cache_hits=20, prompt_tokens=30, completion_tokens=40)
    b.count("x", 1, 0.25)
    b.count("x", 1, 0.75)
    b.count("y", 1, 0.25)
    a.add(b)
    assert (a.calls, a.cache_hits, a.prompt_tokens, a.completion_tokens, a.tokens) == (11, 22, 33, 44, 77)
    assert dict(a.handler_calls) == {"x": 3, "y": 1}
    assert a.handler_seconds["x"] == pytest.approx(1.5) and a.handler_seconds["y"] == pytest.approx(0.25)
    assert a.to_dict()["handlers"]["x"] == {"calls": 3, "seconds": 1.5, "queue_seconds": 0.0, "mean_ms": 500.0,
                                            "service_mean_ms": 500.0, "queue_mean_ms": 0.0}


# ------------------------------------------------------------------ max_steps
DECOMPOSER = '''
handler echo = fn(fn="echo")
handler plan = decomposer(examples="QC: do it\\nQS: [echo] one\\nA: \\"one\\"\\nQS: [EOQ]\\n", max_steps={max_steps})
main plan
'''

SCRIPT = {"go": ["[echo] s1", "[echo] s2", "[echo] s3", "[echo] s4", "[EOQ]"]}


def _decompose(max_steps_option, session_max_steps):
    model = SlowFake(script=SCRIPT, delay=0.0)
    calls: list = []
    session = Session(registry=registry_with({"echo": lambda q: q}, calls), model=model,
                      max_steps=session_max_steps)
    module = session.load("x.decomp", text=DECOMPOSER.format(max_steps=max_steps_option))
    return session.run(module, {"question": "go"}), model, calls


def test_decomposer_runs_to_eoq_within_its_limits():
    result, model, calls = _decompose(10, None)
    assert result.ok, result.error
    assert result.answer == "s4"
    assert len(model.history) == 5 and len(calls) == 4


def test_session_max_steps_caps_a_decomposer():
    result, model, calls = _decompose(10, 2)
    assert result.error is not None
    assert "2 steps without [EOQ]" in result.error
    assert len(model.history) == 2 and [q for _, q in calls] == ["s1", "s2"]


def test_decomposer_max_steps_wins_when_smaller():
    result, model, calls = _decompose(3, 50)
    assert "3 steps without [EOQ]" in result.error
    assert len(model.history) == 3


# ------------------------------------------------------------------ the CLI options
def test_cli_max_row_calls(tmp_path):
    fake = tmp_path / "model.json"
    fake.write_text(json.dumps({"mapping": {"long one": "long", "second": "two", "third": "three"},
                                "default": "short"}))
    program = tmp_path / "chain.decomp"
    program.write_text(CHAIN)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n"
                            for i, q in enumerate(["a", "long one", "b"])))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli_main, ["run", str(program), "--input", str(data), "--output", str(out),
                                           "--model", f"fake:{fake}", "--cache", "off", "--max-row-calls", "2"])
    assert result.exit_code == 3, result.output  # the run finished; the row over budget is an error
    summary = json.loads(result.stdout)
    assert summary["rows"] == 3 and summary["failed"] == 1 and summary["calls"] == 4
    lines = {line["index"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert "model calls for this row" in lines[1]["error"]
    assert lines[0]["answer"] == lines[2]["answer"] == "short"


def test_cli_max_calls_for_the_run(tmp_path):
    fake = tmp_path / "model.json"
    fake.write_text(json.dumps({"default": "ok"}))
    program = tmp_path / "one.decomp"
    program.write_text(ONE_CALL)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": f"q{i}"}) + "\n" for i in range(6)))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli_main, ["run", str(program), "--input", str(data), "--output", str(out),
                                           "--model", f"fake:{fake}", "--cache", "off", "--max-calls", "4"])
    assert result.exit_code == 3, result.output  # the run finished; two rows hit the run's budget
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 6
    assert sum("error" in line for line in lines) == 2
    assert sum(line["usage"]["calls"] for line in lines) == 4


@pytest.mark.parametrize("bad", [None, -5, -10**30, True, 2.5, float("nan"), "7"])
def test_a_count_that_is_unknown_or_no_count_is_never_charged(bad):
    """What a server reports never takes tokens back from a budget: an unknown count (None) or
    one that cannot be a count adds nothing, to the row or to the run."""
    run = Usage()
    row = RowContext(0, Budget(row_tokens=10, run_tokens=10), run)
    row.charge(4, 3, 0)
    row.charge(bad, bad, 1)
    assert (row.usage.prompt_tokens, row.usage.completion_tokens, row.usage.cache_hits) == (4, 3, 1)
    assert (run.prompt_tokens, run.completion_tokens, run.tokens) == (4, 3, 7)
    row.charge(bad, 3, 0)
    with pytest.raises(BudgetExceeded, match="tokens for this row reached 10"):
        row.before_call()
