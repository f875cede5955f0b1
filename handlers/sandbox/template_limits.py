"""What one template render may build, and for how long (used by `decomp.handlers.sandbox.templates`).

Every value a render builds has a *logical* size: a text its length, a number a few
characters, a list or tuple one per item plus its items' sizes, a dict or namespace the same
over its keys and values. Shared structure counts each time it is reached: `[s.v, s.v]` is
twice the size of `s.v` although nothing was copied, because that is what turning it into text
(`|string`, `|tojson`, `{{ }}`, `~`, `%`), comparing or hashing it costs in C, where nothing can
stop it. So no value built inside a render may be over `MAX_TEXT`, checked where it is built
(`measured`, `sized`; a call may hand back a bigger input that is already there:
`physical_size`), and no value becomes text past that size (`check_text`).

A render also has a deadline (`Render`): loops, calls, operators, filters and the size walk
itself check it (`tick`), so a render stops itself at its time limit instead of running on in
a thread nobody waits for.
"""
from __future__ import annotations

import contextvars
import math
import re
import time
from string import Formatter
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.utils import Namespace

from decomp.dsl.errors import DecompError

#: The most characters one render (or any text, list or join inside it) may have; also the
#: most logical size (see the module docstring) of any value a render builds.
MAX_TEXT = 1_000_000
#: The most loop iterations one render may run, all loops together.
MAX_LOOP = 100_000
#: The most decimal digits an integer built by `*` or `**` may have.
MAX_DIGITS = 4000
MAX_BITS = math.ceil(MAX_DIGITS * math.log2(10))
#: A cap that only a foreign value (an input) can reach: how far its size is counted.
UNCAPPED = 2 ** 62
#: Nodes the size walk visits between two looks at the deadline.
_TICK_EVERY = 4096


class TemplateLimitError(DecompError, SecurityError):
    """A render refused for building too much or running too long (see the module docstring)."""

    #: Shadows Jinja's read-only `TemplateError.message` property, so that `DecompError` can set it.
    message = None


# ---- the render's state: its loops and its deadline
class Render:
    """One render's loop count and deadline (None: no deadline)."""

    __slots__ = ("loops", "deadline", "limit")

    def __init__(self, limit: float | None) -> None:
        self.loops = 0
        self.limit = limit
        self.deadline = None if limit is None else time.monotonic() + limit

    def overdue(self) -> TemplateLimitError:
        return TemplateLimitError(f"the template ran longer than its time limit of {self.limit:g} s")


RENDER: contextvars.ContextVar[Render | None] = contextvars.ContextVar("decomp_template_render", default=None)


def tick() -> None:
    """Raise `TemplateLimitError` when the current render is past its deadline."""
    state = RENDER.get()
    if state is not None and state.deadline is not None and time.monotonic() > state.deadline:
        raise state.overdue()


# ---- logical sizes
class SizedList(list):
    """A list a render built, with its logical size (None: it holds a namespace, which can change)."""

    __slots__ = ("_size",)


class SizedTuple(tuple):
    """A tuple a render built, with its logical size (as `SizedList`)."""


class SizedDict(dict):
    """A dict a render built, with its logical size (as `SizedList`)."""

    __slots__ = ("_size",)


_SIZED = (SizedList, SizedTuple, SizedDict)
for _kind in _SIZED:  # Python's own messages name them as the plain kinds ("unhashable type: 'list'")
    _kind.__name__ = _kind.__mro__[1].__name__
_SCALARS = (int, float, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset)
_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))
_ACTIVE = -1  # in the memo: being measured (met again: the value holds itself)
_NOTHING = object()  # no source: a value built from nothing that was there


def logical_size(value: Any, cap: int = MAX_TEXT) -> int:
    """`value`'s logical size, exact up to `cap` (past it: some number over `cap`)."""
    size = _leaf_size(value)
    if size is not None:
        return size
    size = _flat_size(_children(value))
    return _walk(value, cap)[0] if size is None else size


def _scalar_size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value.bit_length() * 31 // 100 + 2  # about its digits and a sign
    return 8


def _children(value: Any) -> tuple | list | None:
    """What a container holds (None: not a container)."""
    if isinstance(value, str):
        return None
    if isinstance(value, _CONTAINERS):
        return value
    if isinstance(value, dict):
        return [*value.keys(), *value.values()]
    if isinstance(value, Namespace):
        attrs = value._Namespace__attrs
        return [*attrs.keys(), *attrs.values()]
    if isinstance(value, _VIEWS):
        mapping = value.mapping
        return [*mapping.keys(), *mapping.values()]
    return None


def _leaf_size(value: Any) -> int | None:
    """The size of what needs no walk (None: a container to walk)."""
    kind = type(value)
    if kind is str:
        return len(value)
    if kind in _SCALARS:
        return _scalar_size(value)
    if kind in _SIZED:
        return getattr(value, "_size", None)
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (int, float)):
        return _scalar_size(value)
    return None if _children(value) is not None else 8


def _walk(root: Any, cap: int, copies: dict[int, Any] | None = None) -> tuple[int, bool]:
    """(logical size, whether it can change: holds a namespace), counted once per object (a
    memo by `id`, every object alive meanwhile) and saturating just past `cap`. A value that
    holds itself is refused: its text would be Python's `[...]`, but its size has no meaning.
    With `copies`: every list, tuple and dict met is copied there (by `id`) as its `Sized`
    kind, holding the copies of what it holds (sharing kept), so that no later check counts it
    again."""
    memo: dict[int, int] = {}
    changing = False
    dyn: set[int] = set()  # the containers that hold a namespace
    # (value, None, None): to measure; (value, size of its leaves and items, its containers): to sum up
    stack: list[tuple[Any, int | None, list | None]] = [(root, None, None)]
    visits = 0
    while stack:
        value, own, inner = stack.pop()
        if inner is not None:
            memo[id(value)] = size = min(cap + 1, own + sum(memo[id(item)] for item in inner))
            if isinstance(value, Namespace) or any(id(item) in dyn for item in inner):
                dyn.add(id(value))
            if copies is not None:
                copies[id(value)] = _copy(value, copies, None if id(value) in dyn else size)
            continue
        if memo.get(id(value), _ACTIVE) != _ACTIVE:
            continue  # reached twice before it was measured: measured once
        visits += 1
        if visits % _TICK_EVERY == 0:
            tick()
        changing = changing or isinstance(value, Namespace)
        memo[id(value)] = _ACTIVE
        items = _children(value)
        own, inner, todo = len(items), [], []
        for item in items:
            size = _leaf_size(item)
            if size is not None:
                own += size
                continue
            inner.append(item)
            seen = memo.get(id(item))
            if seen == _ACTIVE:
                raise TemplateLimitError("a value that holds itself cannot be measured or turned into text")
            if seen is None:
                todo.append((item, None, None))
        stack.append((value, own, inner))
        stack.extend(todo)
    return memo[id(root)], changing


def _copy(value: Any, copies: dict[int, Any], size: int | None) -> Any:
    """`value` (a plain list, tuple or dict) as its `Sized` kind, holding the `copies` of what it
    holds; anything else (a namedtuple such as `groupby`'s groups, a namespace) as it is."""
    kind = type(value)
    if kind is dict:
        fresh: Any = {copies.get(id(k), k): copies.get(id(v), v) for k, v in value.items()}
    elif kind is list or kind is tuple:
        fresh = [copies.get(id(item), item) for item in value]
        fresh = fresh if kind is list else tuple(fresh)
    else:
        return value
    return remember(fresh, size)


def _flat_size(items: Any) -> int | None:
    """The size of a container of leaves only (None: it holds a container to walk)."""
    total = len(items)
    for item in items:
        size = _leaf_size(item)
        if size is None:
            return None
        total += size
    return total


def measured(value: Any, what: str, source: Any = _NOTHING, copies: dict[int, Any] | None = None) -> int | None:
    """The logical size of `value` (a text, or a container a render just built; None: it holds
    a namespace, so its size can change), refused when over `MAX_TEXT`, unless it is no bigger
    than the `physical_size` of `source`, what it was made from (a call such as `d.get("docs")`
    may hand back a big input that is already there; nothing may grow by sharing)."""
    if type(value) is str:
        if len(value) > MAX_TEXT:
            raise TemplateLimitError(f"{what} is over {MAX_TEXT:,} characters")
        return len(value)
    items = _children(value)
    if items is None:
        return _leaf_size(value)
    size, changing = _flat_size(items), False
    if size is None:
        size, changing = _walk(value, MAX_TEXT, copies)
    if size > MAX_TEXT:
        allowed = 0 if source is _NOTHING else physical_size(source)
        if allowed <= MAX_TEXT or _walk(value, allowed)[0] > allowed:
            real = physical_size(value)
            shared = " (an item it holds more than once counts each time)" if _walk(value, real)[0] > real else ""
            raise TemplateLimitError(f"{what} would be over {MAX_TEXT:,} characters as text{shared}")
    return None if changing else size


def sized(value: Any, what: str, source: Any = _NOTHING) -> Any:
    """`value` checked by `measured`; a list, tuple or dict comes back as its `Sized` kind,
    which knows its size, and so does every list, tuple and dict inside it (copies, sharing
    kept), so that no later check counts any of them again."""
    copies: dict[int, Any] = {}
    size = measured(value, what, source, copies)
    return copies[id(value)] if id(value) in copies else remember(value, size)


#: A text up to this long counts as a copy each time it is held (a key, a word): sharing it
#: costs a reference anyway.
_SMALL = 64


def physical_size(value: Any) -> int:
    """The size of `value` counting every container and every text over `_SMALL` characters
    once, however often it is reached: what is really in memory (of a JSON input, the same as
    its logical size)."""
    seen: set[int] = set()
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) <= _SMALL:
                total += len(item)
                continue
        elif _children(item) is None:
            total += _leaf_size(item)
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        if len(seen) % _TICK_EVERY == 0:
            tick()
        items = _children(item)
        if items is None:
            total += len(item)
        else:
            total += len(items)
            stack.extend(items)
    return total


def remember(value: Any, size: int | None) -> Any:
    """`value` as its `Sized` kind carrying `size` (a list, tuple or dict; others as they are)."""
    kind = type(value)
    if kind is list or kind is SizedList:
        out = value if kind is SizedList else SizedList(value)
    elif kind is dict or kind is SizedDict:
        out = value if kind is SizedDict else SizedDict(value)
    elif kind is tuple or kind is SizedTuple:
        out = value if kind is SizedTuple else SizedTuple(value)
    else:
        return value
    out._size = size
    return out


def check_text(value: Any, what: str = "a value turned into text") -> None:
    """Refuse to turn `value` into text when its logical size is over `MAX_TEXT` (a text is
    already one: it passes)."""
    if type(value) is not str and logical_size(value) > MAX_TEXT:
        raise TemplateLimitError(f"{what} would be over {MAX_TEXT:,} characters")


def check_total(sizes: int, what: str) -> None:
    if sizes > MAX_TEXT:
        raise TemplateLimitError(f"{what} would be over {MAX_TEXT:,} characters")


def counted(items: Any, source: Any, what: str):
    """`items` (an iterator a filter returned) yielded one by one, its items' sizes summed as
    they come: refused past `MAX_TEXT` (or `source`'s size, when that is bigger)."""
    total, allowed = 0, MAX_TEXT
    for item in items:
        tick()
        total += 1 + logical_size(item, allowed)
        if total > allowed:
            if allowed == MAX_TEXT and source is not None:
                allowed = max(MAX_TEXT, physical_size(source))
            if total > allowed:
                raise TemplateLimitError(f"{what} would be over {MAX_TEXT:,} characters as text")
        yield item


# ---- operators, formats and string methods, foreseen before anything is built
#: A width or precision of 7 digits or more in a format spec ("%9999999d", "{:>1000000}").
_HUGE_SPEC = re.compile(r"\d{7,}")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d*)(?:\.(?:\*|\d*))?")
_PERCENT_KEY = re.compile(r"%\(([^)]*)\)")
_FIELD_HEAD = re.compile(r"[^.\[]*")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (str, list, tuple))


def binop(op: str, fn, left: Any, right: Any) -> Any:
    """`fn(left, right)` for the operator `op`, refused before it is built when it would be too
    big; a list or tuple built by `*` or `+` comes back knowing its size."""
    size = _binop_size(op, left, right)
    result = fn(left, right)
    return remember(result, size) if size is not None and type(result) in (list, tuple) else result


def _binop_size(op: str, left: Any, right: Any) -> int | None:
    """The logical size of what `*` or `+` would build from sequences (None: not known, or
    not a sequence), after the checks of every operator."""
    if op == "*":
        seq, count = (left, right) if _is_sequence(left) else (right, left)
        if _is_sequence(seq) and is_int(count):
            size = logical_size(seq) * max(0, count)
            if size > MAX_TEXT:
                raise TemplateLimitError(f"repeating a text or list of size {logical_size(seq):,} {count:,} times "
                                         f"would make over {MAX_TEXT:,} characters")
            return size if type(seq) is not str and not _changes(seq) else None
        if is_int(left) and is_int(right) and abs(left).bit_length() + abs(right).bit_length() > MAX_BITS:
            raise TemplateLimitError(f"a product of over {MAX_DIGITS:,} digits")
    elif op == "**":
        if is_int(left) and is_int(right) and right > 0 and abs(left) > 1 \
                and (abs(left).bit_length() - 1) * right > MAX_BITS:
            raise TemplateLimitError(f"a power of over {MAX_DIGITS:,} digits")
    elif op == "+":
        if _is_sequence(left) and _is_sequence(right):
            size = logical_size(left) + logical_size(right)
            if size > MAX_TEXT:
                raise TemplateLimitError(f"joining would make over {MAX_TEXT:,} characters")
            return None if _changes(left) or _changes(right) else size
    elif op == "%" and isinstance(left, str):
        check_percent(left, right)
    return None


def _changes(value: Any) -> bool:
    """Whether a sequence's size can change (it holds a namespace)."""
    if isinstance(value, str):
        return False
    if type(value) in _SIZED and getattr(value, "_size", None) is not None:
        return False
    return _flat_size(value) is None and _walk(value, UNCAPPED)[1]


def check_counts(args: tuple, kwargs: dict) -> None:
    """Refuse an integer argument over `MAX_TEXT` (a width, a count, a number of items)."""
    for value in (*args, *kwargs.values()):
        if is_int(value) and abs(value) > MAX_TEXT:
            raise TemplateLimitError(f"an argument of {value:,} (over {MAX_TEXT:,})")


def check_percent(text: str, args: Any) -> None:
    """`text % args`: no huge width, and what the arguments would add, foreseen."""
    if any(_HUGE_SPEC.search(spec.group()) for spec in _PERCENT_SPEC.finditer(text)):
        raise TemplateLimitError("a format width or precision of a million or more")
    if isinstance(args, dict):
        added = sum(logical_size(args[key]) for key in _PERCENT_KEY.findall(text) if key in args)
    else:
        check_counts(args if isinstance(args, tuple) else (args,), {})
        added = logical_size(args)
    check_total(len(text) + added, "a formatted text")


def check_format(text: str, args: tuple, kwargs: Any) -> None:
    """`text.format(*args, **kwargs)`: no huge width, and what each field would add, foreseen
    (a field naming an item or attribute of an argument counts the whole argument)."""
    try:
        fields = [(name, spec) for _, name, spec, _ in Formatter().parse(text) if name is not None]
    except ValueError:  # not a valid format string: formatting it fails plainly
        return
    if any(spec and _HUGE_SPEC.search(spec) for _, spec in fields):
        raise TemplateLimitError("a format width or precision of a million or more")
    check_counts(args, kwargs if isinstance(kwargs, dict) else {})
    added, auto = 0, 0
    for name, _ in fields:
        head = _FIELD_HEAD.match(name).group()
        if head == "":
            value, auto = (args[auto] if auto < len(args) else None), auto + 1
        elif head.isdigit():
            value = args[int(head)] if int(head) < len(args) else None
        else:
            value = kwargs.get(head) if isinstance(kwargs, dict) else None
        added += 0 if value is None else logical_size(value)
    check_total(len(text) + added, "a formatted text")


def check_join(separator: str, items: Any) -> None:
    """`separator.join(items)` (or `|join`): what it would build, foreseen for a list or tuple."""
    if not isinstance(items, (list, tuple)):
        return
    gaps = len(separator) * max(0, len(items) - 1)
    if logical_size(items) + gaps <= MAX_TEXT:
        return  # a list's size is at least its items' text
    total = gaps
    for item in items:
        total += len(item) if isinstance(item, str) else logical_size(item)
        if total > MAX_TEXT:
            raise TemplateLimitError(f"joining would make over {MAX_TEXT:,} characters")


def check_replace(text: str, old: str, new: str) -> None:
    count = len(text) + 1 if old == "" else text.count(old)
    if len(text) + count * (len(new) - len(old)) > MAX_TEXT:
        raise TemplateLimitError(f"replacing would make over {MAX_TEXT:,} characters")


def check_string_call(text: str, method: str, args: tuple, kwargs: dict) -> None:
    """A string method's call (`ljust`, `replace`, `join`, `expandtabs`, `translate`, ...)."""
    check_counts(args, kwargs)
    if method == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
        check_replace(text, args[0], args[1])
    elif method == "join" and args:
        check_join(text, args[0])
    elif method == "expandtabs":
        size = (args or (kwargs.get("tabsize", 8),))[0]
        if is_int(size) and len(text) + text.count("\t") * size > MAX_TEXT:
            raise TemplateLimitError(f"expanding tabs would make over {MAX_TEXT:,} characters")
    elif method == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        if len(text) * longest > MAX_TEXT:
            raise TemplateLimitError(f"translating would make over {MAX_TEXT:,} characters")
