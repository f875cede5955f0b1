"""JSON text of any nesting depth, written and read without recursion.

Python's `json` recurses once per nested list or object, so a value nested about a thousand
deep (a trace of a deeply recursive program: every call adds a step and a call node) raises
`RecursionError` both ways. `dumps` and `loads` here try `json` first (fast, in C) and only on
`RecursionError` take an explicit stack instead; either way the text is the same JSON value.

`dumps` keeps `decomp.dsl.values.storable_json`'s promises: NaN and the infinities are written
as the strings "NaN", "Infinity", "-Infinity", and text that no encoding can write (a lone
surrogate) is written with JSON escapes, so a UTF-8 file can always hold the result.
"""
from __future__ import annotations

import json
import math
import re
from json.decoder import JSONDecodeError, scanstring
from typing import Any, Callable, Iterator

from decomp.dsl.values import storable_json

_END = object()
_SURROGATE = re.compile("[\ud800-\udfff]")
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")
_CONSTANTS = {"true": True, "false": False, "null": None}


def dumps(value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None,
          default: Callable[[Any], Any] | None = str) -> str:
    """`storable_json(value, indent=..., separators=..., default=...)`, for values of any depth."""
    try:
        return storable_json(value, indent=indent, separators=separators, default=default)
    except RecursionError:
        return "".join(iter_json(value, indent=indent, separators=separators, default=default))


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, for values of any depth (raises `ValueError` on bad JSON)."""
    try:
        return json.loads(text)
    except RecursionError:
        return _Reader(text.decode("utf-8") if isinstance(text, bytes) else text).value()


#: How deeply a value decomp stores and reads back may nest (a cached answer, a trace node's
#: answer, a results line): one nested deeper is damaged, since the views and the scorers compare
#: and print values with Python's own recursive code.
MAX_VALUE_DEPTH = 500


def depth(value: Any, limit: int) -> int:
    """How deeply `value` nests (a scalar: 0, `[1]`: 1, `[[1]]`: 2), counted without recursion
    and only up to `limit + 1`: a value deeper than `limit` gives `limit + 1`."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, (list, tuple, dict)):
            level += 1
            if level > limit:
                return level
            deepest = max(deepest, level)
            todo.extend((child, level) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


# ---- writing
def iter_json(value: Any, *, indent: int | None = None, separators: tuple[str, str] | None = None,
              default: Callable[[Any], Any] | None = str) -> Iterator[str]:
    """The JSON text of `value` in pieces, with an explicit stack (no recursion); `indent` and
    `separators` as `json.dumps` takes them (indentation stops growing at `MAX_INDENT_LEVELS`)."""
    separator, colon = separators or ("," if indent is not None else ", ", ": ")
    frames: list[list[Any]] = []  # [items iterator, closing bracket, is_dict, first]
    pending = value
    while True:
        yield from _open(pending, frames, default)
        while frames:
            frame = frames[-1]
            item = next(frame[0], _END)
            if item is _END:
                frames.pop()
                yield _newline(indent, len(frames)) + frame[1]
                continue
            head = ("" if frame[3] else separator) + _newline(indent, len(frames))
            frame[3] = False
            if frame[2]:
                key, pending = item
                yield head + _string(_key(key)) + colon
            else:
                pending = item
                yield head
            break
        else:
            return


def _open(value: Any, frames: list[list[Any]], default: Callable[[Any], Any] | None) -> Iterator[str]:
    """The text of a scalar, or the opening bracket of a container (its frame pushed)."""
    for _ in range(100):  # `default` may give another value that needs it again
        if isinstance(value, dict):
            if not value:
                yield "{}"
            else:
                frames.append([iter(value.items()), "}", True, True])
                yield "{"
            return
        if isinstance(value, (list, tuple)):
            if not value:
                yield "[]"
            else:
                frames.append([iter(value), "]", False, True])
                yield "["
            return
        if isinstance(value, str):
            yield _string(value)
            return
        if value is None or isinstance(value, (bool, int)):
            yield json.dumps(value)
            return
        if isinstance(value, float):
            yield json.dumps(value) if math.isfinite(value) else _string(
                "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity")
            return
        if default is None:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        value = default(value)
    raise ValueError("default() keeps giving values it cannot write")


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=_SURROGATE.search(text) is not None)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if math.isnan(key) else "Infinity" if key > 0 else "-Infinity"
    if isinstance(key, (int, float)):
        return json.dumps(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


#: Nesting beyond which `indent` adds no more spaces (indented text of a value nested thousands
#: deep would otherwise grow with the square of its depth).
MAX_INDENT_LEVELS = 50


def _newline(indent: int | None, depth: int) -> str:
    return "" if indent is None else "\n" + " " * (indent * min(depth, MAX_INDENT_LEVELS))


# ---- reading
class _Reader:
    """A JSON reader with an explicit stack of open containers."""

    def __init__(self, text: str):
        self.text = text
        self.at = 0

    def value(self) -> Any:
        stack: list[list[Any]] = []  # [container, key awaiting its value (objects)]
        result: Any = _END
        while True:
            value = self._scalar_or_open(stack)
            while value is not _END:  # a finished value: put it in its container
                if not stack:
                    result = value
                    break
                value = self._place(stack, value)
            if result is not _END:
                self._space()
                if self.at != len(self.text):
                    raise JSONDecodeError("Extra data", self.text, self.at)
                return result

    def _scalar_or_open(self, stack: list[list[Any]]) -> Any:
        """A scalar, a container that closed at once ([] or {}), or _END (a container opened)."""
        self._space()
        char = self.text[self.at:self.at + 1]
        if char in ("[", "{"):
            self.at += 1
            self._space()
            close = "]" if char == "[" else "}"
            if self.text[self.at:self.at + 1] == close:
                self.at += 1
                return [] if char == "[" else {}
            stack.append([[] if char == "[" else {}, None])
            if char == "{":
                stack[-1][1] = self._object_key()
            return _END
        return self._scalar()

    def _place(self, stack: list[list[Any]], value: Any) -> Any:
        """Add `value` to the innermost container; the container itself when that closes it,
        else _END (after reading what comes next: a new key, or opening the next value)."""
        frame = stack[-1]
        container = frame[0]
        if isinstance(container, list):
            container.append(value)
        else:
            container[frame[1]] = value
        self._space()
        char = self.text[self.at:self.at + 1]
        self.at += 1
        if char == ",":
            if isinstance(container, dict):
                frame[1] = self._object_key()
            return self._scalar_or_open(stack)
        if char == ("]" if isinstance(container, list) else "}"):
            stack.pop()
            return container
        raise JSONDecodeError("Expecting ',' delimiter", self.text, self.at - 1)

    def _object_key(self) -> str:
        self._space()
        if self.text[self.at:self.at + 1] != '"':
            raise JSONDecodeError("Expecting property name enclosed in double quotes", self.text, self.at)
        key, self.at = scanstring(self.text, self.at + 1)
        self._space()
        if self.text[self.at:self.at + 1] != ":":
            raise JSONDecodeError("Expecting ':' delimiter", self.text, self.at)
        self.at += 1
        return key

    def _scalar(self) -> Any:
        text, at = self.text, self.at
        if text[at:at + 1] == '"':
            value, self.at = scanstring(text, at + 1)
            return value
        for word, value in (*_CONSTANTS.items(), ("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf)):
            if text.startswith(word, at):
                self.at = at + len(word)
                return value
        match = _NUMBER.match(text, at)
        if match is None or not match.group():
            raise JSONDecodeError("Expecting value", text, at)
        self.at = match.end()
        whole, fraction, exponent = match.groups()
        return float(whole + (fraction or "") + (exponent or "")) if fraction or exponent else int(whole)

    def _space(self) -> None:
        self.at = _WS.match(self.text, self.at).end()
