"""The `python` handler kind: answer with what a Python function returns.

    @python_handler("reverse")
    def reverse(values): return list(reversed(values[0]))

    handler rev   = python(function="reverse")
    handler upper = python(function="string:capwords")   # module:attr, imported on demand
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import math
from typing import Any, Callable

from decomp.dsl.errors import CheckError, HandlerError
from decomp.dsl.text import shorten
from decomp.handlers.base import Call, Handler
from decomp.handlers.base import Options as BaseOptions
from decomp.handlers.registry import Registry, default_registry, handler_kind

#: What a function may ask for by naming a parameter.
ARGUMENTS = ("query", "values", "inputs")


@handler_kind("python")
class PythonHandler(Handler):
    """Calls a registered (`@python_handler("name")`) or `module:attr` function.

    Options:
      function  the function's registered name or "module:attr" path (required).

    Arguments are chosen by the function's signature: parameters named `query` (the sub-query
    text), `values` (list of the referenced values) and `inputs` (dict of named inputs) get
    those, by keyword; a `**kwargs` parameter gets all three. A function that names none of
    them but has exactly one required positional parameter (`def f(text)`, `len`) gets the
    query. Async functions are awaited; sync ones run directly, so they should be fast.
    The function is looked up in `call.registry` (the run's registry), else in the
    default registry (at construction and check time: the load context's `registry`, if any).
    The answer must be JSON-serialisable (tuples become lists; NaN and infinities are refused).
    """

    class Options(BaseOptions):
        function: str

    def __init__(self, name, options, decl, ctx):
        super().__init__(name, options, decl, ctx)
        self._registry: Registry = getattr(ctx, "registry", None) or default_registry
        self._fn = self._registry.function(options.function)

    # ---- static checks
    def check(self) -> list[CheckError]:
        if self._fn is None:
            return [CheckError(self._unknown_message(self._registry), self.error_span("function"))]
        try:
            _plan(self._fn)
        except TypeError as err:
            return [CheckError(f"python handler '{self.name}': {err}", self.error_span("function"))]
        return []

    def _unknown_message(self, registry: Registry) -> str:
        names = ", ".join(sorted(registry.functions)) or "none"
        return (f"unknown python function {self.options.function!r}: {registry.function_problem(self.options.function)} "
                f"(registered: {names}; or give a 'module:function' path)")

    def cache_parts(self, call: Call) -> dict[str, Any]:
        """The options, query and values, plus the function's code (an edited function misses
        the cache) and the named inputs when the function reads them."""
        parts = super().cache_parts(call)
        fn = self._resolve(call)
        code = getattr(fn, "__code__", None)
        parts["function"] = [_name(fn), code_fingerprint(code) if code else None]
        if "inputs" in _plan(fn):
            parts["inputs"] = dict(call.inputs)
        return parts

    # ---- running
    async def run(self, call: Call) -> Any:
        fn = self._resolve(call)
        try:
            plan = _plan(fn)
        except TypeError as err:
            raise HandlerError(str(err), call.span) from err
        args, kwargs = _arguments(plan, call)
        try:
            result = fn(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        except Exception as err:
            raise HandlerError(f"function {self.options.function} raised "
                               f"{type(err).__name__}: {err}", call.span) from err
        try:
            return to_json(result)
        except TypeError as err:
            raise HandlerError(f"function {self.options.function} returned "
                               f"a value that is not JSON-serialisable: {err}", call.span) from err

    def _resolve(self, call: Call) -> Callable[..., Any]:
        registry = call.registry
        fn = self._fn if registry is None or registry is self._registry else registry.function(self.options.function)
        if fn is None:
            raise HandlerError(self._unknown_message(registry or self._registry), call.span)
        return fn


def code_fingerprint(code) -> str:
    """A hash of what a function does (bytecode, names, constants, nested code), stable across
    processes: an edited function gets a new cache key, an unchanged one keeps its key."""
    digest = hashlib.sha256()
    for part in (code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()):
        digest.update(part)
    for const in code.co_consts:
        digest.update(code_fingerprint(const).encode() if hasattr(const, "co_code") else repr(const).encode())
    return digest.hexdigest()


def _plan(fn: Callable[..., Any]) -> tuple[str, ...]:
    """Which of `ARGUMENTS` `fn` takes by keyword, or ("*query",) for a positional query.

    Raises TypeError when `fn` needs a parameter the handler cannot give.
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature: give them the query
        return ("*query",)
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return ARGUMENTS
    named = tuple(p.name for p in params if p.name in ARGUMENTS and p.kind is not p.POSITIONAL_ONLY)
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    others = [p for p in required if p.name not in named]
    if not named and len(others) == 1 and others[0].kind is not others[0].KEYWORD_ONLY:
        return ("*query",)
    if not named and not required and any(p.kind is p.VAR_POSITIONAL for p in params):
        return ("*query",)
    if others:
        wanted = ", ".join(repr(p.name) for p in others)
        raise TypeError(f"function {_name(fn)} needs {wanted}; it may take query, values, inputs "
                        f"(by name) or a single positional parameter")
    return named


def _arguments(plan: tuple[str, ...], call: Call) -> tuple[list[Any], dict[str, Any]]:
    # copies: a function must not change the answers other steps will read
    given = {"query": call.query, "values": copy.deepcopy(list(call.values)), "inputs": copy.deepcopy(dict(call.inputs))}
    if plan == ("*query",):
        return [call.query], {}
    return [], {name: given[name] for name in plan}


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


def to_json(value: Any) -> Any:
    """`value` as plain JSON data (tuples to lists), or TypeError naming what is not."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{value} is not a finite number")
        return value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"dict key {bad[0]!r} is not a string")
        return {k: to_json(v) for k, v in value.items()}
    raise TypeError(f"{type(value).__name__} {shorten(repr(value), 60, ellipsis='...', one_line=False)} "
                    "is not JSON-serialisable")
