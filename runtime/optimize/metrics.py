"""How `decomp optimize` scores one row: a registered metric against the row's gold answer, the
row's outcome, or a function of the user's that sees the whole row and trace.

* `em`, `f1`, `set_em` (and the metrics plugins register): the row's score as `decomp run`
  gives it (the best over its gold alternatives; a row that ended in an error scores 0);
* `outcome`: 1 when the row answered with an ok outcome, else 0 (for programs judged by their
  own `ok(#n)` or environment, without gold);
* `module:function`: `function(row, answer, trace) -> float`, where `row` is the dataset row
  (its fields, `id` and `answer`), `answer` the program's and `trace` the row's trace as
  `TraceNode.to_dict()` gives it. Imported under the rules of Python handlers (its module in
  the working folder, or trusted).

A metric that is not decomp's own (a plugin's, `module:function`) is the user's code: it runs
contained, in a worker process under `MetricLimits` (`--metric-timeout`, `--metric-memory`; see
`decomp.runtime.runs.metric_calls`). One that raises (`SystemExit` and `KeyboardInterrupt` too),
runs past its time limit, exhausts its memory, kills its worker or returns something that is not
a finite number fails that row with the reason (`MetricError`); the rest go on.
"""
from __future__ import annotations

from pathlib import Path

from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.datasets import Row
from decomp.runtime.runs.metric_calls import ContainedMetric, MetricError, MetricLimits
from decomp.runtime.runs.scoring import Scorer, as_alternatives, known_metrics, metric_function

__all__ = ["MetricError", "RowMetric", "row_metric"]


class RowMetric:
    """One metric as a function of (row, results record, trace) -> score: `metric(row, record,
    trace)` (a `MetricError` when it cannot score the row), or many rows at once (`score_rows`)."""

    def __init__(self, name: str, folder: Path | None = None, limits: MetricLimits | None = None):
        self.name = name
        self._scorer: Scorer | None = None
        self._contained: ContainedMetric | None = None
        if name == "outcome":
            return
        if name in known_metrics():  # scored by a Scorer, as runs score their rows
            self._scorer = Scorer(name, folder, limits)
        elif ":" not in name:
            raise ValueError(f"unknown metric {name!r}: use one of {', '.join(known_metrics())}, outcome, or "
                             "module:function (called as function(row, answer, trace) -> float)")
        else:
            self._contained = ContainedMetric(name, metric_function(name, folder), limits, folder)

    def __call__(self, row: Row, record: dict, trace: TraceNode | None) -> float:
        return run_sync(lambda: self.ascore(row, record, trace))

    async def ascore(self, row: Row, record: dict, trace: TraceNode | None) -> float:
        """The row's score; a `MetricError` saying why there is none."""
        if self._scorer is None and self._contained is None:
            return 1.0 if record.get("outcome", "ok") == "ok" and "error" not in record else 0.0
        if self._scorer is not None:
            if row.gold is None:
                raise MetricError(f"row {row.id} has no gold answer for {self.name}")
            if "error" in record:
                return 0.0
            return await self._scorer.abest(record.get("answer"), as_alternatives(row.gold))
        return (await self._contained.scores([_call(row, record, trace)], f"row {row.id}"))[0]

    def score_rows(self, items: list[tuple[Row, dict, TraceNode | None]]) -> list[tuple[float | None, str | None]]:
        """(score, None) or (None, why) for each (row, record, trace); a contained metric scores
        many rows to a request (`ContainedMetric.many`)."""
        return run_sync(lambda: self._all(items))

    async def _all(self, items: list[tuple[Row, dict, TraceNode | None]]) -> list[tuple[float | None, str | None]]:
        if self._contained is not None:
            found = await self._contained.many([([_call(*item)], f"row {item[0].id}") for item in items])
            return [(None, str(value)) if isinstance(value, MetricError) else (value[0], None) for value in found]
        todo = [i for i, (row, record, _) in enumerate(items)
                if self._scorer is not None and row.gold is not None and "error" not in record]
        found = {}
        if todo:
            scored = await self._scorer.abest_of_rows([(items[i][1].get("answer"), as_alternatives(items[i][0].gold))
                                                        for i in todo])
            found = dict(zip(todo, scored))
        return [_outcome(found[i]) if i in found else await self._plain(item) for i, item in enumerate(items)]

    async def _plain(self, item: tuple[Row, dict, TraceNode | None]) -> tuple[float | None, str | None]:
        try:
            return await self.ascore(*item), None
        except MetricError as err:
            return None, str(err)


def _call(row: Row, record: dict, trace: TraceNode | None) -> list:
    """The arguments of `function(row, answer, trace)` for one row."""
    fields = {"id": row.id, **(row.fields or {}), "answer": row.gold}
    return [fields, record.get("answer"), trace.to_dict() if trace is not None else None]


def _outcome(value: float | MetricError) -> tuple[float | None, str | None]:
    return (None, str(value)) if isinstance(value, MetricError) else (value, None)


def row_metric(name: str, folder: Path | None = None, limits: MetricLimits | None = None) -> RowMetric:
    """The metric `name` as a `RowMetric`; `ValueError` for a name that is none of the above (the
    message lists the known ones) or a function that may not be imported."""
    return RowMetric(name, folder, limits)
