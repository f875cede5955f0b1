"""Reading dataset rows from JSONL, CSV or DROP-style JSON files, and writing rows held in
memory (a list of dicts, a pandas DataFrame) as JSONL.

Three formats are recognised (see :func:`read_rows`):

* JSONL: one JSON object per line with ``"id"`` and the inputs (``"question"``, or whatever
  the program's parameters are named; a missing one is that row's error when it runs);
  the ``"answer"`` field, when present, is the row's gold.
* CSV (a file named ``*.csv``): a header line naming the fields, then one row per record, its
  cells text; an empty cell is a missing field; ``id`` and ``answer`` as in JSONL.
* DROP-style JSON (the DecomP datasets): one object
  ``{pid: {"passage": str, "qa_pairs": [{"question", "answer", "query_id", ...}]}}``.

Rows in memory (`Program.run_dataset(rows)`) are written as JSONL by :func:`jsonl_text`:
an iterable of dicts (a list, a generator) or a pandas DataFrame, whose missing cells (NaN,
None, NaT, NA) are left out of their row, as a CSV file's empty cells are.

A bad row never stops the reading: it comes back as a :class:`Row` whose ``error`` says what
is wrong, at its place (``data.jsonl:3: not valid JSON (...)``), and the rows after it still
come. A row that nests deeper than :data:`MAX_DEPTH` levels (lists or objects inside each
other, the row's own object the first) is such an error row; so is a line too deep for the
JSON reader at all. What JSON has not is read as text (``NaN``, ``Infinity``, ``-Infinity``
as those strings, ``1e999`` as "1e999"; see :mod:`decomp.runtime.storage.jsonl`). A question
that is not text is given to a handler as its JSON text (``12``, ``[1, 2]``, ``true``) and to
a program as the value it is; a null one is the row's error when it runs.
"""
from __future__ import annotations

import csv
import io
import json
import math
import numbers
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decomp.dsl.errors import InputError
from decomp.runtime.storage.jsonl import Line, depth, parse_json, read_lines

#: The deepest a row may nest (lists and objects inside each other, the row's own object, or a
#: DROP pair's fields, counted as the first level): deeper rows are row errors, so that no step,
#: trace or results line of the run meets a value too deep to write.
MAX_DEPTH = 100

_TOO_DEEP = f"the row nests deeper than {MAX_DEPTH} levels (lists or objects inside each other)"
_DROP_SKIPPED = frozenset({"answer", "query_id", "validated_answers", "question"})
_JSONL_SKIPPED = frozenset({"id", "answer"})
#: What a dataset given in Python may be (`Program.run_dataset(data)`), for messages.
ACCEPTED = ("a JSONL, CSV or DROP-style JSON file's path, a list (or any iterable) of row dicts, "
            "or a pandas DataFrame")


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
    """Read the rows of a JSONL, CSV or DROP-style JSON dataset file.

    The file is read and its format detected at once: it is CSV when its name ends in ``.csv``
    (any case); DROP-style when its first non-space character is ``{`` and the whole file is
    one JSON object whose values are all objects with a ``"qa_pairs"`` key; otherwise it is
    JSONL. Row problems become rows with ``error`` set. Whole-file problems raise: ``OSError``
    when the file cannot be read, `InputError` (a ``ValueError``) when it is one multi-line JSON value that is
    not DROP-style, or a CSV file that is not UTF-8 or whose header is unusable.
    """
    data = Path(path).read_bytes()
    if Path(path).suffix.lower() == ".csv":
        return _csv_rows(data, str(path))
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
        raise InputError(
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
        row_id, error = _row_id(record, fallback_id, seen)
    if error is not None:
        return Row(index, fallback_id, None, f"{file}:{line.number}: {error}")
    seen[row_id] = line.number
    fields = {key: value for key, value in record.items() if key not in _JSONL_SKIPPED}
    return Row(index, row_id, fields, None, record.get("answer"))


def _row_id(record: dict, fallback_id: str, seen: dict[str, int]) -> tuple[str | None, str | None]:
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


# --- CSV -------------------------------------------------------------------------------------

def _csv_rows(data: bytes, file: str) -> Iterator[Row]:
    """The rows of a CSV file: each record a row, its line the one it starts on."""
    reader = csv.reader(io.StringIO(_csv_text(data, file), newline=""))
    header: list[str] | None = None
    seen: dict[str, int] = {}
    index = 0
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            cells = err
        if cells == []:
            continue  # a blank line
        if header is None:
            header = _csv_header(cells, f"{file}:{start}")
            continue
        yield _csv_row(index, start, cells, header, seen, file)
        index += 1


def _csv_text(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise InputError(f"{file}:{line}: the file is not UTF-8 text (byte {err.start}); save the CSV as "
                         "UTF-8") from None


def _csv_header(cells: list[str] | csv.Error, where: str) -> list[str]:
    if isinstance(cells, csv.Error):
        raise InputError(f"{where}: the header line is not readable as CSV ({cells})")
    names = [name.strip() for name in cells]
    for column, name in enumerate(names, start=1):
        if not name:
            raise InputError(f"{where}: column {column} of the header line has no name; the first line of a "
                             "CSV dataset names the fields")
        if names.index(name) + 1 != column:
            raise InputError(f"{where}: the header line names {name!r} twice (columns {names.index(name) + 1} "
                             f"and {column})")
    return names


def _csv_row(index: int, line: int, cells: list[str] | csv.Error, header: list[str], seen: dict[str, int],
             file: str) -> Row:
    """The row of one record; an empty cell is a field the row lacks."""
    fallback_id = f"line-{line}"
    if isinstance(cells, csv.Error):
        return Row(index, fallback_id, None, f"{file}:{line}: not readable as CSV ({cells})")
    if len(cells) != len(header):
        return Row(index, fallback_id, None, f"{file}:{line}: {len(cells)} cells, but the header line names "
                                             f"{len(header)} fields")
    record = {name: cell for name, cell in zip(header, cells) if cell != ""}
    row_id, error = _row_id(record, fallback_id, seen)
    if error is not None:
        return Row(index, fallback_id, None, f"{file}:{line}: {error}")
    seen[row_id] = line
    fields = {key: value for key, value in record.items() if key not in _JSONL_SKIPPED}
    return Row(index, row_id, fields, None, record.get("answer"))


# --- rows in memory --------------------------------------------------------------------------

def jsonl_text(dataset: Any, what: str = "dataset") -> str:
    """The rows of `dataset` as JSONL text, one row a line: a pandas DataFrame (its columns the
    fields, a missing cell left out of its row, its index not a field), or any iterable of
    dicts (a list, a generator). Numpy numbers are written as numbers, dates and times as ISO
    text. A `TypeError` names what is wrong and where: `dataset` of another kind, a row that is
    not a dict, a value JSON cannot hold (NaN in a dict: leave the field out); `what` the
    rows are in its messages ("dataset", "gold")."""
    return "".join(_json_row(number, row, what) for number, row in enumerate(_records(dataset, what)))


def _records(dataset: Any, what: str) -> Iterable[Mapping[str, Any]]:
    frame = _data_frame(dataset)
    if frame is not None:
        return _frame_records(frame)
    if isinstance(dataset, (str, bytes, Mapping)) or not isinstance(dataset, Iterable):
        kind = "one dict (a single row?)" if isinstance(dataset, Mapping) else type(dataset).__name__
        raise TypeError(f"{what} is {kind}; give {ACCEPTED}")
    return _dict_records(dataset, what)


def _dict_records(rows: Iterable[Any], what: str) -> Iterator[Mapping[str, Any]]:
    for number, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"{what} row {number} is {type(row).__name__}, not a dict of the row's fields "
                            "({'id': ..., 'question': ..., 'answer': ...})")
        yield row


def _data_frame(value: Any) -> Any:
    """`value` when it is a pandas DataFrame (pandas not imported: it cannot be one), else None."""
    pandas = sys.modules.get("pandas")
    return value if pandas is not None and isinstance(value, pandas.DataFrame) else None


def _frame_records(frame: Any) -> Iterator[dict[str, Any]]:
    names = list(frame.columns)
    for column, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"the DataFrame's column {column} is named {name!r}, a {type(name).__name__}: a "
                            "row's fields are named by strings (df.columns = df.columns.astype(str))")
        if names.index(name) != column:
            raise TypeError(f"the DataFrame has two columns named {name!r} (columns {names.index(name)} and "
                            f"{column})")
    for values in frame.itertuples(index=False, name=None):
        yield {name: value for name, value in zip(names, values) if not _missing(value)}


def _missing(value: Any) -> bool:
    """A DataFrame's empty cell: None, NaN, pandas' NA and NaT."""
    pandas = sys.modules["pandas"]
    return pandas.api.types.is_scalar(value) and bool(pandas.isna(value))


def _json_row(number: int, row: Mapping[str, Any], what: str) -> str:
    try:
        return json.dumps(dict(row), ensure_ascii=False, allow_nan=False, default=_plain) + "\n"
    except (TypeError, ValueError) as err:
        where = next((f", field {key!r}" for key, value in row.items() if _not_finite(value)), "")
        said = "NaN and infinities are not values JSON can hold (leave the field out)" if where else str(err)
        raise TypeError(f"{what} row {number}{where} cannot be written as JSON: {said}") from None


def _not_finite(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)


def _plain(value: Any) -> Any:
    """What `json` cannot write of a row's values: numpy numbers, dates and times."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise TypeError(f"a row's value cannot be of type {type(value).__name__} (text, numbers, true/false, null, "
                    "and lists and dicts of them)")


def scalar_text(value: Any) -> str:
    """A gold or predicted value as one string: a string as it is, None as "", a bool as
    true/false, a number as its str(), anything else as its JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, numbers.Number):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def drop_answer_strings(answer_json: Mapping[str, Any]) -> tuple[str, ...]:
    """The gold strings of a DROP answer object.

    The number when it is non-empty, else the spans when there are any, else the date as
    ``"day month year"`` (empty parts left out, so an empty date gives ``""``).
    """
    number = answer_json.get("number")
    if number not in (None, ""):
        return (str(number),)
    spans = answer_json.get("spans") or []
    if spans:
        return tuple(scalar_text(span) for span in spans)
    date = answer_json.get("date") or {}
    parts = (scalar_text(date.get(key)) for key in ("day", "month", "year"))
    return (" ".join(part for part in parts if part.strip()),)
