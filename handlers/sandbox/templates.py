"""The one Jinja environment every template renders in (prompt, executor, score prefixes):
sandboxed, immutable, StrictUndefined, and bounded in what one render may build and how long
it may run.

    from decomp.handlers.sandbox.templates import JINJA
    text = JINJA.from_string(source).render_within(seconds, query=..., values=...)

Jinja's `ImmutableSandboxedEnvironment` keeps templates away from Python's internals; this
subclass also keeps one render from eating the machine:

  * sizes: no value a render builds (a list, tuple or dict literal, `+` or `*`, a filter's or
    a call's result, a namespace attribute, a macro's argument) may have a *logical* size over
    `MAX_TEXT`, shared structure counted each time it is reached (`[s.v, s.v]` is twice `s.v`;
    a filter or call may return something bigger only when it is no bigger than what it was
    given, such as a big input sorted), and nothing past that size is turned into text (`{{ }}`, `~`, `%`, `format`, `|string`, `|tojson`, `|join`,
    `|upper`, ...): see `decomp.handlers.sandbox.template_limits`. Comparisons (`==`, `in`) and hashing
    are left to Python: they cost at most the logical size of what they compare;
  * output: a render (and any block, macro or `~` join inside it) of more than `MAX_TEXT`
    characters is refused;
  * loops: all `{% for %}` loops of one render together (recursive `loop()` calls included)
    run at most `MAX_LOOP` iterations (`range` alone is also capped by Jinja at 100,000 items);
  * operators: `*` and `+` that would build too much, `**` or `*` whose integer result would
    have more than `MAX_DIGITS` digits, and `%` formatting with a width of a million or more
    are refused before anything is built;
  * calls: a string method (`ljust`, `center`, `zfill`, `replace`, `join`, `format`, ...), a
    sizing filter (`center`, `indent`, `wordwrap`, `truncate`, `replace`, `join`, `format`,
    `batch`, `slice`) or `lipsum` given a count over `MAX_TEXT`, or that would build more than
    `MAX_TEXT` characters, is refused; `|sum` of lists adds them in linear time;
  * time: a render has a deadline (`render_within(seconds)`; `render` takes the run's handler
    time limit): every loop iteration, call, operator and filter looks at it, so a render past
    its limit stops itself within moments ("the template ran longer than its time limit of
    N s"), instead of running on in a thread that cannot be stopped.

A refusal is a `TemplateLimitError` (a Jinja `SecurityError`): the kind reports it as its
`HandlerError` ("template: TemplateLimitError: ..."), or as a check error when it shows while
compiling. Kinds render off the event loop (`decomp.handlers.sandbox.offload`), waiting `RENDER_GRACE`
seconds past the limit for the render to stop itself. `growth_warnings` (in
`decomp.handlers.sandbox.template_growth`) finds what `decomp check` warns about.
"""
from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, Iterable

from jinja2 import StrictUndefined, nodes, pass_environment
from jinja2.compiler import CodeGenerator
from jinja2.environment import Environment, Template
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context, LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from decomp.handlers.sandbox.offload import DEFAULT_TIMEOUT
from decomp.handlers.sandbox.template_limits import (MAX_DIGITS, MAX_LOOP, MAX_TEXT, RENDER, Render, TemplateLimitError,
                                             binop, check_counts, check_format, check_join, check_percent,
                                             check_replace, check_string_call, check_text, check_total, counted,
                                             is_int, measured, sized, tick)

__all__ = ["JINJA", "MAX_DIGITS", "MAX_LOOP", "MAX_TEXT", "RENDER_GRACE", "BoundedSandbox", "BoundedTemplate",
           "TemplateLimitError"]

#: Seconds a kind waits past a render's time limit for it to stop itself.
RENDER_GRACE = 2.0
#: Filters that size what they build by an argument.
_SIZED_FILTERS = frozenset({"center", "indent", "wordwrap", "truncate", "replace", "join", "format", "batch",
                            "slice"})
#: Filters that turn their input into text (a value over `MAX_TEXT` is refused first).
_TEXT_FILTERS = frozenset({"capitalize", "center", "e", "escape", "forceescape", "format", "indent", "lower",
                           "pprint", "replace", "safe", "string", "striptags", "title", "tojson", "trim", "truncate",
                           "upper", "urlencode", "urlize", "wordcount", "wordwrap", "xmlattr"})
#: Filters that return one of their input's items, or the input itself: nothing new to check.
_PICKING = frozenset({"attr", "d", "default", "first", "last", "max", "min", "random"})
#: Filters that return their input's items rearranged, each at most once, in new lists or
#: tuples: their result is at most about twice their input in logical size (one more per item),
#: however often they are applied, so nothing can grow by sharing through them. Checked only
#: when given something to add (`fill_with`, `start`).
_REARRANGING = frozenset({"batch", "dictsort", "items", "list", "reject", "rejectattr", "reverse", "select",
                          "selectattr", "slice", "sort", "sum", "unique"})
#: The argument (position after the input, keyword) that makes a rearranging filter add items.
_ADDS = {"batch": (1, "fill_with"), "slice": (1, "fill_with"), "sum": (1, "start")}


class BoundedTemplate(Template):
    """A template whose render counts its loops afresh and stops at its deadline."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        """`render_within` the default handler time limit (10 s); a kind renders within its
        call's (`render_within(handler.time_limit(call), ...)`)."""
        return self.render_within(DEFAULT_TIMEOUT, *args, **kwargs)

    def render_within(self, seconds: float | None, /, *args: Any, **kwargs: Any) -> str:
        """The rendered text (arguments as `render`'s), stopped with a `TemplateLimitError` once
        it runs over `seconds` (None: no time limit; the size limits still hold)."""
        token = RENDER.set(Render(seconds))
        try:
            return super().render(*args, **kwargs)
        finally:
            RENDER.reset(token)


#: The environment's methods `_Guards` puts in, called directly (see `_Generator`).
_GUARDS = frozenset({"bounded_loop", "bounded_concat", "built", "assigned"})


def _guard(method: str, node: nodes.Expr, lineno: int) -> nodes.Call:
    """`environment.<method>(node)`, a guard put in by `_Guards`."""
    return nodes.Call(nodes.EnvironmentAttribute(method, lineno=lineno), [node], [], None, None, lineno=lineno)


class _Generator(CodeGenerator):
    """Jinja's code generator, calling the guards directly: a template cannot name the
    environment's attributes, so only `_Guards` makes these calls, and they need no sandbox."""

    def visit_Call(self, node: nodes.Call, frame, **kwargs: Any) -> None:  # noqa: D102
        callee = node.node
        if isinstance(callee, nodes.EnvironmentAttribute) and callee.name in _GUARDS:
            self.write(f"environment.{callee.name}(")
            self.visit(node.args[0], frame)
            self.write(")")
            return
        super().visit_Call(node, frame, **kwargs)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """`ImmutableSandboxedEnvironment` that refuses to build huge values or run past its
    deadline (module docstring)."""

    template_class = BoundedTemplate
    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters["sum"] = _linear_sum(self.filters["sum"])
        self.filters = {name: _guarded_filter(name, fn) for name, fn in self.filters.items()}
        self.globals["lipsum"] = _counted_call(self.globals["lipsum"])
        self.finalize = _finalize

    # ---- compiling: every loop counted, every built value and `~` bounded
    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):  # noqa: D102
        if isinstance(source, str):
            source = self.parse(source, name, filename)
        source = _Guards().visit(source)
        source.set_environment(self)
        return super().compile(source, name, filename, raw, defer_init)

    def bounded_loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """`iterable`, counted against the render's `MAX_LOOP` iterations and its deadline."""
        state = RENDER.get() or Render(None)
        for item in iterable:
            state.loops += 1
            if state.loops > MAX_LOOP:
                raise TemplateLimitError(f"the template's loops ran over {MAX_LOOP:,} iterations")
            tick()
            yield item

    def bounded_concat(self, parts: list[Any]) -> str:
        """The `~` operator: the parts as text, joined, at most `MAX_TEXT` characters."""
        for part in parts:
            check_text(part, "a text joined with ~")
        return _bounded_join((str(p) for p in parts), "a text joined with ~")

    def built(self, value: Any) -> Any:
        """A list, tuple or dict literal: at most `MAX_TEXT` in logical size."""
        return sized(value, "a list, tuple or dict")

    def assigned(self, value: Any) -> Any:
        """A namespace attribute's new value (`{% set ns.x = ... %}`): at most `MAX_TEXT` in
        logical size (a list, tuple or dict is kept as a copy that knows its size, so the next
        check of what holds it need not count it again)."""
        return sized(value, "a namespace attribute")

    # ---- operators and calls
    def call_binop(self, context, operator_name: str, left: Any, right: Any) -> Any:
        tick()
        return binop(operator_name, self.binop_table[operator_name], left, right)

    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's own naming)
        tick()
        receiver = getattr(__obj, "__self__", None)
        if isinstance(receiver, str):  # a string method
            check_string_call(receiver, __obj.__name__, args, kwargs)
        elif isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (__self.bounded_loop(args[0]), *args[1:])
        if isinstance(__obj, Macro):  # what a recursion hands down is held by every level (as `assigned`)
            args = tuple(sized(value, "a macro's argument") for value in args)
            kwargs = {k: v if k.startswith("_") else sized(v, "a macro's argument") for k, v in kwargs.items()}
        given = [*args, *(v for k, v in kwargs.items() if not k.startswith("_"))]  # not Jinja's own
        result = super().call(__context, __obj, *args, **kwargs)
        return _checked_result(result, (receiver, given), "a call's result")

    def wrap_str_format(self, value: Any):
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        text, is_map = value.__self__, value.__name__ == "format_map"

        @functools.wraps(wrapper)
        def bounded(*args: Any, **kwargs: Any) -> str:
            check_format(text, () if is_map else args, args[0] if is_map and args else kwargs)
            return _bounded_join([wrapper(*args, **kwargs)], "a formatted text")

        return bounded


class _Guards(NodeTransformer):
    """Routes every loop's iterable through `bounded_loop`, every `~` through `bounded_concat`,
    every list, tuple and dict literal through `built` and every namespace attribute's new
    value through `assigned`."""  # macro arguments are checked in `call`

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _guard("bounded_loop", node.iter, node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _guard("bounded_concat", nodes.List(node.nodes, lineno=node.lineno), node.lineno)

    def visit_List(self, node: nodes.List) -> nodes.Node:
        self.generic_visit(node)
        return _guard("built", node, node.lineno)

    visit_Dict = visit_List

    def visit_Tuple(self, node: nodes.Tuple) -> nodes.Node:
        self.generic_visit(node)
        return _guard("built", node, node.lineno) if node.ctx == "load" else node

    def visit_Assign(self, node: nodes.Assign) -> nodes.Node:
        self.generic_visit(node)
        if isinstance(node.target, nodes.NSRef):
            node.node = _guard("assigned", node.node, node.lineno)
        return node


# ---- filters
def _guarded_filter(name: str, fn):
    """`fn` (the filter `name`) looking at the deadline, refusing to turn a value over
    `MAX_TEXT` into text (text filters), foreseeing what sizing filters build, and checking
    what it returns (a text, list, tuple, dict, or iterator of items: `_checked_result`)."""
    to_text, sizing, what = name in _TEXT_FILTERS, name in _SIZED_FILTERS, f"the {name} filter's result"
    unchecked = name in _PICKING or name in _REARRANGING

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        tick()
        values = args[1:] if args and _is_context(args[0]) else args
        value = values[0] if values else None
        if to_text:
            check_text(value, f"the {name} filter's input")
        if sizing:
            check_counts(tuple(values[1:]), kwargs)
            _foresee(name, values, kwargs)
        result = fn(*args, **kwargs)
        if unchecked and not _adds(name, values, kwargs):
            return result
        return _checked_result(result, value, what, keep=True)

    return bounded


def _adds(name: str, values: tuple, kwargs: dict) -> bool:
    """Whether a rearranging filter was given something to add to its input's items."""
    if name not in _ADDS:
        return False
    position, keyword = _ADDS[name]
    extra = values[position + 1] if len(values) > position + 1 else kwargs.get(keyword)
    return extra is not None and not (name == "sum" and (extra == 0 or extra == [] or extra == ()))


def _checked_result(result: Any, source: Any, what: str, keep: bool = False) -> Any:
    """A filter's or call's result: a text at most `MAX_TEXT` characters, a list, tuple or
    dict at most `MAX_TEXT` in logical size (or no bigger than `source`, what it was made from:
    see `measured`), an iterator counted as it goes (likewise). `keep`: a new list, tuple or
    dict comes back knowing its size."""
    if isinstance(result, str):
        if len(result) > MAX_TEXT:
            raise TemplateLimitError(f"{what} is over {MAX_TEXT:,} characters")
        return result
    if result is source or result is None or isinstance(result, (int, float)):
        return result
    if isinstance(result, Iterator):
        return counted(result, source, what)
    if keep:
        return sized(result, what, source)
    measured(result, what, source)
    return result


def _foresee(name: str, values: tuple, kwargs: dict) -> None:
    """What a sizing filter would build, foreseen from its arguments."""
    if not values:
        return
    text = values[0]
    if name == "replace" and len(values) >= 3 and all(isinstance(v, str) for v in values[:3]):
        check_replace(*values[:3])
    elif name == "join":
        separator = values[1] if len(values) > 1 else kwargs.get("d", "")
        if isinstance(separator, str):
            check_join(separator, text)
    elif name == "indent" and isinstance(text, str):
        width = values[1] if len(values) > 1 else kwargs.get("width", 4)
        size = len(width) if isinstance(width, str) else width if is_int(width) else 0
        check_total(len(text) + (text.count("\n") + 1) * size, "indenting")
    elif name == "format" and isinstance(text, str):
        check_percent(text, kwargs or tuple(values[1:]))


def _linear_sum(fn):
    """`|sum`, adding lists or tuples (`start=[]`) in linear time: Python's `sum` copies the
    whole result at every item, a quadratic loop in C."""

    @pass_environment
    @functools.wraps(fn)
    def linear(environment, iterable, attribute=None, start=0):
        if not isinstance(start, (list, tuple)):
            return fn(environment, iterable, attribute, start)
        if attribute is not None:
            iterable = map(make_attrgetter(environment, attribute), iterable)
        kind = list if isinstance(start, list) else tuple
        out = list(start)
        for item in iterable:
            tick()
            if not isinstance(item, kind):
                raise TypeError(f'can only concatenate {kind.__name__} (not "{type(item).__name__}") to '
                                f'{kind.__name__}')
            out.extend(item)
        return out if kind is list else tuple(out)

    return linear


def _counted_call(fn):
    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        check_counts(args, kwargs)
        return fn(*args, **kwargs)

    return bounded


def _is_context(value: Any) -> bool:
    """The environment or eval context Jinja passes to some filters first."""
    return isinstance(value, (nodes.EvalContext, Environment, Context))


def _finalize(value: Any) -> Any:
    """Every `{{ }}` output: turned into text only within `MAX_TEXT`."""
    if type(value) is not str:
        check_text(value, "an output {{ }}")
    return value


def _bounded_join(pieces: Iterable[str], what: str = "the template's output") -> str:
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_TEXT:
            raise TemplateLimitError(f"{what} is over {MAX_TEXT:,} characters")
        out.append(piece)
    return "".join(out)


BoundedSandbox.concat = staticmethod(_bounded_join)  # every block, macro and render joins through it

#: The environment every kind uses.
JINJA = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
