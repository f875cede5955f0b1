"""The one Jinja environment every template renders in (prompt, executor, score prefixes):
sandboxed, immutable, StrictUndefined, and bounded in what one render may build.

    from decomp.handlers.templates import JINJA
    text = JINJA.from_string(source).render(query=..., values=...)

Jinja's `ImmutableSandboxedEnvironment` keeps templates away from Python's internals; this
subclass also keeps one render from eating the machine:

  * output: a render (and any block, macro or `~` join inside it) of more than `MAX_TEXT`
    characters is refused;
  * loops: all `{% for %}` loops of one render together run at most `MAX_LOOP` iterations
    (`range` alone is also capped by Jinja at 100,000 items);
  * operators: `*` and `+` that would build a text or list of more than `MAX_TEXT` items,
    `**` or `*` whose integer result would have more than `MAX_DIGITS` digits, and `%`
    formatting with a width of a million or more are refused before anything is built;
  * calls: a string method (`ljust`, `center`, `zfill`, `replace`, `join`, `format`, ...), a
    sizing filter (`center`, `indent`, `wordwrap`, `truncate`, `replace`, `join`, `format`,
    `batch`, `slice`) or `lipsum` given a count over `MAX_TEXT`, or that would build more than
    `MAX_TEXT` characters, is refused.

A refusal is a `TemplateLimitError` (a Jinja `SecurityError`): the kind reports it as its
`HandlerError` ("template: TemplateLimitError: ..."), or as a check error when it shows while
compiling. What these rules miss still runs under the handler's time limit, off the event loop
(`decomp.handlers.offload`).
"""
from __future__ import annotations

import contextvars
import functools
import math
import re
from string import Formatter
from typing import Any, Iterable, Iterator

from jinja2 import StrictUndefined, nodes
from jinja2.environment import Environment, Template
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

#: The most characters one render (or any text, list or join inside it) may have.
MAX_TEXT = 1_000_000
#: The most loop iterations one render may run, all loops together.
MAX_LOOP = 100_000
#: The most decimal digits an integer built by `*` or `**` may have.
MAX_DIGITS = 4000
_MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))
#: A width or precision of 7 digits or more in a format spec ("%9999999d", "{:>1000000}").
_HUGE_SPEC = re.compile(r"\d{7,}")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d*)(?:\.(?:\*|\d*))?")
#: Filters that size what they build by an argument.
_SIZED_FILTERS = ("center", "indent", "wordwrap", "truncate", "replace", "join", "format", "batch", "slice")


class TemplateLimitError(SecurityError):
    """A render refused for building too much (see the module docstring)."""


_LOOPS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("decomp_template_loops", default=None)


class BoundedTemplate(Template):
    """A template whose `render` counts its loops' iterations afresh."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        token = _LOOPS.set([0])
        try:
            return super().render(*args, **kwargs)
        finally:
            _LOOPS.reset(token)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """`ImmutableSandboxedEnvironment` that refuses to build huge values (module docstring)."""

    template_class = BoundedTemplate
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        for name in _SIZED_FILTERS:
            self.filters[name] = _sized_filter(self.filters[name])
        self.globals["lipsum"] = _sized_call(self.globals["lipsum"])

    # ---- compiling: every loop counted, every `~` bounded
    def compile(self, source, name=None, filename=None, raw=False, defer_init=False):  # noqa: D102
        if isinstance(source, str):
            source = self.parse(source, name, filename)
        source = _Guards().visit(source)
        source.set_environment(self)
        return super().compile(source, name, filename, raw, defer_init)

    def bounded_loop(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """`iterable`, counted against the render's `MAX_LOOP` iterations."""
        count = _LOOPS.get() or [0]
        for item in iterable:
            count[0] += 1
            if count[0] > MAX_LOOP:
                raise TemplateLimitError(f"the template's loops ran over {MAX_LOOP:,} iterations")
            yield item

    def bounded_concat(self, parts: list[Any]) -> str:
        """The `~` operator: the parts as text, joined, at most `MAX_TEXT` characters."""
        return _bounded_join((str(p) for p in parts), "a text joined with ~")

    # ---- operators and calls
    def call_binop(self, context, operator_name: str, left: Any, right: Any) -> Any:
        _check_binop(operator_name, left, right)
        return self.binop_table[operator_name](left, right)

    def call(__self, __context, __obj, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 (Jinja's own naming)
        if isinstance(getattr(__obj, "__self__", None), str):  # a string method
            _check_string_call(__obj.__self__, __obj.__name__, args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any):
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        text = value.__self__

        @functools.wraps(wrapper)
        def bounded(*args: Any, **kwargs: Any) -> str:
            _check_format(text)
            _check_counts(args, kwargs)
            return _bounded_join([wrapper(*args, **kwargs)], "a formatted text")

        return bounded


class _Guards(NodeTransformer):
    """Routes every loop's iterable through `bounded_loop` and every `~` through `bounded_concat`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _environment_call("bounded_loop", [node.iter], node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _environment_call("bounded_concat", [nodes.List(node.nodes, lineno=node.lineno)], node.lineno)


def _environment_call(method: str, args: list[nodes.Expr], lineno: int) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute(method, lineno=lineno), args, [], None, None, lineno=lineno)


# ---- the checks
def _bounded_join(pieces: Iterable[str], what: str = "the template's output") -> str:
    out: list[str] = []
    size = 0
    for piece in pieces:
        size += len(piece)
        if size > MAX_TEXT:
            raise TemplateLimitError(f"{what} is over {MAX_TEXT:,} characters")
        out.append(piece)
    return "".join(out)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sized(value: Any) -> bool:
    return isinstance(value, (str, list, tuple))


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "*":
        seq, count = (left, right) if _sized(left) else (right, left)
        if _sized(seq) and _is_int(count) and len(seq) * count > MAX_TEXT:
            raise TemplateLimitError(f"repeating a text or list of length {len(seq):,} {count:,} times would make "
                                     f"over {MAX_TEXT:,} items")
        if _is_int(left) and _is_int(right) and abs(left).bit_length() + abs(right).bit_length() > _MAX_BITS:
            raise TemplateLimitError(f"a product of over {MAX_DIGITS:,} digits")
    elif op == "**":
        if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1 \
                and (abs(left).bit_length() - 1) * right > _MAX_BITS:
            raise TemplateLimitError(f"a power of over {MAX_DIGITS:,} digits")
    elif op == "+":
        if _sized(left) and _sized(right) and len(left) + len(right) > MAX_TEXT:
            raise TemplateLimitError(f"joining would make over {MAX_TEXT:,} items")
    elif op == "%" and isinstance(left, str):
        if any(_HUGE_SPEC.search(spec.group()) for spec in _PERCENT_SPEC.finditer(left)):
            raise TemplateLimitError("a format width or precision of a million or more")
        _check_counts(right if isinstance(right, tuple) else (right,), {})


def _check_counts(args: tuple, kwargs: dict) -> None:
    """Refuse an integer argument over `MAX_TEXT` (a width, a count, a number of items)."""
    for value in (*args, *kwargs.values()):
        if _is_int(value) and abs(value) > MAX_TEXT:
            raise TemplateLimitError(f"an argument of {value:,} (over {MAX_TEXT:,})")


def _check_format(text: str) -> None:
    try:
        specs = [spec for _, _, spec, _ in Formatter().parse(text) if spec]
    except ValueError:  # not a valid format string: formatting it fails plainly
        return
    if any(_HUGE_SPEC.search(spec) for spec in specs):
        raise TemplateLimitError("a format width or precision of a million or more")


def _check_string_call(text: str, method: str, args: tuple, kwargs: dict) -> None:
    _check_counts(args, kwargs)
    if method == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        _check_replace(text, args[0], args[1])
    elif method == "join" and args:
        _check_join(text, args[0])
    elif method == "expandtabs":
        size = (args or (kwargs.get("tabsize", 8),))[0]
        if _is_int(size) and len(text) + text.count("\t") * size > MAX_TEXT:
            raise TemplateLimitError(f"expanding tabs would make over {MAX_TEXT:,} characters")
    elif method == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        if len(text) * longest > MAX_TEXT:
            raise TemplateLimitError(f"translating would make over {MAX_TEXT:,} characters")


def _check_replace(text: str, old: str, new: str) -> None:
    count = len(text) + 1 if old == "" else text.count(old)
    if len(text) + count * (len(new) - len(old)) > MAX_TEXT:
        raise TemplateLimitError(f"replacing would make over {MAX_TEXT:,} characters")


def _check_join(separator: str, items: Any) -> None:
    if isinstance(items, (list, tuple)):
        size = len(separator) * max(0, len(items) - 1) + sum(len(i) for i in items if isinstance(i, str))
        if size > MAX_TEXT:
            raise TemplateLimitError(f"joining would make over {MAX_TEXT:,} characters")


def _sized_filter(fn):
    """A filter that refuses counts over `MAX_TEXT` and results it can foresee being too long."""

    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        values = [a for a in args if not _is_context(a)]
        _check_counts(tuple(values[1:]), kwargs)
        _check_filter(fn.__name__, values, kwargs)
        result = fn(*args, **kwargs)
        if isinstance(result, str) and len(result) > MAX_TEXT:
            raise TemplateLimitError(f"a filter's result is over {MAX_TEXT:,} characters")
        return result

    return bounded


def _check_filter(name: str, values: list, kwargs: dict) -> None:
    """What a sizing filter would build, foreseen from its arguments."""
    if not values:
        return
    text = values[0]
    if name == "do_replace" and len(values) >= 3 and all(isinstance(v, str) for v in values[:3]):
        _check_replace(*values[:3])
    elif name == "do_join":
        separator = values[1] if len(values) > 1 else kwargs.get("d", "")
        if isinstance(separator, str):
            _check_join(separator, text)
    elif name == "do_indent" and isinstance(text, str):
        width = values[1] if len(values) > 1 else kwargs.get("width", 4)
        size = len(width) if isinstance(width, str) else width if _is_int(width) else 0
        if len(text) + (text.count("\n") + 1) * size > MAX_TEXT:
            raise TemplateLimitError(f"indenting would make over {MAX_TEXT:,} characters")
    elif name == "do_format" and isinstance(text, str):
        _check_binop("%", text, tuple(values[1:]))


def _sized_call(fn):
    @functools.wraps(fn)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_counts(args, kwargs)
        return fn(*args, **kwargs)

    return bounded


def _is_context(value: Any) -> bool:
    """The environment or eval context Jinja passes to some filters first."""
    return isinstance(value, (nodes.EvalContext, Environment))


BoundedSandbox.concat = staticmethod(_bounded_join)  # every block, macro and render joins through it

#: The environment every kind uses.
JINJA = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
