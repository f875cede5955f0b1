"""Budgets that count every handler call (symbolic ones too) and memory, so a fan-out bomb ends
its row with a budget error while the other rows finish; and traces of any permitted depth:
built, converted, written as JSON and read back without recursion limits."""
from __future__ import annotations

import asyncio
import io
import json
import time

import pytest

from tests.helpers import DEEP_RECURSION, registry_with
from decomp.runtime.engine import deepjson
from decomp.runtime.engine.budgets import DEFAULT_ROW_HANDLER_CALLS, MEMORY_EVERY, Budget, resident_mb
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.storage.datasets import Row

# Each call of [bomb] fans out over four calls of itself, eight levels deep: some 44,000
# handler calls in all, none of them a model call.
BOMB = '''
handler four = fn(fn="four")
program bomb(question) with max_depth = 50 {
    QS: [four] #question
    QS: (foreach) [bomb] #1
}
main bomb
'''
FOUR = {"four": lambda q: [] if q == "stop" or len(q) >= 8 else [q + c for c in "abcd"]}


def batch(session, module, questions):
    out = io.StringIO()
    rows = [Row(i, f"r{i}", {"question": q}, None) for i, q in enumerate(questions)]
    summary = asyncio.run(run_rows(session, module, rows, out))
    return summary, {line["index"]: line for line in map(json.loads, out.getvalue().splitlines())}


def test_a_fan_out_bomb_ends_its_row_with_a_budget_error_and_the_other_rows_finish():
    session = Session(registry=registry_with(FOUR), budget=Budget(row_calls=10, run_calls=10))
    module = session.load("x.decomp", text=BOMB)
    started = time.monotonic()
    summary, lines = batch(session, module, ["stop", "x", "stop"])
    assert time.monotonic() - started < 60
    assert lines[0]["answer"] == [] and lines[2]["answer"] == []
    error = lines[1]["error"]
    assert f"budget exhausted: handler calls for this row reached {DEFAULT_ROW_HANDLER_CALLS}" in error
    assert "--max-row-handler-calls" in error
    assert summary.failed == 1


def test_the_handler_call_budget_counts_symbolic_calls_per_row_and_per_run():
    src = '''
handler up = fn(fn="up")
program p(question) {
    QS: [up] #question
    QS: [up] #1
    QS: [up] #2
}
main p
'''
    fns = {"up": lambda q: int(q) + 1}
    session = Session(registry=registry_with(fns), budget=Budget(row_handler_calls=3))
    module = session.load("x.decomp", text=src)
    assert session.run(module, {"question": "1"}).answer == 4
    tight = Session(registry=registry_with(fns), budget=Budget(row_handler_calls=2))
    result = tight.run(tight.load("x.decomp", text=src), {"question": "1"})
    assert "budget exhausted: handler calls for this row reached 2" in result.error
    run_wide = Session(registry=registry_with(fns), budget=Budget(run_handler_calls=7))
    _, lines = batch(run_wide, run_wide.load("x.decomp", text=src), ["1", "2", "3"])
    errors = [line.get("error") for line in lines.values()]
    assert 1 <= sum(e is None for e in errors) <= 2  # rows run at once: 7 calls finish one or two of them
    assert any(e and "handler calls for the run reached 7 (raise it with --max-handler-calls N)" in e
               for e in errors)


def test_a_row_over_the_memory_budget_ends_with_a_budget_error():
    src = 'handler up = fn(fn="up")\nprogram p(question) {\n    QS: [up] #question\n}\nmain p\n'
    session = Session(registry=registry_with({"up": str.upper}), budget=Budget(memory_mb=1))
    result = session.run(session.load("x.decomp", text=src), {"question": "a"})
    assert result.answer is None
    assert "budget exhausted: memory: the process uses" in result.error and "over the limit of 1 MiB" in result.error
    assert "--max-memory" in result.error
    roomy = Session(registry=registry_with({"up": str.upper}), budget=Budget(memory_mb=1_000_000))
    assert roomy.run(roomy.load("x.decomp", text=src), {"question": "a"}).answer == "A"
    assert resident_mb() > 1 and MEMORY_EVERY >= 1


def test_budgets_must_be_positive():
    for bad in ({"row_handler_calls": 0}, {"run_handler_calls": -1}, {"memory_mb": 0}):
        with pytest.raises(ValueError, match="must be > 0"):
            Budget(**bad)
    assert Budget(row_handler_calls=None).row_handler_calls is None  # unlimited on purpose


# ---- traces of any depth
DOWN = DEEP_RECURSION
DOWN_FNS = {"dec": lambda q: int(q) - 1, "inc": lambda q: int(q) + 1}


def depth_of(tree: TraceNode) -> int:
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.children)
    return deepest


@pytest.fixture(scope="module")
def deep_result():
    session = Session(registry=registry_with(DOWN_FNS), max_depth=1010)
    return session.run(session.load("x.decomp", text=DOWN), {"n": 1000})


def test_a_recursion_1000_deep_runs_and_its_trace_converts_both_ways(deep_result):
    assert deep_result.error is None and deep_result.answer == 1000
    tree = deep_result.trace
    assert depth_of(tree) > 3000  # deeper than Python's recursion limit
    nodes = list(tree.walk())
    assert nodes[0] is tree and len(nodes) > 7000
    records = tree.to_records()
    assert TraceNode.from_records(records).to_records() == records
    assert TraceNode.from_dict(tree.to_dict()).to_records() == records
    assert TraceNode.from_dict({"nodes": records}).to_records() == records


def test_a_deep_trace_is_written_as_json_and_read_back(deep_result):
    tree = deep_result.trace
    for indent in (None, 2):
        text = tree.to_json(indent=indent)
        assert TraceNode.from_dict(deepjson.loads(text)).to_records() == tree.to_records()
    flat = deepjson.dumps({"nodes": tree.to_records()})
    assert TraceNode.from_dict(json.loads(flat)).to_records() == tree.to_records()  # flat: plain json reads it


def test_a_deep_failure_keeps_its_details():
    fns = {**DOWN_FNS, "inc": lambda q: 1 // (int(q) + 1)}  # raises at the bottom: -1 + 1 == 0
    session = Session(registry=registry_with(fns), max_depth=1010)
    result = session.run(session.load("x.decomp", text=DOWN), {"n": 1000})
    assert result.error is not None and "ZeroDivisionError" in result.error
    failed = [node for node in result.trace.walk() if node.error]
    assert len(failed) > 2000  # the error is recorded all the way down
    assert TraceNode.from_dict(deepjson.loads(result.trace.to_json())).to_records() == result.trace.to_records()


def test_deep_json_matches_plain_json_where_both_work():
    value = {"a": [1, 2.5, None, True, {"b": "c\u00e9", "d": []}, {}], "k": "x", 3: "int key",
             "n": float("inf"), "s": "\ud800"}
    for indent in (None, 2):
        text = "".join(deepjson.iter_json(value, indent=indent))
        assert json.loads(text) == json.loads(deepjson.dumps(value, indent=indent))
        assert text.encode("utf-8")  # a lone surrogate is escaped, so UTF-8 can hold it
    nested: list = []
    inner = nested
    for _ in range(20_000):
        inner.append([])
        inner = inner[0]
    text = deepjson.dumps(nested)
    assert text == "[" * 20_001 + "]" * 20_001
    back = deepjson.loads(text)
    for _ in range(20_000):
        back = back[0]
    assert back == []
    with pytest.raises(ValueError):
        deepjson.loads("[" * 5000 + "1,]" + "]" * 4999)
