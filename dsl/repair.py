"""Fitting an answer to its declared type: coercion, then the documented repair of text around
a JSON value, then validation. An answer that still does not fit is a worded problem, never a
string passed on.

The rule (`fit`), in order, the first that gives a value of the type wins:
1. the answer itself, after the type's lossless coercions (`Type.coerce`: a number for a string
   type becomes its text, "yes"/"no" for `bool`, a choice matched without regard to case);
2. for text only: the inside of each fenced block in turn (three backticks, a language name
   after them or none), read as JSON;
3. for text only: each JSON value written in the text, left to right (an object or list from
   its `{` or `[`, a string from its quote, a number, true/false/null), the first one that fits;
   so a sentence before or after the value, or a note after it, is dropped;
4. for text only: a Python literal (`['a', 'b']`, single quotes), read by `ast.literal_eval`
   (which evaluates nothing): the fenced block, else the text from its first `[` or `{` to its
   last `]` or `}`. Tuples read as lists; a literal that is no JSON value (a set, bytes) is not.
Text longer than `MAX_REPAIR_CHARS` is not searched (step 1 only). Nothing is guessed: a list
cut short (`["a", "b`) or prose with no value in it stays a problem.
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterator

from decomp.dsl.answer_types import Type
from decomp.dsl.values import json_text

#: The longest text searched for a JSON value inside it.
MAX_REPAIR_CHARS = 100_000
#: The most starting positions tried in one text.
MAX_CANDIDATES = 2_000
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.S)
_STARTS = re.compile(r'[\[{"\-0-9tfn]')
_DECODER = json.JSONDecoder()


def fit(t: Type, value: Any) -> tuple[Any, str | None]:
    """`value` as a value of type `t` by the rule above, and None; or `value` unchanged and why
    it does not fit (the type and the text named)."""
    first = t.coerce(value)
    problem = t.problem(first)
    if problem is None:
        return first, None
    if isinstance(value, str) and len(value) <= MAX_REPAIR_CHARS:
        for candidate in _candidates(value):
            coerced = t.coerce(candidate)
            if t.problem(coerced) is None:
                return coerced, None
    inside = f" (at {problem})" if problem.startswith("[") else ""
    return value, f"the answer {_shown(value)} is not {t.text}{inside}"


def _candidates(text: str) -> Iterator[Any]:
    """The JSON values written in `text`: fenced blocks first, then each value in order."""
    for block in _FENCE.finditer(text):
        try:
            yield _DECODER.decode(block.group(1).strip())
        except (ValueError, RecursionError):
            pass
    tried = 0
    for start in _STARTS.finditer(text):
        if tried >= MAX_CANDIDATES:
            return
        tried += 1
        if start.start() and text[start.start() - 1].isalnum() and start.group() not in '[{"':
            continue  # inside a word ("often", "2nd" of "a2nd"): not the start of a value
        try:
            value, _ = _DECODER.raw_decode(text, start.start())
        except (ValueError, RecursionError):
            continue
        yield value
    yield from _literals(text)


def _literals(text: str) -> Iterator[Any]:
    """Step 4: Python literals, fenced or spanning the outermost brackets."""
    pieces = [block.group(1) for block in _FENCE.finditer(text)]
    first = min((i for i in (text.find("["), text.find("{")) if i >= 0), default=-1)
    last = max(text.rfind("]"), text.rfind("}"))
    if 0 <= first < last:
        pieces.append(text[first:last + 1])
    for piece in pieces:
        value = _literal(piece.strip())
        if value is not _NONE:
            yield value


_NONE = object()


def _literal(text: str) -> Any:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NONE
    return _as_json(value)


def _as_json(value: Any) -> Any:
    """A literal as a JSON value (tuples as lists), or `_NONE` when it holds anything else."""
    if isinstance(value, (list, tuple)):
        items = [_as_json(v) for v in value]
        return _NONE if any(i is _NONE for i in items) else items
    if isinstance(value, dict):
        pairs = {k: _as_json(v) for k, v in value.items()}
        ok = all(isinstance(k, str) for k in pairs) and all(v is not _NONE for v in pairs.values())
        return pairs if ok else _NONE
    return value if value is None or isinstance(value, (str, int, float, bool)) else _NONE


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json_text(value)
    return repr(text[:200] + ("..." if len(text) > 200 else ""))
