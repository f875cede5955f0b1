"""Reading dataset rows from JSONL files or DROP-style JSON files.

Two formats are recognised (see :func:`read_rows`):

* JSONL: one JSON object per line with ``"id"`` and the inputs (``"question"``, or whatever
  the program's parameters are named; a missing one is that row's error when it runs);
  the ``"answer"`` field, when present, is the row's gold.
* DROP-style JSON (the DecomP datasets): one object
  ``{pid: {"passage": str, "qa_pairs": [{"question", "answer", "query_id", ...}]}}``.

A bad row never stops the reading: it comes back as a :class:`Row` whose ``error`` says what
is wrong, at its place (``data.jsonl:3: not valid JSON (...)``), and the rows after it still
come. A row that nests deeper than :data:`MAX_DEPTH` levels (lists or objects inside each
other, the row's own object the first) is such an error row; so is a line too deep for the
JSON reader at all. What JSON has not is read as text (``NaN``, ``Infinity``, ``-Infinity``
as those strings, ``1e999`` as "1e999"; see :mod:`decomp.runtime.runs.jsonl`). A question
that is not text is given to a handler as its JSON text (``12``, ``[1, 2]``, ``true``) and to
a program as the value it is; a null one is the row's error when it runs.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decomp.runtime.runs.jsonl import Line, depth, parse_json, read_lines
from decomp.runtime.runs.scoring import drop_answer_strings

#: The deepest a row may nest (lists and objects inside each other, the row's own object, or a
#: DROP pair's fields, counted as the first level): deeper rows are row errors, so that no step,
#: trace or results line of the run meets a value too deep to write.
MAX_DEPTH = 100

_TOO_DEEP = f"the row nests deeper than {MAX_DEPTH} levels (lists or objects inside each other)"
_DROP_SKIPPED = frozenset({"answer", "query_id", "validated_answers", "question"})
_JSONL_SKIPPED = frozenset({"id", "answer"})


@dataclass(frozen=True)
class Row:
    """One dataset row.

    ``index`` is the 0-based position of the row among those read from the file (error rows
    included, blank lines not). ``fields`` are the row's inputs (``None`` for an error row);
    ``error`` is a plain-English message when the row could not be read; ``gold`` is the
    expected answer: the JSONL ``"answer"`` value as it is, or for DROP a list of
    alternatives, each a tuple of strings.
    """

    index: int
    id: str | None
    fields: dict | None
    error: str | None
    gold: Any = None


def read_rows(path: str | Path) -> Iterator[Row]:
    """Read the rows of a JSONL or DROP-style JSON dataset file.

    The file is read and its format detected at once: it is DROP-style when its first
    non-space character is ``{`` and the whole file is one JSON object whose values are all
    objects with a ``"qa_pairs"`` key; otherwise it is JSONL. Row problems become rows with
    ``error`` set. Whole-file problems raise: ``OSError`` when the file cannot be read,
    ``ValueError`` when it is one multi-line JSON value that is not DROP-style.
    """
    data = Path(path).read_bytes()
    drop = _parse_drop(data)
    if drop is not None:
        return _drop_rows(drop, str(path))
    return _jsonl_rows(data, str(path))


def window(rows: Iterable[Row], offset: int = 0, limit: int | None = None) -> Iterator[Row]:
    """The rows whose input position is at least `offset` and below `offset + limit` (every row
    from `offset` on when `limit` is None): `decomp run --offset K --limit N`. Positions are the
    input's, so a window and a shard (`--shard I/N`) pick the same rows in either order."""
    end = None if limit is None else offset + limit
    for row in rows:
        if row.index >= offset and (end is None or row.index < end):
            yield row
        elif end is not None and row.index >= end:
            return


# --- detection -------------------------------------------------------------------------------

def _parse_drop(data: bytes) -> dict | None:
    """The parsed DROP object, or None when the file is JSONL; raises for other JSON."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    if not text.lstrip().startswith("{"):
        return None
    try:
        parsed = parse_json(text)
    except (json.JSONDecodeError, RecursionError):  # JSONL, or a line too deep: that line's error
        return None
    if _is_drop(parsed):
        return parsed
    if sum(1 for line in text.split("\n") if line.strip()) > 1:
        raise ValueError(
            "the file is one JSON object spread over several lines, but not a DROP-style "
            "dataset ({pid: {\"passage\": ..., \"qa_pairs\": [...]}}); write JSONL instead, "
            "one row object per line")
    return None


def _is_drop(parsed: Any) -> bool:
    return (isinstance(parsed, dict) and bool(parsed)
            and all(isinstance(v, dict) and "qa_pairs" in v for v in parsed.values()))


# --- DROP ------------------------------------------------------------------------------------

def _drop_rows(drop: dict, file: str) -> Iterator[Row]:
    index = 0
    for pid, entry in drop.items():
        passage = entry.get("passage", "")
        pairs = entry["qa_pairs"]
        if not isinstance(pairs, list):
            yield Row(index, f"{pid}#qa_pairs", None, f"{file}: passage {pid!r}: 'qa_pairs' is not a list")
            index += 1
            continue
        for number, pair in enumerate(pairs):
            yield _drop_row(index, pid, number, passage, pair, file)
            index += 1


def _drop_row(index: int, pid: str, number: int, passage: Any, pair: Any, file: str) -> Row:
    where = f"{file}: passage {pid!r}, qa pair {number}"
    fallback_id = f"{pid}#{number}"
    if not isinstance(pair, dict):
        return Row(index, fallback_id, None, f"{where}: the qa pair is not a JSON object")
    row_id = fallback_id if pair.get("query_id") in (None, "") else str(pair["query_id"])
    if not isinstance(pair.get("question"), str):
        return Row(index, row_id, None, f"{where}: the qa pair has no 'question' string")
    answers = [pair.get("answer")] + list(pair.get("validated_answers") or [])
    if not all(isinstance(answer, dict) for answer in answers):
        return Row(index, row_id, None, f"{where}: an answer is missing or not a JSON object")
    fields = _drop_fields(pair, passage)
    if depth(fields, MAX_DEPTH) > MAX_DEPTH or depth(answers, MAX_DEPTH) > MAX_DEPTH:
        return Row(index, row_id, None, f"{where}: {_TOO_DEEP}")
    return Row(index, row_id, fields, None, [drop_answer_strings(answer) for answer in answers])


def _drop_fields(pair: dict, passage: Any) -> dict:
    fields = {"question": pair["question"], "context": passage}
    for key, value in pair.items():
        if key not in _DROP_SKIPPED and not isinstance(value, dict):
            fields[key] = value
    return fields


# --- JSONL -----------------------------------------------------------------------------------

def _jsonl_rows(data: bytes, file: str) -> Iterator[Row]:
    seen: dict[str, int] = {}
    for index, line in enumerate(read_lines(data, objects=True)):
        yield _jsonl_row(index, line, seen, file)


def _jsonl_row(index: int, line: Line, seen: dict[str, int], file: str) -> Row:
    """The row of one line; a problem is the row's error, at FILE:LINE."""
    fallback_id = f"line-{line.number}"
    record, error = line.value, line.error
    if error is None and depth(record, MAX_DEPTH) > MAX_DEPTH:
        error = _TOO_DEEP
    if error is None:
        row_id, error = _jsonl_id(record, fallback_id, seen)
    if error is not None:
        return Row(index, fallback_id, None, f"{file}:{line.number}: {error}")
    seen[row_id] = line.number
    fields = {key: value for key, value in record.items() if key not in _JSONL_SKIPPED}
    return Row(index, row_id, fields, None, record.get("answer"))


def _jsonl_id(record: dict, fallback_id: str, seen: dict[str, int]) -> tuple[str | None, str | None]:
    value = record.get("id")
    if value is None or value == "":
        row_id = fallback_id
    elif isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        row_id = str(value)
    else:
        return None, "the 'id' must be a string or an integer"
    if row_id in seen:
        return None, f"repeated id {row_id!r} (first on line {seen[row_id]})"
    return row_id, None
