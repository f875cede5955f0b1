"""results.jsonl's lines judged one at a time: which line is a row, and what a row says, in
words and as text to compare."""
from __future__ import annotations

import json
import math
from typing import Any

from decomp.dsl.values import json_kind, printable
from decomp.runtime.engine import deepjson

#: How deeply a results line may nest (deeper: a damaged line).
MAX_LINE_DEPTH = deepjson.MAX_VALUE_DEPTH
#: Row positions a results line may hold (2**31 rows: a 256 MB bitmap at most, from a tampered file).
MAX_ROW_INDEX = 2**31


def is_row_index(value: object) -> bool:
    """Whether `value` is a row's position a results line may hold (an int in 0..MAX_ROW_INDEX)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_ROW_INDEX


def line_problem(line: Any) -> str | None:
    """Why a line of results.jsonl is no results line ('' when it just is not one), or None."""
    if line.error:
        return line.error
    if not is_row_index(line.value.get("index")):
        return "no row 'index'" if "index" not in line.value else "its 'index' is not a row's position"
    if deepjson.depth(line.value, MAX_LINE_DEPTH) > MAX_LINE_DEPTH:
        return f"nested more than {MAX_LINE_DEPTH} levels deep"
    if "score" in line.value and not _finite_number(line.value["score"]):
        score = line.value["score"]  # NaN and the infinities are read as the strings "NaN", "Infinity"
        what = (json.dumps(score[:40]) if isinstance(score, str) else json_kind(score)
                if isinstance(score, bool) or not isinstance(score, int) else "a number too large for a float")
        return f"its 'score' is {what}, not a finite number"
    return None


def _finite_number(value: Any) -> bool:
    """Whether `value` is a JSON number a float holds, finite (a bool is no number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer too large for a float
        return False


def comparable_result(record: dict) -> str:
    """What a user sees of a row, as comparable text: its answer, error and outcome."""
    return deepjson.dumps([record.get("answer"), record.get("error"), record.get("outcome")], default=str)


def said(record: dict) -> str:
    """A row's result in a few words: `answer "a c"`, `error: ...` (shortened)."""
    if record.get("error") is not None:
        text = f"error {deepjson.dumps(record['error'], default=str)}"
    else:
        text = f"answer {deepjson.dumps(record.get('answer'), default=str)}"
        if record.get("outcome") not in (None, "ok"):
            text += f" ({record['outcome']})"
    return text if len(text) <= 80 else text[:77] + "..."


def shown_id(record: dict) -> str:
    """A row's id as a message shows it (quoted, unprintable characters escaped)."""
    row_id = record.get("id")
    return repr(printable(row_id)) if isinstance(row_id, str) else repr(row_id)
