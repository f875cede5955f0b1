"""Evaluation of files: predictions (an OUT.jsonl or a run directory) read and scored against a
gold data file with the metrics of `decomp.runtime.scoring.metrics`, and success rates of runs
(`decomp eval`)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, ContextManager

from decomp.dsl.errors import InputError
from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.runtime.engine import deepjson
from decomp.runtime.storage.datasets import read_rows
from decomp.runtime.storage.jsonl import read_lines
from decomp.runtime.storage.layout import MANIFEST, RESULTS
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.storage.summary import outcomes
from decomp.runtime.scoring.metric_calls import MetricLimits
from decomp.runtime.scoring.metrics import METRICS, Metric, Scorer, metric_row, score_predictions
from decomp.runtime.storage.datasets import scalar_text

__all__ = ["METRICS", "Predictions", "evaluate_files", "read_predictions", "run_metric", "success_summary"]


class Predictions(dict):
    """A dict id -> answer, with ``warnings``: one message per skipped or overridden line."""

    def __init__(self) -> None:
        super().__init__()
        self.warnings: list[str] = []
        #: The whole line of each id (its outcome, environment summaries, usage).
        self.records: dict[str, dict] = {}
        #: Where each id was first predicted ("line 3", "row 2").
        self.where: dict[str, str] = {}


def read_predictions(path: str | Path) -> Predictions:
    """Read an OUT.jsonl file of ``{"id", "answer", "error"?}`` lines into id -> answer, or
    the results of a `decomp run` run directory (its complete results.jsonl lines, read as
    `RunDir` reads them: a half-written last line of a killed run is left out).

    A line whose ``error`` is set counts as a prediction whose answer is ``None``. Blank lines
    are skipped silently. Malformed lines (not JSON, not an object, no id) are skipped, each
    with a message in the result's ``warnings`` list; an id repeated with the same answer adds
    a warning, and with another answer is an `InputError` (a ``ValueError``) naming the id and both lines (a
    score must come from answers one can tell apart). Ids are turned into strings. A file that
    cannot be read raises ``OSError``; a folder that holds no run, ``RunDirError`` (a run whose
    results.jsonl holds a row twice with different results too).
    """
    result = Predictions()
    path = Path(path)
    if path.is_dir():

        run = RunDir.open(path)
        for record in run.records():
            _add_prediction(result, record, f"row {record.get('index')}", run.path / RESULTS)
        return result
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    for line in read_lines(text, objects=True):
        if line.error:
            result.warnings.append(line.problem)
        else:
            _add_prediction(result, line.value, f"line {line.number}", path)
    return result


def _add_prediction(result: Predictions, record: dict, where: str, path: Path) -> None:
    if record.get("id") in (None, ""):
        result.warnings.append(f"{where}: the line has no 'id'")
        return
    row_id = scalar_text(record["id"])
    answer = None if record.get("error") else record.get("answer")
    if row_id in result:
        if _said(answer) != _said(result[row_id]):
            raise InputError(f"{path}: id {row_id!r} is predicted twice with different answers: "
                             f"{result.where[row_id]} says {_said(result[row_id], 60)}, {where} says "
                             f"{_said(answer, 60)}; keep the line you mean")
        result.warnings.append(f"{where}: repeated id {row_id!r} (first on {result.where[row_id]}), "
                               "with the same answer")
    else:
        result.where[row_id] = where
    result[row_id] = answer
    result.records[row_id] = record


def _said(answer: object, width: int | None = None) -> str:
    """An answer as JSON text (any depth), cut to `width` characters when given."""
    text = deepjson.dumps(answer, default=str)
    return text if width is None or len(text) <= width else text[:width - 3] + "..."


def success_summary(predictions: Predictions) -> dict:
    """Success over the predicted rows, as a run's summary gives it (`success_rate`,
    `failed_outcome`, `env_success_rate`, `by_group`, `calls_per_row`) plus `errors`."""
    records = list(predictions.records.values())
    return {"rows": len(records), "errors": sum(bool(r.get("error")) for r in records), **outcomes(records)}


def run_metric(pred_path: str | Path) -> str | None:
    """The metric recorded by the run whose predictions are at `pred_path` (a run directory, or
    the results.jsonl inside one): the program's `metric`, em for runs that recorded none.
    None for any other file (an `--output` JSONL, a predictions file of one's own)."""
    folder = _run_folder(pred_path)
    return None if folder is None else RunDir.open(folder).metric


def _run_folder(pred_path: str | Path) -> Path | None:
    """The run directory `pred_path` is (or holds the results.jsonl of); None for another file."""
    path = Path(pred_path)
    folder = path if path.is_dir() else path.parent if path.name == RESULTS else None
    return folder if folder is not None and (folder / MANIFEST).is_file() else None


def _program_folder(pred_path: str | Path) -> Path | None:
    """The folder of the program the run at `pred_path` ran (where its `metric module:function`
    is imported from); None when it is no run."""
    folder = _run_folder(pred_path)
    program = RunDir.open(folder).program_path if folder is not None else None
    return Path(program).parent if program else None


def evaluate_files(gold_path: str | Path | None, pred_path: str | Path, metric: Metric | None = None,
                   limits: MetricLimits | None = None, progress: Callable[[int], ContextManager[Any]] | None = None,
                   trust: Trust = NO_TRUST) -> tuple[dict, list[str]]:
    """`evaluate` on a gold dataset file (JSONL or DROP-style JSON) and a predictions JSONL or
    `decomp run` run directory; also the warnings about prediction lines that were skipped and
    about the rows the metric failed on (each scored 0, counted in the summary's `metric_errors`).

    `metric`: a name (em, exact, a plugin's, `module:function` of the working folder) or a
    function, called as docs/runs.md "The metric function" says: `function(row, answer, trace)`
    gets the gold file's row (its fields, `id`, `answer`), the prediction and the row's trace
    (from the run directory; None for a predictions file), `function(prediction, gold)` each
    gold alternative. None: the run's own metric when `pred_path` is a run (its program's
    `metric` statement, recorded in run.json, a `module:function` imported from the program's
    folder; see `run_metric`), else em. A metric that is not decomp's own runs contained, each
    row under `limits` (`decomp.runtime.scoring.metrics.Scorer`); a `module:function` outside the
    folder is imported only when `trust` trusts its module (`--trust`). `InputError` for a metric that
    cannot be used, before anything is read. `progress(total)`, when given, is a context
    manager around the scoring of the `total` predicted gold rows, yielding what to call with
    how many more are scored (`decomp.evaluate`'s bar, `decomp.runtime.runs.bars.counting`).

    When some prediction failed its outcome or was judged by an environment (runs of programs
    whose steps can fail, such as ADaPT's), the success rates are added (`success_summary`);
    without gold only those are given."""
    folder = None
    if metric is None:
        metric, folder = run_metric(pred_path) or "em", _program_folder(pred_path)
    scorer = Scorer(metric, folder, limits, trust)
    predictions = read_predictions(pred_path)
    judged = any(r.get("outcome") == "failed" or r.get("environment") for r in predictions.records.values())
    summary = success_summary(predictions) if judged or gold_path is None else {}
    if gold_path is not None:
        rows = [row for row in read_rows(gold_path) if row.error is None and row.gold is not None]
        seen = {row.id: metric_row(row.id, row.fields, row.gold) for row in rows}
        traces = _RunTraces(pred_path, predictions) if scorer.wants_trace else None
        bar = progress(sum(row.id in predictions for row in rows)) if progress else contextlib.nullcontext()
        try:
            with bar as on_scored:
                scored = score_predictions({row.id: row.gold for row in rows}, predictions, scorer,
                                           errors=predictions.warnings, rows=seen, traces=traces,
                                           on_scored=on_scored)
        finally:
            if traces is not None:
                traces.close()
        summary = {**scored, **summary}
    return summary, predictions.warnings


class _RunTraces:
    """Row id -> the row's trace as `TraceNode.to_dict()` gives it, read from the run directory
    of `pred_path` (None for a predictions file, or a row with no trace kept)."""

    def __init__(self, pred_path: str | Path, predictions: Predictions):
        folder = _run_folder(pred_path)
        self.run = RunDir.open(folder) if folder is not None else None
        self.predictions = predictions

    def __call__(self, row_id: str) -> dict[str, Any] | None:
        index = self.predictions.records.get(row_id, {}).get("index")
        if self.run is None or not isinstance(index, int):
            return None
        tree = self.run.trace(index)
        return None if tree is None else tree.to_dict()

    def close(self) -> None:
        if self.run is not None:
            self.run.close()
