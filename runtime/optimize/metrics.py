"""How `decomp optimize` scores one row: a registered metric against the row's gold answer, the
row's outcome, or a function of the user's that sees the whole row and trace.

* `em`, `f1`, `set_em` (and the metrics plugins register): the row's score as `decomp run`
  gives it (the best over its gold alternatives; a row that ended in an error scores 0);
* `outcome`: 1 when the row answered with an ok outcome, else 0 (for programs judged by their
  own `ok(#n)` or environment, without gold);
* `module:function`: `function(row, answer, trace) -> float`, where `row` is the dataset row
  (its fields, `id` and `answer`), `answer` the program's and `trace` the row's trace as
  `TraceNode.to_dict()` gives it. Imported under the rules of Python handlers (its module in
  the working folder, or trusted). A function that raises, or returns something that is not
  a finite number, fails that row with the reason (`MetricError`); the rest go on.
"""
from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Callable

from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.datasets import Row
from decomp.runtime.runs.scoring import as_alternatives, best_score, known_metrics, metric_function


class MetricError(Exception):
    """The metric could not score a row (its message says why)."""


RowMetric = Callable[[Row, dict, TraceNode | None], float]


def row_metric(name: str, folder: Path | None = None) -> RowMetric:
    """The metric `name` as a function of (row, results record, trace) -> score; `ValueError`
    for a name that is none of the above (the message lists the known ones)."""
    if name == "outcome":
        return lambda row, record, trace: 1.0 if record.get("outcome", "ok") == "ok" and "error" not in record else 0.0
    if name in known_metrics():  # scored by best_score, as runs score their rows
        return lambda row, record, trace: _gold_score(name, row, record)
    if ":" not in name:
        raise ValueError(f"unknown metric {name!r}: use one of {', '.join(known_metrics())}, outcome, or "
                         "module:function (called as function(row, answer, trace) -> float)")
    function = metric_function(name, folder)
    return lambda row, record, trace: _called(name, function, row, record, trace)


def _gold_score(name: str, row: Row, record: dict) -> float:
    if row.gold is None:
        raise MetricError(f"row {row.id} has no gold answer for {name}")
    if "error" in record:
        return 0.0
    return best_score(record.get("answer"), as_alternatives(row.gold), name)


def _called(name: str, function, row: Row, record: dict, trace: TraceNode | None) -> float:
    fields = {"id": row.id, **(row.fields or {}), "answer": row.gold}
    try:
        value = function(fields, record.get("answer"), trace.to_dict() if trace is not None else None)
    except Exception as err:  # the user's code: any error fails this row only
        raise MetricError(f"metric {name} raised {type(err).__name__}: {err}") from err
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise MetricError(f"metric {name} returned {value!r}, not a finite number")
    return float(value)
