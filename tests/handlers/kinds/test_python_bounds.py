"""Python handlers under a time limit: a slow function fails its own row with a clear error while
the other rows go on; the limit is the handler's `timeout=`, else the session's `handler_timeout`;
async functions are bounded too; the limit never changes a cache key."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import asyncio
import io
import json
import threading
import time

import pytest

from decomp.handlers.registry import Registry
from decomp.runtime.engine.session import Session
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.storage.datasets import Row

PROGRAM = '''
handler f = python(function="work"{options})
program p(question) {{
    QS: [f] #question
}}
main p
'''


def session_with(fn, options: str = "", **kwargs):
    registry = builtin_registry()
    registry.add_function(fn, "work")
    session = Session(registry=registry, **kwargs)
    return session, session.load("x.decomp", text=PROGRAM.format(options=options))


def batch(session, module, questions):
    out = io.StringIO()
    rows = [Row(i, f"r{i}", {"question": q}, None) for i, q in enumerate(questions)]
    asyncio.run(run_rows(session, module, rows, out))
    return {line["index"]: line for line in map(json.loads, out.getvalue().splitlines())}


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()  # lets the abandoned calls end


def test_a_slow_function_fails_its_row_and_the_other_rows_go_on(release):
    finished = []

    def work(query):
        if query == "slow":
            release.wait(20)  # blocks its thread: before, it blocked every row
        finished.append(query)
        return query.upper()

    session, module = session_with(work, ", timeout=0.5")
    started = time.monotonic()
    lines = batch(session, module, ["slow", "a", "b", "c"])
    assert time.monotonic() - started < 10
    assert [lines[i].get("answer") for i in (1, 2, 3)] == ["A", "B", "C"]
    error = lines[0]["error"]
    assert error.startswith("[f] python, x.decomp:4:5: function work ran longer than its time limit of 0.5 s")
    assert "timeout=SECONDS" in error and "--handler-timeout" in error
    assert "slow" not in finished  # abandoned, still waiting in its thread


def test_the_sessions_handler_timeout_applies_to_handlers_without_their_own(release):
    session, module = session_with(lambda query: release.wait(20), handler_timeout=0.3)
    result = session.run(module, {"question": "q"})
    assert "ran longer than its time limit of 0.3 s" in result.error
    own, own_module = session_with(lambda query: query, ", timeout=5", handler_timeout=0.3)
    assert own.run(own_module, {"question": "q"}).answer == "q"
    with pytest.raises(ValueError, match="handler_timeout must be > 0"):
        Session(handler_timeout=0)


def test_an_async_function_is_bounded_too():
    async def work(query):
        await asyncio.sleep(20)

    session, module = session_with(work, ", timeout=0.2")
    started = time.monotonic()
    result = session.run(module, {"question": "q"})
    assert "function work ran longer than its time limit of 0.2 s" in result.error
    assert time.monotonic() - started < 10


def test_a_zero_timeout_is_a_check_error():
    with pytest.raises(Exception, match="timeout must be > 0 seconds, got 0.0"):
        session_with(lambda query: query, ", timeout=0.0")


def test_the_timeout_is_no_part_of_the_cache_key():
    from decomp.runtime.engine.call import EngineCall
    from decomp.runtime.engine.tracing import TraceNode

    keys = []
    for options in ("", ", timeout=3"):
        session, module = session_with(lambda query: query, options)
        handler = module.handlers["f"]
        call = EngineCall("q", (), {}, (), None, session, handler, TraceNode("call"))
        keys.append(handler.cache_parts(call))
    assert keys[0] == keys[1]


def test_a_sync_functions_answer_is_converted_in_its_thread():
    seen = []

    class Answer(list):
        """A list that records which thread converts it to plain JSON."""

        def __iter__(self):
            seen.append(threading.current_thread() is threading.main_thread())
            return super().__iter__()

    session, module = session_with(lambda query: Answer([1, 2]))
    assert session.run(module, {"question": "q"}).answer == [1, 2]
    assert seen and not any(seen)
