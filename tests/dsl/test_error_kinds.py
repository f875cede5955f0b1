"""The one error hierarchy (decomp.dsl.errors) and what real runs raise: a `Failure` (a handler
could not answer: no regex match, a Python function that raised, a service or model error)
apart from an `Abort` (the row ends: a spent budget, a replay-cache miss, a depth bound, a bug),
every message naming the innermost handler once: ``[name] kind, file:line:col: message``.

The exception objects are caught by running the entry through the interpreter's `call_handler`
(what `Session.arun` does, without turning the error into the row's text); the row's text is
checked through `Session.run` as well.
"""
from __future__ import annotations

import asyncio

import pytest

from tests.helpers import registry_with
from decomp.dsl.errors import (Abort, BudgetExceeded, CacheMiss, CheckError, DecompError, DecompSyntaxError,
                               DepthExceeded, Diagnostics, Failure, HandlerError, InternalError, ModelError,
                               RunError, ServiceError, TransientModelError, TransientServiceError)
from decomp.dsl.nodes import Span
from decomp.handlers.base import Handler
from decomp.handlers.registry import Registry, handler_kind
from decomp.runtime.engine.budgets import CURRENT_ROW, Budget, RowContext
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.call import Scope
from decomp.runtime.engine.interpreter import call_handler
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.models.base import Model
from decomp.runtime.testing.fake import FakeModel

FAILURES = (Failure, HandlerError, ServiceError, ModelError, TransientServiceError, TransientModelError)
ABORTS = (Abort, BudgetExceeded, CacheMiss, DepthExceeded, InternalError)


# ------------------------------------------------------------------ the hierarchy
@pytest.mark.parametrize("cls", FAILURES + ABORTS)
def test_every_run_error_is_a_decomp_error(cls):
    assert issubclass(cls, RunError) and issubclass(cls, DecompError) and issubclass(cls, Exception)


@pytest.mark.parametrize("cls", FAILURES)
def test_failures_are_not_aborts(cls):
    assert issubclass(cls, Failure)
    assert not issubclass(cls, Abort)


@pytest.mark.parametrize("cls", ABORTS)
def test_aborts_are_not_failures(cls):
    assert issubclass(cls, Abort)
    assert not issubclass(cls, Failure)


@pytest.mark.parametrize("child, parent", [
    (HandlerError, Failure), (ServiceError, Failure), (ModelError, ServiceError),
    (TransientServiceError, ServiceError), (TransientModelError, ModelError),
    (TransientModelError, TransientServiceError), (BudgetExceeded, Abort), (CacheMiss, Abort),
    (DepthExceeded, Abort), (InternalError, Abort), (Failure, RunError), (Abort, RunError),
])
def test_subclasses(child, parent):
    assert issubclass(child, parent)


@pytest.mark.parametrize("child, other", [
    (HandlerError, ServiceError), (ServiceError, HandlerError), (ModelError, TransientServiceError),
    (TransientServiceError, ModelError), (BudgetExceeded, CacheMiss), (DepthExceeded, InternalError),
])
def test_siblings_are_apart(child, other):
    assert not issubclass(child, other)


@pytest.mark.parametrize("cls", [CheckError, DecompSyntaxError, Diagnostics])
def test_static_errors_are_not_run_errors(cls):
    assert issubclass(cls, DecompError) and not issubclass(cls, RunError)


def test_transient_errors_carry_retry_after():
    err = TransientModelError("429", retry_after=2.5)
    assert err.retry_after == 2.5 and err.message == "429"
    assert TransientServiceError("503").retry_after is None
    assert isinstance(err, ModelError) and isinstance(err, TransientServiceError)


def test_locate_names_the_first_handler_only():
    span = Span("f.decomp", 3, 5, 3, 20)
    err = HandlerError("no match")
    assert str(err) == "no match"
    assert err.locate("inner", "regex", span) is err
    assert str(err) == "[inner] regex, f.decomp:3:5: no match"
    err.locate("outer", "program", Span("f.decomp", 9, 1, 9, 4))
    assert (err.handler, err.handler_kind, err.span) == ("inner", "regex", span)
    assert str(err) == "[inner] regex, f.decomp:3:5: no match"


def test_locate_keeps_the_errors_own_span():
    own = Span("f.decomp", 2, 7, 2, 9)
    err = Failure("#5 refers to nothing", own).locate("p", "program", Span("f.decomp", 1, 1, 1, 2))
    assert str(err) == "[p] program, f.decomp:2:7: #5 refers to nothing"
    assert str(BudgetExceeded("spent").locate("ask", "prompt", None)) == "[ask] prompt: spent"


# ------------------------------------------------------------------ helpers for runs
def raised(session: Session, module, fields: dict, budget: Budget | None = None) -> RunError:
    """Run the module's main on a row as `Session.arun` does, and return what it raised."""
    async def go():
        row = RowContext(0, budget or session.budget, session.usage)
        token = CURRENT_ROW.set(row)
        try:
            await call_handler(module.main, str(fields.get("question", "")), (),
                               Scope(session, module, dict(fields)), None, TraceNode("row"))
        finally:
            CURRENT_ROW.reset(token)
            await session.aclose()

    with pytest.raises(RunError) as info:
        asyncio.run(go())
    return info.value


def line_of(src: str, text: str) -> int:
    """The 1-based line of `src` that holds `text`."""
    return next(i for i, line in enumerate(src.split("\n"), 1) if text in line)


def crash_registry() -> Registry:
    reg = registry_with({"echo": lambda q: q})

    @handler_kind("crash", registry=reg)
    class Crash(Handler):
        async def run(self, call):
            return 1 / 0

    def explode(query):
        raise ValueError(f"nope: {query}")

    reg.add_function(explode, "explode")
    return reg


def session(**kwargs) -> Session:
    kwargs.setdefault("model", FakeModel(default='"ok"'))
    return Session(registry=crash_registry(), **kwargs)


def both(src: str, fields: dict, path: str = "x.decomp", **kwargs) -> tuple[str, RunError]:
    """The row's error text (Session.run) and the exception (call_handler), from fresh sessions."""
    one = session(**kwargs)
    result = one.run(one.load(path, text=src), fields)
    assert result.answer is None and result.error is not None
    assert result.trace.error == result.error
    two = session(**kwargs)
    return result.error, raised(two, two.load(path, text=src), fields)


# ------------------------------------------------------------------ failures
REGEX = '''
handler rx = regex(pattern="[0-9]+")
program p(question) {
    QS: [rx] #question
}
main p
'''


def test_a_regex_that_finds_nothing_is_a_named_handler_error():
    text, err = both(REGEX, {"question": "no digits"})
    line = line_of(REGEX, "QS: [rx]")
    assert text.startswith(f"[rx] regex, x.decomp:{line}:5: ")
    assert "did not match 'no digits'" in text
    assert type(err) is HandlerError and isinstance(err, Failure) and not isinstance(err, Abort)
    assert str(err) == text
    assert (err.handler, err.handler_kind, err.span.line) == ("rx", "regex", line)


PYTHON = '''
handler py = python(function="explode")
program p(question) {
    QS: [py] #question
}
main p
'''


def test_a_python_function_that_raises_is_a_named_handler_error():
    text, err = both(PYTHON, {"question": "q"})
    assert text == f"[py] python, x.decomp:{line_of(PYTHON, 'QS: [py]')}:5: function explode raised ValueError: nope: q"
    assert isinstance(err, HandlerError) and isinstance(err, Failure) and not isinstance(err, Abort)
    assert isinstance(err.__cause__, ValueError)


ASK_TWICE = '''
handler ask = prompt(text="Q: x?\\nA: \\"y\\"\\n")
program p(question) {
    QS: [ask] first #question
    QS: [ask] second #1
}
main p
'''


def test_a_model_without_an_answer_is_a_named_model_error():
    text, err = both(ASK_TWICE, {"question": "q"}, model=FakeModel())
    assert text.startswith(f"[ask] prompt, x.decomp:{line_of(ASK_TWICE, 'first')}:5: ")
    assert "fake model has no answer for 'first q'" in text
    assert type(err) is ModelError and isinstance(err, ServiceError) and isinstance(err, Failure)


class Flaky(Model):
    """Always fails transiently."""

    name = endpoint = "flaky"

    def __init__(self):
        self.attempts = 0

    async def complete(self, request):
        self.attempts += 1
        raise TransientModelError("HTTP 503")


def test_a_model_that_keeps_failing_ends_with_a_final_model_error():
    model = Flaky()
    text, err = both(ASK_TWICE, {"question": "q"}, model=model, scheduler=Scheduler(retries=2, backoff=0))
    assert "flaky: gave up after 3 attempts; last error: HTTP 503" in text
    assert text.startswith("[ask] prompt, x.decomp:")
    assert type(err) is ModelError and not isinstance(err, TransientServiceError)
    assert isinstance(err, Failure) and not isinstance(err, Abort)
    assert model.attempts == 6  # three attempts in each of the two runs


# ------------------------------------------------------------------ aborts
def test_a_spent_budget_is_a_named_budget_exceeded_abort():
    model = FakeModel(default='"ok"')
    text, err = both(ASK_TWICE, {"question": "q"}, model=model, budget=Budget(row_calls=1))
    line = line_of(ASK_TWICE, "second")
    assert text == f"[ask] prompt, x.decomp:{line}:5: budget exhausted: model calls for this row reached 1"
    assert type(err) is BudgetExceeded and isinstance(err, Abort) and not isinstance(err, Failure)
    assert str(err) == text
    assert len(model.history) == 2  # one call in each run; the second was refused


COUNT = '''
handler rest = fn(fn="rest")
handler zero = fn(fn="zero")
handler inc = fn(fn="inc")
program count(question) with max_depth = 2 {
    if len(#question) == 0 {
        QS: [zero] #question
    } else {
        QS: [rest] #question
        QS: [count] #2
        QS: [inc] #3
    }
}
main count
'''


def depth_session(**kwargs) -> Session:
    import json

    functions = {"rest": lambda q: json.loads(q)[1:], "zero": lambda q: 0, "inc": lambda q: int(q) + 1}
    return Session(registry=registry_with(functions), model=FakeModel(default='"ok"'), **kwargs)


def test_recursion_past_max_depth_is_a_depth_exceeded_abort():
    fields = {"question": ["a", "b", "c"]}
    one = depth_session()
    result = one.run(one.load("x.decomp", text=COUNT), fields)
    line = line_of(COUNT, "QS: [count]")
    assert result.error == f"[count] program, x.decomp:{line}:9: recursed deeper than its max_depth of 2"
    two = depth_session()
    module = two.load("x.decomp", text=COUNT)
    with pytest.raises(DepthExceeded) as info:
        asyncio.run(two.arun_handler(module.handlers["count"], '["a", "b", "c"]'))
    err = info.value
    assert isinstance(err, Abort) and not isinstance(err, Failure)
    assert err.handler == "count" and err.handler_kind == "program"
    shallow = depth_session()
    assert shallow.run(shallow.load("x.decomp", text=COUNT), {"question": ["a"]}).answer == 1


def test_the_sessions_depth_limit_is_a_depth_exceeded_abort_too():
    src = COUNT.replace("max_depth = 2", "max_depth = 50")
    one = depth_session(max_depth=2)
    result = one.run(one.load("x.decomp", text=src), {"question": ["a", "b", "c"]})
    assert result.error.startswith("[count] program, x.decomp:")
    assert "calls nested deeper than the session's limit of 2" in result.error
    two = depth_session(max_depth=2)
    with pytest.raises(DepthExceeded):
        asyncio.run(two.arun_handler(two.load("x.decomp", text=src).handlers["count"], '["a", "b", "c"]'))


def test_a_replay_cache_miss_of_a_model_call_is_a_cache_miss_abort(tmp_path):
    model = FakeModel(default='"ok"')
    text, err = both(ASK_TWICE, {"question": "q"}, model=model,
                     cache=StepCache(tmp_path / "c.sqlite", mode="replay"))
    assert text == (f"[ask] prompt, x.decomp:{line_of(ASK_TWICE, 'first')}:5: "
                    "replay mode: nothing cached for [ask] on fake")
    assert type(err) is CacheMiss and isinstance(err, Abort) and not isinstance(err, Failure)
    assert model.history == []  # a miss ends the row before any call


def test_a_replay_cache_miss_of_a_cached_handler_is_a_cache_miss_abort(tmp_path):
    text, err = both(REGEX, {"question": "abc 12"}, cache=StepCache(tmp_path / "c.sqlite", mode="replay"))
    assert text == f"[rx] regex, x.decomp:{line_of(REGEX, 'QS: [rx]')}:5: replay mode: nothing cached for [rx] 'abc 12'"
    assert isinstance(err, CacheMiss) and isinstance(err, Abort)


def test_a_replay_hit_is_no_error(tmp_path):
    path = tmp_path / "c.sqlite"
    first = session(cache=StepCache(path))
    assert first.run(first.load("x.decomp", text=REGEX), {"question": "abc 12"}).answer == "12"
    again = session(cache=StepCache(path, mode="replay"))
    result = again.run(again.load("x.decomp", text=REGEX), {"question": "abc 12"})
    assert result.ok and result.answer == "12"


CRASH = '''
handler boom = crash()
program p(question) {
    QS: [boom] #question
}
main p
'''


def test_a_handler_that_raises_a_python_exception_is_a_named_internal_error():
    text, err = both(CRASH, {"question": "q"})
    assert text == (f"[boom] crash, x.decomp:{line_of(CRASH, 'QS: [boom]')}:5: "
                    "internal error: ZeroDivisionError: division by zero")
    assert type(err) is InternalError and isinstance(err, Abort) and not isinstance(err, Failure)
    assert isinstance(err.__cause__, ZeroDivisionError)
    assert (err.handler, err.handler_kind) == ("boom", "crash")


def test_the_trace_node_of_the_crashed_call_holds_the_error():
    one = session()
    result = one.run(one.load("x.decomp", text=CRASH), {"question": "q"})
    [call] = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "boom"]
    assert call.error == result.error


def test_a_main_handler_that_crashes_is_named_too():
    one = session()
    result = one.run(one.load("x.decomp", text="handler boom = crash()\nmain boom\n"), {"question": "q"})
    assert result.error == "[boom] crash: internal error: ZeroDivisionError: division by zero"


def test_a_main_handler_that_fails_is_named():
    one = session()
    result = one.run(one.load("x.decomp", text='handler rx = regex(pattern="z")\nmain rx\n'), {"question": "q"})
    assert result.error == "[rx] regex: pattern 'z' did not match 'q'"


# ------------------------------------------------------------------ nested work: the innermost handler
NESTED = '''
handler rx = regex(pattern="[0-9]+")
program inner(words) {
    QS: [rx] #words
}
program outer(question) {
    QS: [inner] #question
}
main outer
'''


def test_an_error_in_a_nested_program_names_the_innermost_handler():
    text, err = both(NESTED, {"question": "no digits"})
    assert text.startswith(f"[rx] regex, x.decomp:{line_of(NESTED, 'QS: [rx]')}:5: ")
    assert "[inner]" not in text and "[outer]" not in text
    assert isinstance(err, HandlerError) and err.handler == "rx"
    one = session()
    result = one.run(one.load("x.decomp", text=NESTED), {"question": "no digits"})
    calls = {n.handler: n.error for n in result.trace.walk() if n.kind == "call"}
    assert calls["inner"] == calls["rx"] == result.error  # every level records the same, named error


def test_an_abort_in_a_nested_program_names_the_innermost_handler():
    src = NESTED.replace('regex(pattern="[0-9]+")', "crash()")
    text, err = both(src, {"question": "q"})
    assert text.startswith(f"[rx] crash, x.decomp:{line_of(src, 'QS: [rx]')}:5: internal error: ZeroDivisionError")
    assert isinstance(err, InternalError) and err.handler == "rx"


def test_an_error_in_a_program_file_names_the_handler_in_that_file(tmp_path):
    other = 'handler rx = regex(pattern="[0-9]+")\nprogram look(x) {\n    QS: [rx] #x\n}\nmain look\n'
    (tmp_path / "other.decomp").write_text(other)
    src = '''
handler via = program(file="other.decomp")
program p(question) {
    QS: [via] #question
}
main p
'''
    text, err = both(src, {"question": "no digits"}, path=str(tmp_path / "x.decomp"))
    assert text.startswith(f"[rx] regex, {tmp_path / 'other.decomp'}:3:5: ")
    assert isinstance(err, HandlerError) and err.span.file == str(tmp_path / "other.decomp")


DECOMPOSER = '''
handler rx = regex(pattern="[0-9]+")
handler dec = decomposer(examples="QC: a 1\\nQS: [rx] a 1\\nA: \\"1\\"\\nQS: [EOQ]\\n")
program p(question) {
    QS: [dec] #question
}
main p
'''


def test_an_error_in_a_decomposers_step_names_the_step_handler():
    model = FakeModel(script={"count them": ["[rx] nothing here", "[EOQ]"]})
    text, err = both(DECOMPOSER, {"question": "count them"}, model=model)
    assert text.startswith("[rx] regex, <[dec] step 1>:1:")
    assert "did not match 'nothing here'" in text
    assert "[dec]" not in text.split(",", 1)[0] and "[p]" not in text
    assert isinstance(err, HandlerError) and err.handler == "rx"


def test_a_decomposers_own_failure_names_the_decomposer():
    model = FakeModel(script={"count them": ["not a step at all ((", "[EOQ]"]})
    text, err = both(DECOMPOSER, {"question": "count them"}, model=model)
    assert text.startswith(f"[dec] decomposer, x.decomp:{line_of(DECOMPOSER, 'QS: [dec]')}:5: step 1: ")
    assert isinstance(err, HandlerError) and err.handler == "dec"


def test_a_budget_spent_inside_a_decomposer_names_the_call_that_was_refused():
    model = FakeModel(script={"count them": ["[rx] 12", "[EOQ]"]})
    text, err = both(DECOMPOSER, {"question": "count them"}, model=model, budget=Budget(row_calls=1))
    assert text.startswith(f"[dec] decomposer, x.decomp:{line_of(DECOMPOSER, 'QS: [dec]')}:5: budget exhausted")
    assert isinstance(err, BudgetExceeded) and isinstance(err, Abort)
