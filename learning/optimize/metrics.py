"""How `decomp optimize` scores one row: a metric called as every command calls it, or the row's
outcome.

* `em`, `f1`, `set_em`, `exact`, the metrics plugins register and `module:function` (imported
  under the rules of Python handlers: its module in the working folder, or trusted): called as
  docs/runs.md "The metric function" says (`decomp.dsl.checker.metric_form`):
  `function(row, answer, trace) -> float`, where `row` is the dataset row (its fields, `id` and
  `answer`), `answer` the program's and `trace` the row's trace as `TraceNode.to_dict()` gives
  it; or `function(prediction, gold) -> float` once per gold alternative, the row scoring the
  best (a row with no gold fails). A row that ended in an error scores 0, as in `decomp run`;
* `outcome`: 1 when the row answered with an ok outcome, else 0 (for programs judged by their
  own `ok(#n)` or environment, without gold).

A metric that is not decomp's own (a plugin's, `module:function`) is the user's code: it runs
contained, in a worker process under `MetricLimits` (`--metric-timeout`, `--metric-memory`; see
`decomp.runtime.scoring.metric_calls`). One that raises (`SystemExit` and `KeyboardInterrupt` too),
runs past its time limit, exhausts its memory, kills its worker or returns something that is not
a finite number fails that row with the reason (`MetricError`); the rest go on.
"""
from __future__ import annotations

from pathlib import Path

from decomp.dsl.errors import InputError
from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.datasets import Row
from decomp.runtime.scoring.metric_calls import MetricError, MetricLimits
from decomp.runtime.scoring.metrics import (Metric, RowToScore, Scorer, known_metrics, metric_name, metric_row,
                                         unknown_metric)

__all__ = ["MetricError", "RowMetric", "row_metric"]

#: The metric that scores a row by its outcome, not its answer.
OUTCOME = "outcome"


class RowMetric:
    """One metric as a function of (row, results record, trace) -> score: `metric(row, record,
    trace)` (a `MetricError` when it cannot score the row), or many rows at once (`score_rows`)."""

    def __init__(self, name: Metric, folder: Path | None = None, limits: MetricLimits | None = None,
                 trust: Trust = NO_TRUST):
        self.name = metric_name(name)
        self._scorer: Scorer | None = None
        if name == OUTCOME:
            return
        if isinstance(name, str) and ":" not in name and name not in known_metrics():
            raise InputError(unknown_metric(name, also=(OUTCOME,)))
        self._scorer = Scorer(name, folder, limits, trust)

    def __call__(self, row: Row, record: dict, trace: TraceNode | None) -> float:
        return run_sync(lambda: self.ascore(row, record, trace))

    async def ascore(self, row: Row, record: dict, trace: TraceNode | None) -> float:
        """The row's score; a `MetricError` saying why there is none."""
        if self._scorer is None:
            return 1.0 if record.get("outcome", "ok") == "ok" and "error" not in record else 0.0
        if "error" in record:
            return 0.0
        return await self._scorer.ascore(self._item(row, record, trace))

    def _item(self, row: Row, record: dict, trace: TraceNode | None) -> RowToScore:
        tree = trace.to_dict() if trace is not None and self._scorer.wants_trace else None
        return RowToScore(record.get("answer"), row.gold, metric_row(row.id, row.fields, row.gold), tree,
                          f"row {row.id}")

    def score_rows(self, items: list[tuple[Row, dict, TraceNode | None]]) -> list[tuple[float | None, str | None]]:
        """(score, None) or (None, why) for each (row, record, trace); a contained metric scores
        many rows to a request (`ContainedMetric.many`)."""
        return run_sync(lambda: self._all(items))

    async def _all(self, items: list[tuple[Row, dict, TraceNode | None]]) -> list[tuple[float | None, str | None]]:
        if self._scorer is None:
            return [(await self.ascore(*item), None) for item in items]
        todo = [i for i, (_, record, _) in enumerate(items) if "error" not in record]
        scored = await self._scorer.ascore_rows([self._item(*items[i]) for i in todo])
        found = dict(zip(todo, scored))
        return [_outcome(found.get(i, 0.0)) for i in range(len(items))]


def _outcome(value: float | MetricError) -> tuple[float | None, str | None]:
    return (None, str(value)) if isinstance(value, MetricError) else (value, None)


def row_metric(name: Metric, folder: Path | None = None, limits: MetricLimits | None = None,
               trust: Trust = NO_TRUST) -> RowMetric:
    """The metric `name` (or a function) as a `RowMetric`, a `module:function` imported when local
    or trusted by `trust`; `ValueError` for a name that is none of the above (the message lists
    the known ones), a function that may not be imported, or one of neither form."""
    return RowMetric(name, folder, limits, trust)
