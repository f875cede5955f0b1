"""The `python` handler kind."""
import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from decomp.dsl.nodes import HandlerDecl, Option, Span, Value
from decomp.dsl.errors import HandlerError
from decomp import Session
from decomp.handlers.base import LoadContext
from decomp.handlers.kinds.python import PythonHandler, to_json
from decomp.handlers.plugins import load as load_plugins
from decomp.handlers.registry import Registry, python_handler
from decomp.handlers.sandbox.trust import Trust


@python_handler("test_py_reverse")
def reverse_words(query):
    return " ".join(reversed(query.split()))


@python_handler("test_py_first_value")
def first_value(values, inputs):
    return {"first": values[0], "inputs": inputs}


@python_handler("test_py_async")
async def shout(query):
    await asyncio.sleep(0)
    return query.upper()


@python_handler("test_py_kwargs")
def everything(**kwargs):
    return sorted(kwargs)


@python_handler("test_py_fails")
def fails(query):
    raise ValueError(f"bad input {query!r}")


@python_handler("test_py_pair")
def pair(query):
    return (query, (1, 2))


@python_handler("test_py_set")
def a_set(query):
    return {1, 2}


def make(function, decl=None, trust=Trust()):
    return PythonHandler("py", PythonHandler.Options(function=function), decl, LoadContext(Path("."), trust=trust))


def run(handler, query="q", values=(), inputs=None, session=None):
    return (session or Session()).run_handler(handler, query, values, inputs)


def test_registered_as_python():
    assert load_plugins().kind("python") is PythonHandler


def test_registered_function_gets_the_query():
    h = make("test_py_reverse")
    assert h.check() == []
    assert run(h, "one two three") == "three two one"


def test_module_attr_path():
    assert run(make("capwords"), "hello big world") == "Hello Big World"
    # a module of the standard library, trusted on purpose
    assert run(make("string:capwords", trust=Trust.of(["string"])), "hello big world") == "Hello Big World"
    assert run(make("decomp.programs.decomp.letters:position"), "the letters at position 4") == 4


@pytest.mark.parametrize("name, reason", [
    ("os:system", "may not be called"), ("subprocess:run", "may not be called"), ("builtins:eval", "may not be called"),
    ("math:sqrt", "not a Python function"), ("string:Template", "not a Python function"),
    (":x", "neither a registered function"), ("no_such_module_xyz:f", "no module named"),
    ("textwrap:dedent", "is not allowed"), ("stringprep:in_table_a1", "is not allowed"),
])
def test_dangerous_or_odd_module_paths_are_refused_with_a_reason(name, reason, monkeypatch):
    monkeypatch.setenv("DECOMP_TRUST", "math, string")  # trusted: refused for what they are
    problems = make(name).check()
    assert len(problems) == 1 and reason in problems[0].message


def test_values_and_inputs_by_keyword():
    got = run(make("test_py_first_value"), values=(["a", "b"], 3), inputs={"question": "q?"})
    assert got == {"first": ["a", "b"], "inputs": {"question": "q?"}}


def test_var_keyword_gets_everything():
    assert run(make("test_py_kwargs")) == ["inputs", "query", "values"]


def test_async_function_is_awaited():
    assert run(make("test_py_async"), "hi") == "HI"


def test_exception_is_wrapped_with_cause():
    with pytest.raises(HandlerError) as info:
        run(make("test_py_fails"), "x")
    assert str(info.value) == ("[py] python: function test_py_fails raised "
                               "ValueError: bad input 'x'")
    assert isinstance(info.value.__cause__, ValueError)


def test_unknown_function_is_a_check_error_listing_names():
    value = Value(Span("m.decomp", 1, 29, 1, 36), "nope", "string")
    decl = HandlerDecl(Span("m.decomp", 1, 1, 1, 37), "py", "python", (Option(value.span, "function", value),))
    (err,) = make("nope", decl).check()
    assert "unknown python function 'nope'" in err.message
    assert "test_py_reverse" in err.message
    assert err.span == value.span
    assert make("no_such_module_xyz:f").check()[0].message.startswith("unknown python function")
    with pytest.raises(HandlerError, match="unknown python function"):
        run(make("nope"))


def test_function_needing_other_parameters_is_a_check_error():
    handler = make("difflib:get_close_matches", trust=Trust.of(["difflib"]))
    assert "needs 'word', 'possibilities'" in handler.check()[0].message


def test_session_registry_is_used():
    registry = Registry()
    registry.add_function(lambda query: "from session", "test_py_reverse")
    assert run(make("test_py_reverse"), "a b", session=Session(registry=registry)) == "from session"


def test_return_value_must_be_json():
    assert run(make("test_py_pair"), "x") == ["x", [1, 2]]
    with pytest.raises(HandlerError, match="not JSON-serialisable"):
        run(make("test_py_set"))
    with pytest.raises(TypeError):
        to_json({1: "a"})
    with pytest.raises(TypeError):
        to_json(float("nan"))


def test_options_are_validated():
    with pytest.raises(ValidationError):
        PythonHandler.Options(function="f", retries=1)
    with pytest.raises(ValidationError):
        PythonHandler.Options(function=3)
