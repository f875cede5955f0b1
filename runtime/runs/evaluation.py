"""Evaluation of files: predictions (an OUT.jsonl or a run directory) read and scored against a
gold data file with the metrics of `decomp.runtime.runs.scoring`, and success rates of runs
(`decomp eval`)."""
from __future__ import annotations

from pathlib import Path

from decomp.runtime.engine import deepjson
from decomp.runtime.runs.datasets import read_rows
from decomp.runtime.runs.jsonl import read_lines
from decomp.runtime.runs.rundir import MANIFEST, RESULTS, RunDir, outcomes
from decomp.runtime.runs.metric_calls import MetricLimits
from decomp.runtime.runs.scoring import METRICS, gold_by_id, metric_function, scalar_text, score_predictions

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
    a warning, and with another answer is a ``ValueError`` naming the id and both lines (a
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
            raise ValueError(f"{path}: id {row_id!r} is predicted twice with different answers: "
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
    path = Path(pred_path)
    folder = path if path.is_dir() else path.parent if path.name == RESULTS else None
    if folder is None or not (folder / MANIFEST).is_file():
        return None
    return RunDir.open(folder).metric


def evaluate_files(gold_path: str | Path | None, pred_path: str | Path, metric: str | None = None,
                   limits: MetricLimits | None = None) -> tuple[dict, list[str]]:
    """`evaluate` on a gold dataset file (JSONL or DROP-style JSON) and a predictions JSONL or
    `decomp run` run directory; also the warnings about prediction lines that were skipped and
    about the rows the metric failed on (each scored 0, counted in the summary's `metric_errors`).

    `metric` None: the run's own metric when `pred_path` is a run (its program's `metric`
    statement, recorded in run.json; see `run_metric`), else em. A metric that is not decomp's
    own runs contained, each row under `limits` (`decomp.runtime.runs.scoring.Scorer`).

    When some prediction failed its outcome or was judged by an environment (runs of programs
    whose steps can fail, such as ADaPT's), the success rates are added (`success_summary`);
    without gold only those are given."""
    if metric is None:
        metric = run_metric(pred_path) or "em"
    metric_function(metric)
    predictions = read_predictions(pred_path)
    judged = any(r.get("outcome") == "failed" or r.get("environment") for r in predictions.records.values())
    summary = success_summary(predictions) if judged or gold_path is None else {}
    if gold_path is not None:
        scored = score_predictions(gold_by_id(read_rows(gold_path)), predictions, metric, limits,
                                   errors=predictions.warnings)
        summary = {**scored, **summary}
    return summary, predictions.warnings
