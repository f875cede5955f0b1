"""`decomp.compare`: `decomp compare` from Python, its figures as a `Comparison`.

    cmp = decomp.compare(run_a, run_b)          # Run objects or run directories; A is the baseline
    cmp                                        # the table `decomp compare` prints
    cmp.comparisons[0].differences[0].p_value  # every figure as an attribute
    cmp.to_pandas(), cmp.to_dict(), cmp.write_html("compare.html")

The comparison is `decomp.runtime.scoring.compare.compare_runs`'s, its table
`decomp.runtime.views.compare.format_table`'s and its page `write_html`'s.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from decomp.runtime.runs.api import RunSummary
from decomp.runtime.scoring.compare import Settings, compare_runs
from decomp.runtime.scoring.metric_calls import DEFAULT_METRIC_MEMORY_MB, DEFAULT_METRIC_TIMEOUT, MetricLimits
from decomp.runtime.runs.notebook import Run
from decomp.runtime.views.compare import format_table, write_html

__all__ = ["Comparison", "Difference", "MetricComparison", "RunInfo", "RunScore", "compare"]

#: What a run given to `compare` may be, for messages.
RUNS = "Run objects (Program.run_dataset, decomp.open_run) or run directories"


@dataclass(frozen=True)
class RunInfo:
    """One compared run: its label (its folder's name), path, own metric (None: no row has
    gold), rows, and calls and cost when its summary has them."""

    label: str
    path: str
    metric: str | None
    rows: int
    calls: int | None = None
    cost: float | None = None


@dataclass(frozen=True)
class RunScore:
    """One run's score under a metric, over a group of rows: the mean, its bootstrap interval
    (None with no rows), the rows scored, and a note when the interval is degenerate."""

    run: str
    score: float | None
    ci: tuple[float, float] | None
    n: int
    note: str | None = None


@dataclass(frozen=True)
class Difference:
    """A run's paired difference from the baseline `vs` over the rows both hold: the mean of
    (run - baseline), its bootstrap interval, the two-sided paired permutation p-value, the
    paired rows, and a note (fewer than 2 pairs: no interval nor p-value)."""

    run: str
    vs: str
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    n: int
    note: str | None = None


@dataclass(frozen=True)
class MetricComparison:
    """The runs compared on one metric and group of rows (`all rows`, or a value of `group_by`)."""

    metric: str
    group: str
    scores: tuple[RunScore, ...]
    differences: tuple[Difference, ...]


@dataclass(frozen=True, repr=False)
class Comparison:
    """What `decomp compare` prints, as objects: the `runs` (A the baseline), one
    `MetricComparison` per metric and group, the rows a metric failed on (`metric_errors`:
    metric, run, row, error; each scored 0) and the bootstrap's settings. Its repr is the table
    `decomp compare` prints; `to_dict()` is what `--json` prints."""

    runs: tuple[RunInfo, ...]
    baseline: str
    comparisons: tuple[MetricComparison, ...]
    metric_errors: tuple[dict[str, Any], ...]
    group_by: str | None
    seed: int
    method: str
    resamples: int
    confidence: float
    result: dict[str, Any]

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> "Comparison":
        """The comparison whose JSON-ready result (`compare_runs`') is `result`."""
        known = [f.name for f in dataclasses.fields(RunInfo)]
        return cls(runs=tuple(RunInfo(**{k: run.get(k) for k in known}) for run in result["runs"]), baseline=result["baseline"],
                   comparisons=tuple(_metric_comparison(c) for c in result["comparisons"]),
                   metric_errors=tuple(result.get("metric_errors", ())), group_by=result.get("group_by"),
                   seed=result["seed"], method=result["method"], resamples=result["resamples"],
                   confidence=result["confidence"], result=result)

    def table(self) -> str:
        """The table `decomp compare` prints (80 columns)."""
        return format_table(self.result)

    def __repr__(self) -> str:
        return self.table()

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `decomp compare --json` prints."""
        return self.result

    def write_html(self, path: str | Path, *, force: bool = False) -> Path:
        """The page `decomp compare --html PATH` writes (charts of the scores and differences);
        `FileExistsError` when `path` exists and not `force`. Returns its path."""
        write_html(self.result, Path(path), force=force)
        return Path(path)

    def to_pandas(self) -> Any:
        """One row per metric, group and run: its score and interval, and (not for the baseline)
        its difference from the baseline, interval, p-value and pairs (pandas is optional)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Comparison.to_pandas() needs pandas, which is not installed: pip install pandas") \
                from None
        return pandas.DataFrame([row for c in self.comparisons for row in _frame_rows(c)])


def compare(*runs: Run | RunSummary | str | Path | Iterable[Run | str | Path],
            metric: str | Callable[..., Any] | Iterable[str | Callable[..., Any]] | None = None,
            group_by: str | None = None, seed: int = 0, method: str = "BCa", resamples: int = 9999,
            confidence: float = 0.95, metric_timeout: float = DEFAULT_METRIC_TIMEOUT,
            metric_memory_mb: float = DEFAULT_METRIC_MEMORY_MB) -> Comparison:
    """Compare runs as `decomp compare RUN_A RUN_B ...` does: the first is the baseline.

    runs:      two or more `Run` objects or run directories (or one list of them)
    metric:    a metric or a list of them: em, set_em, f1, exact, a plugin's, `module:function`,
               a function (answers scored again against the runs' gold), env_success or
               success; None: the metrics every run has
    group_by:  also compare per value of this row field (TextCraft: recipe_depth)
    seed, method ("BCa" or "percentile"), resamples, confidence: the bootstrap's
    metric_timeout, metric_memory_mb: a contained metric's seconds and MiB per row

    Returns a `Comparison`. Raises `TypeError` for a run of another kind, `CompareError` (a
    `ValueError`) when the runs cannot be compared, `RunDirError` for a folder holding no run.
    """
    paths = [_run_path(run) for run in _flat(runs)]
    metrics = _metrics(metric)
    result = compare_runs(paths, metrics, group_by, Settings(seed, method, resamples, confidence),
                          MetricLimits(metric_timeout, metric_memory_mb))
    return Comparison.from_result(result)


def _flat(runs: tuple[Any, ...]) -> list[Any]:
    if len(runs) == 1 and isinstance(runs[0], (list, tuple)):
        return list(runs[0])
    return list(runs)


def _run_path(run: Any) -> Path:
    if isinstance(run, Run):
        return run.path
    if isinstance(run, RunSummary):
        return run.run_dir
    if isinstance(run, (str, Path)):
        if not Path(run).is_dir():
            raise FileNotFoundError(f"run {str(run)!r} is not a folder; compare takes {RUNS}")
        return Path(run)
    raise TypeError(f"compare takes {RUNS}, not {type(run).__name__}")


def _metrics(metric: Any) -> list[Any] | None:
    if metric is None:
        return None
    if isinstance(metric, str) or callable(metric):
        return [metric]
    return list(metric)


def _metric_comparison(found: dict[str, Any]) -> MetricComparison:
    scores = tuple(RunScore(s["run"], s["score"], _pair(s.get("ci")), s["n"], s.get("note"))
                   for s in found["scores"])
    differences = tuple(Difference(d["run"], d["vs"], d["difference"], _pair(d.get("ci")), d.get("p_value"), d["n"],
                                   d.get("note")) for d in found["differences"])
    return MetricComparison(found["metric"], found["group"], scores, differences)


def _pair(ci: list[float] | None) -> tuple[float, float] | None:
    return None if ci is None else (ci[0], ci[1])


def _frame_rows(comparison: MetricComparison) -> Iterable[dict[str, Any]]:
    differences = {d.run: d for d in comparison.differences}
    for score in comparison.scores:
        diff = differences.get(score.run)
        yield {"metric": comparison.metric, "group": comparison.group, "run": score.run, "score": score.score,
               "ci_low": score.ci[0] if score.ci else None, "ci_high": score.ci[1] if score.ci else None,
               "n": score.n, "difference": diff.difference if diff else None,
               "diff_ci_low": diff.ci[0] if diff and diff.ci else None,
               "diff_ci_high": diff.ci[1] if diff and diff.ci else None,
               "p_value": diff.p_value if diff else None, "pairs": diff.n if diff else None}
