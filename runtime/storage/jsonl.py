"""JSON Lines, read and written one way: datasets, predictions, a run's results.jsonl, task-graph rows.

`json_line(value)` is a value as one line of JSON: non-ASCII kept as it is, what JSON cannot
hold written as its text (`str`). `read_lines(data)` parses each line of a file's bytes (or
text) and never stops at a bad one: every line comes back as a `Line` with its number (from 1,
blank lines counted) and either its value or, in `error`, what is wrong with it, so each caller
decides whether a bad line is skipped with a warning, becomes an error row, or stops the read.

What Python's `json` would read but JSON has not is read as text, the way `json_line` writes
it: `NaN`, `Infinity` and `-Infinity` are the strings "NaN", "Infinity", "-Infinity"; a number
too large for a float (`1e999`) or an integer of more digits than Python converts (4,300) is
the string of its digits as written. A line nested too deeply for the reader (about a
thousand levels) is that line's error, not a crash: `depth(value)` lets callers set a lower
limit of their own.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from decomp.dsl.values import json_kind, storable_json
from decomp.runtime.engine.deepjson import depth

__all__ = ["Line", "depth", "json_line", "parse_json", "read_lines", "write_jsonl"]

#: A line ends at \n, \r\n or \r (what Python's universal newlines and bytes.splitlines accept).
_BREAKS = {bytes: re.compile(rb"\r\n|\r|\n"), str: re.compile(r"\r\n|\r|\n")}
_BOM = {bytes: b"\xef\xbb\xbf", str: "\ufeff"}


@dataclass(frozen=True)
class Line:
    """One line of a JSONL file: `value` when it parsed, else `error` (and `exception`, the
    `json.JSONDecodeError` or `UnicodeDecodeError`, when there was one)."""

    number: int
    value: Any = None
    error: str | None = None
    exception: ValueError | None = None

    @property
    def problem(self) -> str:
        """`error` as a message that names the line: "line 3: not valid JSON (...)"."""
        return f"line {self.number}: {self.error}"


def json_line(value: Any) -> str:
    """`value` as one line of JSON, newline included (non-ASCII as it is, other objects as text;
    text no encoding can write, such as a lone surrogate, and NaN as `storable_json` does)."""
    return storable_json(value, default=str) + "\n"


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    """`rows` as a JSONL file, one `json_line` each (its folder made if needed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json_line(row) for row in rows), encoding="utf-8")


def read_lines(data: bytes | str, *, objects: bool = False, blank: bool = False) -> Iterator[Line]:
    """Each line of the JSONL `data` (a file's bytes, or its text), parsed.

    A UTF-8 byte-order mark at the start is ignored. Bytes are decoded as UTF-8 line by line: a
    line that is not UTF-8 is that line's error. Blank lines (only whitespace) are skipped, unless
    `blank`: then they come back with the error "a blank line". With `objects`, a value that is
    not a JSON object is an error too ("expected a JSON object, got a list"). Nothing after the
    last line break is left out: a last line without one comes back like the others.
    """
    kind = type(data)
    if data.startswith(_BOM[kind]):
        data = data[len(_BOM[kind]):]
    pieces = _BREAKS[kind].split(data)
    if not pieces[-1]:
        pieces.pop()  # the (empty) text after the final line break
    for number, raw in enumerate(pieces, start=1):
        if not raw.strip():
            if blank:
                yield Line(number, error="a blank line")
            continue
        yield _parse(number, raw, objects)


def _parse(number: int, raw: bytes | str, objects: bool) -> Line:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return Line(number, error=f"not valid UTF-8 text (byte {exc.start + 1} of the line)", exception=exc)
    try:
        value = parse_json(raw)
    except json.JSONDecodeError as exc:
        return Line(number, error=f"not valid JSON ({exc.msg} at column {exc.colno})", exception=exc)
    except RecursionError:
        return Line(number, error="nested too deeply to read (lists or objects about a thousand levels deep)")
    if objects and not isinstance(value, dict):
        return Line(number, error=f"expected a JSON object, got {json_kind(value)}")
    return Line(number, value)


def parse_json(text: str) -> Any:
    """`text` as JSON, with what JSON has not read as text (see the module's docstring). Raises
    `json.JSONDecodeError` for text that is not JSON and `RecursionError` for nesting deeper
    than Python's reader goes."""
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer of more digits than Python converts: read them as text
        return _LONG_DECODER.decode(text)


def _as_text(word: str) -> str:
    return word


def _float(text: str) -> float | str:
    number = float(text)
    return number if math.isfinite(number) else text


def _int(text: str) -> int | str:
    try:
        return int(text)
    except ValueError:
        return text


_DECODER = json.JSONDecoder(parse_constant=_as_text, parse_float=_float)
_LONG_DECODER = json.JSONDecoder(parse_constant=_as_text, parse_float=_float, parse_int=_int)
