"""`decomp.evaluate`: `decomp eval` from Python, its figures as an `Evaluation`.

    ev = decomp.evaluate("gold.jsonl", run)                  # a Run, a run directory, a results file
    ev = decomp.evaluate(gold_frame, "runs/r1", metric="f1")  # gold rows in memory
    ev.score, ev.n, ev.missing, ev.to_pandas()

Everything is `decomp.runtime.scoring.evaluation.evaluate_files`'s work: gold rows given in memory
(a list of dicts, a DataFrame) are written to a temporary JSONL file for it
(`datasets.jsonl_text`), and removed after.
"""
from __future__ import annotations

import dataclasses
import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from decomp.runtime.runs.api import RunSummary
from decomp.runtime.runs.bars import counting
from decomp.runtime.storage.datasets import ACCEPTED, jsonl_text
from decomp.runtime.scoring.evaluation import evaluate_files
from decomp.runtime.scoring.metric_calls import DEFAULT_METRIC_MEMORY_MB, DEFAULT_METRIC_TIMEOUT, MetricLimits
from decomp.runtime.runs.notebook import Run

__all__ = ["Evaluation", "evaluate"]

#: What predictions may be, for messages.
PREDICTIONS = "a Run (Program.run_dataset or decomp.open_run), a run directory, or a results JSONL file ({id, answer} lines)"


@dataclass(frozen=True)
class Evaluation:
    """The figures `decomp eval` prints (its JSON object is `summary`), as attributes; a figure
    the evaluation has not (no gold: no score; no failed or judged rows: no success rates) is
    None.

    metric, score, n, missing, metric_errors: with gold, the metric, the mean score over the
        gold rows (a gold row without a prediction scores 0), how many gold rows, how many of
        them had no prediction, how many rows the metric failed on (each scored 0)
    rows, errors, success_rate, failed_outcome, env_success_rate, calls_per_row, by_group:
        without gold, or when some row failed its outcome or an environment judged it: the
        success rates over the predicted rows (by_group: the same per group)
    warnings: one message per prediction line skipped or repeated, and per row the metric
        failed on (`decomp eval` prints them on stderr)
    """

    metric: str | None = None
    score: float | None = None
    n: int | None = None
    missing: int | None = None
    metric_errors: int = 0
    rows: int | None = None
    errors: int | None = None
    success_rate: float | None = None
    failed_outcome: int | None = None
    env_success_rate: float | None = None
    calls_per_row: float | None = None
    by_group: dict[str, dict[str, Any]] | None = None
    warnings: tuple[str, ...] = ()
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_summary(cls, summary: dict[str, Any], warnings: list[str] | tuple[str, ...] = ()) -> "Evaluation":
        """The evaluation whose `decomp eval` object is `summary`."""
        figures = {f.name: summary[f.name] for f in dataclasses.fields(cls) if f.name in summary}
        return cls(**figures, warnings=tuple(warnings), summary=dict(summary))

    def __repr__(self) -> str:
        shown = [f"{f.name}={_said(getattr(self, f.name))}" for f in dataclasses.fields(self)
                 if f.name not in ("warnings", "summary", "by_group") and getattr(self, f.name) is not None
                 and not (f.name == "metric_errors" and not self.metric_errors)]
        groups = [f"by_group=<{len(self.by_group)} groups>"] if self.by_group else []
        warned = [f"warnings={len(self.warnings)}"] if self.warnings else []
        return f"Evaluation({', '.join(shown + groups + warned)})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON object `decomp eval` prints."""
        return dict(self.summary)

    def to_pandas(self) -> Any:
        """The figures as a pandas DataFrame (pandas is optional: `pip install pandas`): one row
        for all rows, and one per group when the rows have groups; indexed by `group`."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Evaluation.to_pandas() needs pandas, which is not installed: pip install pandas") \
                from None
        flat = {key: value for key, value in self.summary.items() if key != "by_group"}
        rows = [{"group": "all rows", **flat}]
        rows += [{"group": name, **figures} for name, figures in (self.by_group or {}).items()]
        return pandas.DataFrame(rows).set_index("group")


def evaluate(gold: Any, predictions: Run | RunSummary | str | Path, metric: str | Callable[..., Any] | None = None,
             *, metric_timeout: float = DEFAULT_METRIC_TIMEOUT,
             metric_memory_mb: float = DEFAULT_METRIC_MEMORY_MB, progress: bool | None = None) -> Evaluation:
    """Score `predictions` against `gold`, as `decomp eval --gold GOLD --pred PRED` does.

    gold:        a JSONL, CSV or DROP-style JSON file, or rows in memory (a list or any
                 iterable of dicts, a pandas DataFrame: each with `id` and `answer`, as a JSONL
                 file's lines); None: success rates only (`decomp eval --pred RUN`)
    predictions: a `Run`, a run directory, or a results JSONL file of {id, answer} lines
    metric:      em, set_em, f1, a plugin's metric, `module:function`, or a function (called
                 as docs/runs.md "The metric function" says); None: the run's own metric when
                 `predictions` is a run, else em
    metric_timeout, metric_memory_mb: the seconds and MiB one row's scoring may take with a
                 metric that is not decomp's own (it runs contained; `--metric-timeout`,
                 `--metric-memory`): a row it fails on scores 0, counted in `metric_errors`
    progress:    a bar of the rows scored, on stderr: None, in a Jupyter kernel or when stderr
                 is a terminal; True always; False never (tqdm's when it is installed)

    Returns an `Evaluation`. Raises `TypeError` for gold or predictions of another kind,
    `FileNotFoundError` for a path that does not exist, `ValueError` for an unknown metric or
    an unusable file, `RunDirError` for a folder that holds no run.
    """
    pred_path = _predictions_path(predictions)
    limits = MetricLimits(metric_timeout, metric_memory_mb)
    bar = functools.partial(counting, what="rows scored", progress=progress)
    if gold is None or isinstance(gold, (str, Path)):
        gold_path = None if gold is None else _existing(gold, "gold", ACCEPTED)
        return Evaluation.from_summary(*evaluate_files(gold_path, pred_path, metric, limits, bar))
    text = jsonl_text(gold, "gold")
    with tempfile.TemporaryDirectory(prefix="decomp-gold-") as folder:
        gold_path = Path(folder) / "gold.jsonl"
        gold_path.write_text(text, encoding="utf-8")
        return Evaluation.from_summary(*evaluate_files(gold_path, pred_path, metric, limits, bar))


def _predictions_path(predictions: Any) -> Path:
    if isinstance(predictions, Run):
        return predictions.path
    if isinstance(predictions, RunSummary):
        return predictions.run_dir
    if isinstance(predictions, (str, Path)):
        return _existing(predictions, "predictions", PREDICTIONS)
    raise TypeError(f"predictions are {type(predictions).__name__}; give {PREDICTIONS}")


def _existing(path: str | Path, what: str, accepted: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist; give {accepted}")
    return path


def _said(value: Any) -> str:
    return repr(round(value, 4)) if isinstance(value, float) else repr(value)
