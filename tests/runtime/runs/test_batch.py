"""Batch runs: lines in input order even when rows end out of order, usage per row, bad rows."""
import asyncio
import io
import json

from tests.helpers import registry_with

from decomp import Session
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.storage.datasets import Row

SRC = 'handler wait = fn(fn="wait")\nprogram p(question) {\n    QS: [wait] #question\n}\nmain p\n'
HANG_GUARD = 30.0  # seconds a row waits for another before it gives up: only a hang gets there


def test_lines_come_out_in_input_order_although_rows_end_out_of_order():
    # each row ends only after the one before it in `ends` (events, not sleeps: no timing involved)
    ends = ["d", "b", "e", "c", "a"]
    ended = {q: asyncio.Event() for q in ends}
    finished = []

    async def wait(query):
        before = ends.index(query) - 1
        if before >= 0:
            await asyncio.wait_for(ended[ends[before]].wait(), HANG_GUARD)
        finished.append(query)
        ended[query].set()
        return query

    session = Session(registry=registry_with({"wait": wait}))
    module = session.load("b.decomp", text=SRC)
    rows = [Row(i, f"r{i}", {"question": q}, None) for i, q in enumerate("abcde")]
    rows.insert(2, Row(5, "bad", None, "line 3: not valid JSON"))
    out = io.StringIO()
    summary = asyncio.run(run_rows(session, module, rows, out))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["id"] for r in lines] == ["r0", "r1", "bad", "r2", "r3", "r4"]
    assert finished == ends  # they did end out of order
    assert lines[2] == {"id": "bad", "index": 5, "answer": None, "error": "line 3: not valid JSON"}
    assert lines[0]["answer"] == "a" and lines[0]["usage"]["calls"] == 0
    assert (summary.rows, summary.failed) == (6, 1)


def test_a_handler_bug_is_recorded_on_its_row_and_the_run_goes_on():
    def wait(query):
        if query == "boom":
            raise KeyError("a bug")
        return query

    session = Session(registry=registry_with({"wait": wait}))
    module = session.load("b.decomp", text=SRC)
    rows = [Row(0, "a", {"question": "x"}, None), Row(1, "b", {"question": "boom"}, None),
            Row(2, "c", {"question": "y"}, None)]
    out = io.StringIO()
    asyncio.run(run_rows(session, module, rows, out))
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r.get("answer") for r in lines] == ["x", None, "y"]
    assert "KeyError" in lines[1]["error"]
