"""Runs compared with confidence intervals (`decomp compare RUN_A RUN_B ...`): is method B better
than method A on this data, or is the difference noise?

For each metric the runs were scored with and each group of rows (`group_by`, a row field such
as TextCraft's `recipe_depth`), every run's score (the mean over its rows) with a bootstrap
interval, and for each run after the first (the baseline) the paired difference over the rows
both runs hold (matched by row id): its mean, a bootstrap confidence interval
(`scipy.stats.bootstrap`, `paired=True`) and a paired permutation p-value
(`scipy.stats.permutation_test`, `permutation_type="samples"`: each row's two scores swapped
or not), both drawn from a generator seeded with `seed` so a comparison repeats exactly.

Metrics, per row of a run directory's results.jsonl:

* the run's own metric (em, set_em, f1 or a plugin's: run.json's `metric`): the row's stored
  `score`, on rows with gold;
* `env_success`: 1.0 when every environment that judged the row says it succeeded (TextCraft),
  else 0.0, on rows an environment judged;
* `success`: 1.0 when the row answered with an ok outcome, else 0.0 (asked for by name);
* any other metric (`metrics=[...]`, a name, `module:function` or a function): the stored answer
  scored against the stored gold, as `decomp run` scores rows (a row in error scores 0), the
  metric called as docs/runs.md "The metric function" says (`function(row, answer, trace)` gets
  the input row when the run's data file is still there, else its id and gold, and the row's
  stored trace). A metric that is not decomp's own runs contained
  (`decomp.runtime.scoring.metrics.Scorer`, under `limits`): a row it fails on (raising, looping
  past its time limit, exhausting its memory, returning no finite number) scores 0 too, and the
  result's `metric_errors` names the run, the row and why.

A stored `score` that is not a finite number is a corrupt results line: reading the run is a
`RunDirError` naming the file and the line (`decomp.runtime.storage.result_lines`).

By default the metrics every run has are compared (its own metric when rows have gold,
`env_success` when environments judged them). A row in error counts (it scores 0, as in the run's
summary): the runs are compared on the rows they both hold, whatever each answered.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import NO_TRUST, Trust
from decomp.runtime.storage.datasets import read_rows
from decomp.runtime.storage.layout import SUMMARY
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.scoring.metric_calls import MetricError, MetricLimits
from decomp.runtime.scoring.metrics import Metric, RowToScore, Scorer, metric_name, metric_row
from decomp.runtime.storage.datasets import scalar_text

ENV_SUCCESS, SUCCESS = "env_success", "success"
METHODS = ("BCa", "percentile")
ALL = "all rows"


class CompareError(DecompError, ValueError):
    """Runs that cannot be compared (no scores, no metric in common, an unknown field)."""


@dataclass
class RunRows:
    """One run directory as the comparison reads it."""

    path: Path
    label: str
    metric: str | None  # the metric its rows' `score` holds (None: no row has gold)
    rows: dict[str, dict]  # row id -> results line
    summary: dict
    input_path: str | None = None

    def own_metrics(self) -> list[str]:
        """What this run was scored with: its metric (rows with gold), env_success (judged rows)."""
        found = [self.metric] if self.metric else []
        if any(_env_verdict(r) is not None for r in self.rows.values()):
            found.append(ENV_SUCCESS)
        return found


def read_run(path: str | Path, label: str | None = None) -> RunRows:
    """Read the run directory `path` (a `RunDirError` when it is none)."""
    run = RunDir.open(Path(path))
    rows = {_row_id(r): r for r in run.records()}
    scored = any("score" in r for r in rows.values())
    return RunRows(run.path, label or run.path.name, run.metric if scored else None, rows,
                   _summary(run), run.input_path)


def _row_id(record: dict) -> str:
    row_id = record.get("id")
    return f"#{record['index']}" if row_id in (None, "") else scalar_text(row_id)


def _summary(run: RunDir) -> dict:
    """The run's totals, with the summary.json figures (cost, ...) the totals do not hold."""
    summary = run.summary()
    try:
        written = json.loads((run.path / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        written = {}
    if isinstance(written, dict):
        summary.update({k: v for k, v in written.items() if k not in summary})
    return summary


def _env_verdict(record: dict) -> bool | None:
    verdicts = [s["success"] for s in (record.get("environment") or {}).values()
                if isinstance(s, dict) and "success" in s]
    return all(bool(v) for v in verdicts) if verdicts else None


def row_scores(run: RunRows, metric: str, scorer: Scorer | None = None,
               errors: list[dict] | None = None) -> dict[str, float]:
    """Row id -> the row's score under `metric` (rows the metric does not apply to left out).
    Rows scored again (`metric` is not the run's own) are scored by `scorer` (default: a new
    one, its limits the defaults); a row it fails on scores 0, its error added to `errors`."""
    scores: dict[str, float] = {}
    again: list[tuple[str, dict]] = []
    for row_id, record in run.rows.items():
        value = _row_score(run, record, metric)
        if value is _AGAIN:
            again.append((row_id, record))
            value = 0.0  # its place, in the rows' order (the bootstrap draws depend on it)
        if value is not None:
            scores[row_id] = value
    if again:
        scorer = scorer or Scorer(metric)
        found = scorer.score_rows(_to_score(run, again, scorer.wants_trace))
        for (row_id, _), value in zip(again, found):
            if isinstance(value, MetricError):
                if errors is not None:
                    errors.append({"metric": metric, "run": run.label, "row": row_id, "error": str(value)})
            else:
                scores[row_id] = value
    return scores


#: A row to score again with a metric that is not the run's own.
_AGAIN = object()


def _to_score(run: RunRows, again: list[tuple[str, dict]], traces: bool) -> list[RowToScore]:
    """What the metric sees of each row scored again: its answer and gold, its input row (when
    the run's data file is still there) and, for a metric that reads it, its stored trace."""
    inputs = _input_fields(run)
    found = []
    stored = RunDir.open(run.path) if traces else None
    try:
        for row_id, record in again:
            fields = {k: v for k, v in (inputs.get(record.get("index")) or {}).items() if k != "id"}
            tree = stored.trace(record["index"]) if stored is not None else None
            found.append(RowToScore(record.get("answer"), record["gold"], metric_row(row_id, fields, record["gold"]),
                                    None if tree is None else tree.to_dict(), f"row {row_id}"))
    finally:
        if stored is not None:
            stored.close()
    return found


def _row_score(run: RunRows, record: dict, metric: str) -> Any:
    if metric == ENV_SUCCESS:
        verdict = _env_verdict(record)
        return None if verdict is None else float(verdict)
    if metric == SUCCESS:
        return float("error" not in record and record.get("outcome", "ok") == "ok")
    if metric == run.metric and "score" in record:
        return float(record["score"])  # a finite number: `RunDir` refuses a line whose score is not one
    if record.get("gold") is None:
        return None
    if record.get("error") is not None:
        return 0.0
    return _AGAIN


def group_values(runs: list[RunRows], field: str) -> dict[str, str]:
    """Row id -> the row's `field` as text: the results line's own key, else an environment
    summary's (TextCraft: `recipe_depth`, `group`), else the input row's field (the data file
    run.json names, when it is still there). The first run that knows a row decides."""
    values: dict[str, str] = {}
    for run in runs:
        inputs: dict[int, dict] | None = None
        for row_id, record in run.rows.items():
            if row_id in values:
                continue
            value = _field(record, field)
            if value is None:
                inputs = _input_fields(run) if inputs is None else inputs
                value = (inputs.get(record.get("index")) or {}).get(field)
            if value is not None:
                values[row_id] = scalar_text(value)
    if not values:
        raise CompareError(f"no row of the runs has the field {field!r} (looked in the results lines, their "
                           "environment summaries and the input rows); TextCraft runs have recipe_depth and group")
    return values


def _field(record: dict, field: str) -> Any:
    if record.get(field) is not None and not isinstance(record.get(field), (dict, list)):
        return record[field]
    for summary in (record.get("environment") or {}).values():
        if isinstance(summary, dict) and summary.get(field) is not None:
            return summary[field]
    return None


def _input_fields(run: RunRows) -> dict[int, dict]:
    if not run.input_path or not Path(run.input_path).is_file():
        return {}
    try:
        return {row.index: {"id": row.id, **row.fields} for row in read_rows(run.input_path) if row.error is None}
    except (OSError, ValueError):
        return {}


# --- statistics ------------------------------------------------------------------------------

def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(y - x, axis=axis)


def _interval(data: tuple[np.ndarray, ...], statistic, paired: bool, seed: int, method: str,
              resamples: int, confidence: float) -> tuple[list[float] | None, str | None]:
    """A bootstrap interval of `statistic`, and a note when it is degenerate or fell back."""
    from scipy import stats

    spread = data[1] - data[0] if paired else data[0]
    if len(spread) < 2:
        return None, "fewer than 2 rows: no interval"
    if np.ptp(spread) == 0:
        value = float(statistic(*data))
        return [value, value], "every value is the same: the interval is a point"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BCa on few distinct values: handled below
        result = stats.bootstrap(data, statistic, paired=paired, vectorized=True, method=method,
                                 confidence_level=confidence, n_resamples=resamples,
                                 batch=_batch(len(spread), resamples), rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    if method != "percentile" and not (math.isfinite(low) and math.isfinite(high)):
        interval, _ = _interval(data, statistic, paired, seed, "percentile", resamples, confidence)
        return interval, f"{method} is undefined on these rows: percentile interval"
    return [float(low), float(high)], None


#: Resampled values held at once (8 bytes each): a run of 100,000 rows resamples in batches.
_MAX_CELLS = 4_000_000


def _batch(n: int, resamples: int) -> int | None:
    """Resamples per vectorized call: all at once for small data (None), else in batches."""
    return None if n * resamples <= _MAX_CELLS else max(1, _MAX_CELLS // max(n, 1))


def paired_difference(baseline: Iterable[float], other: Iterable[float], seed: int = 0, method: str = "BCa",
                      resamples: int = 9999, confidence: float = 0.95) -> dict:
    """The paired difference `other - baseline` (row by row, the same rows in the same order):
    n, its mean, a bootstrap confidence interval and a two-sided paired permutation p-value.
    Fewer than 2 rows: no interval and no p-value (a `note` says so); every difference equal:
    the interval is that difference (a point)."""
    a, b = np.asarray(list(baseline), dtype=float), np.asarray(list(other), dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired scores need as many rows on each side, not {a.size} and {b.size}")
    out: dict[str, Any] = {"n": int(a.size), "difference": float(np.mean(b - a)) if a.size else None}
    if a.size < 2:
        return {**out, "ci": None, "p_value": None, "note": f"{a.size} paired row(s): fewer than 2, no interval "
                                                             "or p-value"}
    ci, note = _interval((a, b), _mean_difference, True, seed, method, resamples, confidence)
    out.update(ci=ci, p_value=_permutation_p(a, b, seed, resamples))
    return {**out, "note": note} if note else out


def _permutation_p(a: np.ndarray, b: np.ndarray, seed: int, resamples: int) -> float:
    from scipy import stats

    result = stats.permutation_test((a, b), _mean_difference, permutation_type="samples", vectorized=True,
                                    n_resamples=resamples, alternative="two-sided",
                                    batch=_batch(a.size, resamples), rng=np.random.default_rng(seed))
    return float(result.pvalue)


def mean_score(values: Iterable[float], seed: int = 0, method: str = "BCa", resamples: int = 9999,
               confidence: float = 0.95) -> dict:
    """One run's score over some rows: n, the mean and a bootstrap interval of the mean."""
    v = np.asarray(list(values), dtype=float)
    out: dict[str, Any] = {"n": int(v.size), "score": float(np.mean(v)) if v.size else None}
    if not v.size:
        return {**out, "ci": None}
    ci, note = _interval((v,), np.mean, False, seed, method, resamples, confidence)
    return {**out, "ci": ci, **({"note": note} if note else {})}


# --- the comparison --------------------------------------------------------------------------

@dataclass
class Settings:
    """How the comparison is drawn: the bootstrap method, its seed, resamples and confidence."""

    seed: int = 0
    method: str = "BCa"
    resamples: int = 9999
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise CompareError(f"unknown bootstrap method {self.method!r}; use one of: {', '.join(METHODS)}")
        if not 0 < self.confidence < 1:
            raise CompareError(f"the confidence level is between 0 and 1, not {self.confidence}")
        if self.resamples < 1:
            raise CompareError(f"resamples is at least 1, not {self.resamples}")

    def stats(self) -> dict:
        return {"seed": self.seed, "method": self.method, "resamples": self.resamples, "confidence": self.confidence}


def compare_runs(paths: list[str | Path], metrics: list[Metric] | None = None, group_by: str | None = None,
                 settings: Settings | None = None, limits: MetricLimits | None = None,
                 trust: Trust = NO_TRUST) -> dict:
    """Compare the run directories `paths` (the first is the baseline): see the module's text.
    `metrics` None: those every run has (else names, `module:function`s or functions, each
    compared under its name, `metric_name`); `limits`: a contained metric's time and memory per row;
    `trust`: the modules a `module:function` metric may come from beyond the working folder (`--trust`).
    The result is JSON-ready: `runs` (label, path, metric, rows, calls and cost when the summary
    has them), `baseline`, the statistics' settings and `comparisons`, one per metric and group:
    each run's `scores` and the `differences` from the baseline; and `metric_errors` (metric,
    run, row, error: each row a metric failed on, scored 0) when there were any. A
    `CompareError` when the runs cannot be compared."""
    settings = settings or Settings()
    if len(paths) < 2:
        raise CompareError("compare needs at least two runs (the first is the baseline)")
    runs = [read_run(path, label) for path, label in zip(paths, run_labels(paths))]
    given = list(metrics) if metrics else common_metrics(runs)
    scorers = {metric_name(metric): Scorer(metric, limits=limits, trust=trust)  # an unknown one: named
               for metric in given if metric not in (ENV_SUCCESS, SUCCESS)}
    chosen = [metric_name(metric) for metric in given]
    groups = group_values(runs, group_by) if group_by else None
    comparisons: list[dict] = []
    errors: list[dict] = []
    for metric in chosen:
        scores = [row_scores(run, metric, scorers.get(metric), errors) for run in runs]
        _require_scores(runs, scores, metric)
        for group in [ALL, *sorted(set(groups.values()), key=_natural)] if groups else [ALL]:
            kept = [_in_group(s, groups, group) for s in scores]
            comparisons.append(_comparison(runs, kept, metric, group, settings))
    return {"runs": [_run_info(run) for run in runs], "baseline": runs[0].label, "group_by": group_by,
            **settings.stats(), "comparisons": comparisons, **({"metric_errors": errors} if errors else {})}


def run_labels(paths: list[str | Path]) -> list[str]:
    """A short label per run: its folder's name, made unique with its position when repeated."""
    names = [Path(p).name or str(p) for p in paths]
    return [f"{name}#{i + 1}" if names.count(name) > 1 else name for i, name in enumerate(names)]


def common_metrics(runs: list[RunRows]) -> list[str]:
    """The metrics every run was scored with, in the baseline's order."""
    for run in runs:
        if not run.own_metrics():
            raise CompareError(f"{run.path}: the run has no scores: no row has gold (a `score`) and no "
                               "environment judged its rows; run it on data with answers, or compare with "
                               "--metric success (rows answered with an ok outcome)")
    shared = [m for m in runs[0].own_metrics() if all(m in run.own_metrics() for run in runs[1:])]
    if not shared:
        said = "; ".join(f"{run.label}: {', '.join(run.own_metrics())}" for run in runs)
        raise CompareError(f"the runs have no metric in common ({said}); name one with --metric")
    return shared


def _require_scores(runs: list[RunRows], scores: list[dict[str, float]], metric: str) -> None:
    for run, found in zip(runs, scores):
        if not found:
            raise CompareError(f"{run.path}: no row of the run can be scored with {metric!r} (its rows have no "
                               f"gold{' and no environment judged them' if metric == ENV_SUCCESS else ''})")


def _in_group(scores: dict[str, float], groups: dict[str, str] | None, group: str) -> dict[str, float]:
    if group == ALL or groups is None:
        return scores
    return {row_id: value for row_id, value in scores.items() if groups.get(row_id) == group}


def _natural(text: str) -> tuple:
    """Groups in a natural order: `depth 2` before `depth 10`, numbers by value."""
    try:
        return (0, float(text), "")
    except ValueError:
        parts = text.rsplit(" ", 1)
        if len(parts) == 2:
            try:
                return (1, float(parts[1]), parts[0])
            except ValueError:
                pass
        return (2, 0.0, text)


def _comparison(runs: list[RunRows], scores: list[dict[str, float]], metric: str, group: str,
                settings: Settings) -> dict:
    options = dict(seed=settings.seed, method=settings.method, resamples=settings.resamples,
                   confidence=settings.confidence)
    shown = [{"run": run.label, **mean_score(found.values(), **options)} for run, found in zip(runs, scores)]
    base = scores[0]
    differences = []
    for run, found in zip(runs[1:], scores[1:]):
        shared = [row_id for row_id in base if row_id in found]
        paired = paired_difference([base[i] for i in shared], [found[i] for i in shared], **options)
        differences.append({"run": run.label, "vs": runs[0].label, **paired})
    return {"metric": metric, "group": group, "scores": shown, "differences": differences}


def _run_info(run: RunRows) -> dict:
    info: dict[str, Any] = {"label": run.label, "path": str(run.path), "metric": run.metric,
                            "rows": len(run.rows)}
    for key in ("calls", "cost"):
        value = run.summary.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            info[key] = value
    return info
