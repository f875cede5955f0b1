"""Answers as DecomP treats them: JSON values, substituted into sub-queries as JSON text."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from decomp.dsl.nodes import Ref
from decomp.dsl.parser import parse_answer_text


@dataclass(frozen=True)
class Failed:
    """An answer whose outcome is failed: what a handler returns for a failure the program may
    handle (an executor that did not finish its task, a plan with no steps). The program sees
    `value` as the step's answer and `ok(#n)` as false; the row goes on. `reason` says why, in
    words, where one is known (an answer that does not fit its declared type)."""

    value: Any
    reason: str | None = None


def outcome(answer: Any) -> tuple[Any, bool]:
    """A handler's answer as (value, ok)."""
    if isinstance(answer, Failed):
        return answer.value, False
    return answer, True


def parse_output(text: str) -> Any:
    """A handler's raw text as a JSON value; text that is not JSON stays a (stripped) string."""
    return parse_answer_text(text)[0]


def json_text(value: Any) -> str:
    """How an answer appears inside a sub-query (select): its JSON text, quotes included.

    Unlike the official code this keeps non-ASCII characters as they are (no \\u escapes):
    models read "Lougerière" better than "Lougeri\\u00e8re".
    """
    return "".join(_ENCODE(value, 0))


def _encoder():
    """`json.dumps(value, ensure_ascii=False, check_circular=False)` as one reusable function:
    `json.dumps` builds an encoder (and CPython's C encoder) on every call, most of its cost on
    short values. Answers come from JSON, so they cannot be circular (a Python handler's
    circular value fails with RecursionError, as with `check_circular=False`)."""
    default = json.JSONEncoder(ensure_ascii=False, check_circular=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pure-Python json (not CPython)
        return lambda value, _level: (default.encode(value),)
    return make(None, default.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)


_ENCODE = _encoder()


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_json(value: Any, **kwargs: Any) -> str:
    """JSON text of `value` that a UTF-8 file, SQLite and a terminal can always hold.

    Non-ASCII characters stay as they are, unless the value holds text no encoding can write
    (a lone surrogate such as "\\ud800", from a data row or a model reply): then the text is
    written with JSON escapes, and `json.loads` gives the very same value back (but for a high
    surrogate followed by a low one: JSON reads that pair as the one character it encodes,
    "\\ud800\\udfff" as U+103FF). NaN and the infinities, which JSON does not have, are written
    as the strings "NaN", "Infinity", "-Infinity". `kwargs` go to `json.dumps` (indent,
    sort_keys, default...)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, **kwargs)
    except ValueError:  # NaN or an infinity somewhere: as strings
        text = json.dumps(_finite(value), ensure_ascii=False, allow_nan=False, **kwargs)
        value = _finite(value)
    if _SURROGATE.search(text) is None:
        return text
    return json.dumps(value, ensure_ascii=True, allow_nan=False, **kwargs)


def printable(text: str) -> str:
    r"""`text` that can always be printed or written as UTF-8, and read back unambiguously.

    The scheme: each backslash is doubled (`\\` stands for one backslash) and each lone
    surrogate is written as its escape (`\ud800`); nothing else changes, so text without a
    backslash or a surrogate comes back as it is. Reading left to right, `\\` is a backslash and
    `\uXXXX` a surrogate, nothing else: the six characters `\ud800` print as `\\ud800`, the
    lone surrogate U+D800 as `\ud800`, so the two can no longer be confused."""
    if _PRINT_ESCAPED.search(text) is None:
        return text
    return _PRINT_ESCAPED.sub(_print_escape, text)


_PRINT_ESCAPED = re.compile(r"[\\\ud800-\udfff]")


def _print_escape(found: re.Match) -> str:
    char = found.group()
    return "\\\\" if char == "\\" else f"\\u{ord(char):04x}"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {_finite(k) if isinstance(k, float) else k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def item_text(item: Any) -> str:
    """How one list item appears in a per-item query: raw for strings and numbers, else JSON."""
    if isinstance(item, str):
        return item
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        return str(item)
    return json_text(item)


def named_text(value: Any) -> str:
    """How a named input (`#question`) appears: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json_text(value)


def substitute(query: str, refs: tuple[Ref, ...], replacements: Mapping[str, str], offset: int) -> str:
    """Replace each reference in `query` by its text; `offset` is the query's start column.

    Works from positions, so `#1` never touches `#12` (the official code only knew one digit).
    """
    out, cursor = [], 0
    for ref in refs:
        start = ref.span.column - offset
        end = start + len(ref.text)
        if ref.text not in replacements:
            continue
        out.append(query[cursor:start])
        out.append(replacements[ref.text])
        cursor = end
    out.append(query[cursor:])
    return "".join(out)


def json_kind(value: Any) -> str:
    """What kind of JSON value this is, in words (for error messages)."""
    kinds = {list: "a list", dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
