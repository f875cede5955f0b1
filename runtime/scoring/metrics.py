"""Answer scoring in the manner of the DROP evaluator used by Decomposed Prompting.

Metrics:

* ``em``     -- exact match of the bags of normalised spans (DROP exact match).
* ``f1``     -- DROP F1: token-bag F1 per span, number matching, optimal one-to-one
  alignment of predicted and gold spans, rounded to two decimals.
* ``set_em`` -- order-free list answers: the prediction and the gold answer are both read
  as sets of normalised items (see :func:`split_items` for the splitting rule).
* ``exact``  -- strict exact match, no normalisation: the answer's text is the gold's.

A gold answer is a string or a list/tuple of strings (one answer made of several spans).
A row's gold is a list of *alternatives*, each such an answer; its score is the best over
the alternatives (see :func:`as_alternatives` and :func:`best_score`).

A program chooses the metric its dataset runs score rows with (`metric set_em` in the .decomp
file, or `metric my_metrics:close`; the names are `decomp.dsl.checker.METRIC_NAMES` and the
metrics plugins registered, checked when the module loads); run.json records it as written and
`decomp eval --pred RUN` uses it unless `--metric` is given (`run_metric` in
`decomp.runtime.scoring.evaluation`, which scores files: this module is pure metrics).

More metrics come from plugins (the `register_metrics` hook of `decomp.handlers.plugins`: this
module registers the four above through it), from a `module:function` path (`decomp eval
--metric mine:score`), imported under the trust rules of Python handlers
(:func:`metric_function`), or from a function given itself (the Python API). Every metric is
called by one rule, its form (`decomp.dsl.checker.metric_form`, docs/runs.md "The metric
function"): `function(row, answer, trace) -> float`, or `function(prediction, gold) -> float`
once per gold alternative (:class:`Scorer`). Such a metric is the user's code: a
:class:`Scorer` calls it contained, in a worker process under a deadline and a memory cap
(`decomp.runtime.scoring.metric_calls`), and anything it does wrong on a row (raising, `SystemExit`
too, looping, exhausting memory, returning no finite number) is that row's `MetricError`.

A prediction may be anything JSON can hold; :func:`coerce_answer` turns it into a string or
a list of strings: numbers become their text, ``None`` the empty string, a dict its JSON text.
"""
from __future__ import annotations

import json
import math
import numbers
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from decomp.dsl.checker import PAIR_FORM, ROW_FORM, metric_form
from decomp.dsl.errors import InputError
from decomp.handlers.sandbox.imports import DENIED_MODULES, find_module_file, import_function, module_allowance
from decomp.handlers.plugins import hookimpl
from decomp.handlers.sandbox.trust import NO_TRUST, TRUST_ENV, Trust
from decomp.runtime.engine.syncrun import run_sync
from decomp.runtime.storage.datasets import drop_answer_strings, scalar_text
from decomp.runtime.scoring.metric_calls import BATCH_ROWS, IN_FLIGHT, ContainedMetric, MetricError, MetricLimits, shown


_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_TOKEN_SPLIT = re.compile(" |-")
_ITEM_SPLIT = re.compile(r"[,\n]")

Answer = str | list[str]
Alternatives = list[tuple[str, ...]]


# --- normalisation ---------------------------------------------------------------------------

def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=1 << 16)  # answers repeat their tokens (letters, numbers, names)
def _normalize_token(token: str) -> str:
    token = token.lower()
    if not _is_number(token):
        token = "".join(ch for ch in token if ch not in _PUNCTUATION)
    if _is_number(token):
        token = str(float(token))
    token = _ARTICLES.sub(" ", token)
    return " ".join(token.split())


def normalize_answer(text: str) -> str:
    """Normalise one answer string the DROP way.

    Lower-case; split into tokens on spaces and hyphens; in each token remove punctuation
    unless the token is a number, write numbers as ``str(float(x))``, remove the articles
    a/an/the and collapse whitespace; drop empty tokens and join the rest with one space.
    ``"The Cat!"`` -> ``"cat"``, ``"1,000"`` -> ``"1000.0"``, ``"3"`` -> ``"3.0"``.
    """
    parts = (_normalize_token(token) for token in _TOKEN_SPLIT.split(text))
    return " ".join(part for part in parts if part.strip()).strip()


# --- turning answers into strings ------------------------------------------------------------

def coerce_answer(value: Any) -> Answer:
    """Turn any prediction or gold value into a string or a list of strings.

    A string stays as it is; ``None`` becomes ``""``; a number its ``str()``; a bool
    ``"true"``/``"false"``; a dict its JSON text. A list or tuple becomes a list of strings,
    each element converted the same way (a nested list or dict becomes its JSON text);
    an empty list is the empty answer ``""``.
    """
    if isinstance(value, (list, tuple)):
        return [scalar_text(item) for item in value] if value else ""
    return scalar_text(value)


def as_alternatives(gold: Any) -> Alternatives:
    """Read a row's gold value as a list of alternatives, each a tuple of strings.

    * a list whose elements are all lists/tuples (or DROP answer dicts): each is an alternative;
    * a DROP answer dict (keys among number/spans/date): one alternative, via
      :func:`drop_answer_strings`;
    * ``None`` or an empty list: no alternatives;
    * anything else (a string, a list of strings, a number...): one alternative, via
      :func:`coerce_answer`.
    """
    if gold is None or (isinstance(gold, (list, tuple)) and not gold):
        return []
    if isinstance(gold, list) and all(isinstance(g, (list, tuple, dict)) for g in gold):
        return [alt for g in gold for alt in as_alternatives(g)]
    if isinstance(gold, dict) and gold and set(gold) <= {"number", "spans", "date"}:
        return [drop_answer_strings(gold)]
    answer = coerce_answer(gold)
    return [tuple(answer) if isinstance(answer, list) else (answer,)]


# --- em and f1 -------------------------------------------------------------------------------

def _spans(answer: Any) -> list[str]:
    answer = coerce_answer(answer)
    return list(answer) if isinstance(answer, list) else [answer]


def _answer_to_bags(answer: Any) -> tuple[list[str], list[set[str]]]:
    normalized = [normalize_answer(span) for span in _spans(answer)]
    return normalized, [set(span.split()) for span in normalized]


def em(pred: Any, gold: Any) -> float:
    """Exact match: 1.0 when the normalised spans of ``pred`` and ``gold`` are the same set
    and there are as many of them; else 0.0. Each is a string or a list of strings."""
    pred_spans = [normalize_answer(span) for span in _spans(pred)]
    gold_spans = [normalize_answer(span) for span in _spans(gold)]
    same = set(pred_spans) == set(gold_spans) and len(pred_spans) == len(gold_spans)
    return 1.0 if same else 0.0


def _bag_f1(pred_bag: set[str], gold_bag: set[str]) -> float:
    common = len(pred_bag & gold_bag)
    precision = common / len(pred_bag) if pred_bag else 1.0
    recall = common / len(gold_bag) if gold_bag else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _numbers_match(gold_bag: set[str], pred_bag: set[str]) -> bool:
    gold_numbers = {word for word in gold_bag if _is_number(word)}
    pred_numbers = {word for word in pred_bag if _is_number(word)}
    return not gold_numbers or bool(gold_numbers & pred_numbers)


def _align_bags(pred_bags: list[set[str]], gold_bags: list[set[str]]) -> np.ndarray:
    scores = np.zeros((len(gold_bags), len(pred_bags)))
    for g, gold_bag in enumerate(gold_bags):
        for p, pred_bag in enumerate(pred_bags):
            if _numbers_match(gold_bag, pred_bag):
                scores[g, p] = _bag_f1(pred_bag, gold_bag)
    from scipy.optimize import linear_sum_assignment  # scipy takes ~1 s to import: only when scoring f1

    rows, cols = linear_sum_assignment(-scores)
    best = np.zeros(max(len(gold_bags), len(pred_bags)))
    for row, col in zip(rows, cols):
        best[row] = max(best[row], scores[row, col])
    return best


def f1(pred: Any, gold: Any) -> float:
    """DROP F1 between ``pred`` and ``gold`` (each a string or a list of strings).

    Each span is a bag (set) of normalised tokens; a predicted/gold pair scores its token F1,
    or 0 when the gold span holds numbers and the predicted span shares none of them. Spans
    are aligned one to one to maximise the total (``linear_sum_assignment``); the result is
    the mean over ``max(len(gold), len(pred))`` spans, rounded to 2 decimals.
    """
    _, pred_bags = _answer_to_bags(pred)
    _, gold_bags = _answer_to_bags(gold)
    return round(float(np.mean(_align_bags(pred_bags, gold_bags))), 2)


# --- set_em ----------------------------------------------------------------------------------

def split_items(answer: Any) -> set[str]:
    """The set of normalised items of a list answer (the rule :func:`set_em` uses).

    * a list or tuple: its elements are the items, each taken whole (not split further);
    * a string that parses as a JSON list (``'["a", "b"]'``): that list's elements;
    * any other string: split on commas and newlines (``"a, b\\nc"`` -> a, b, c).

    Each item is normalised with :func:`normalize_answer`; items that normalise to the empty
    string are dropped. Order and repeats do not matter.
    """
    answer = coerce_answer(answer)
    if isinstance(answer, str):
        answer = _string_items(answer)
    normalized = (normalize_answer(item) for item in answer)
    return {item for item in normalized if item}


def _string_items(text: str) -> list[str]:
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            parsed = json.loads(stripped)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list):
            return [scalar_text(item) for item in parsed]
    return _ITEM_SPLIT.split(text)


def _gold_items(gold: Any) -> set[str]:
    spans = _spans(gold)
    return split_items(spans[0] if len(spans) == 1 else spans)


def set_em(pred: Any, gold: Any) -> float:
    """Order-free exact match of list answers: 1.0 when the prediction's items equal the
    gold items as sets, else 0.0.

    The prediction's items come from :func:`split_items`. Gold with several spans uses the
    spans as its items; a gold that is a single string is split like a predicted string.
    """
    return 1.0 if split_items(pred) == _gold_items(gold) else 0.0


# --- exact -----------------------------------------------------------------------------------

def exact(pred: Any, gold: Any) -> float:
    """Strict exact match, with no normalisation at all: 1.0 when the answer's text is the gold's,
    character for character (case, spaces and punctuation count), else 0.0.

    A list answer matches a gold of several spans item by item, in order; any answer also
    matches a one-span gold equal to its text as :func:`scalar_text` renders it (a list as its
    JSON text, a number as ``str()``). ``'["PARIS", "TOKYO", "LIMA"]'`` against the gold
    ``"PARIS | TOKYO | LIMA"`` scores 0.0 here, and 1.0 with :func:`em`.
    """
    pred_spans, gold_spans = _spans(pred), _spans(gold)
    if pred_spans == gold_spans:
        return 1.0
    return 1.0 if len(gold_spans) == 1 and scalar_text(pred) == gold_spans[0] else 0.0


# --- scoring rows ----------------------------------------------------------------------------

#: The built-in metrics, registered through the plugin table like any other (`register_metrics`
#: below; the table at the top of the package, `decomp.plugins`, lists this module).
METRICS: dict[str, Callable[[Any, Any], float]] = {"em": em, "set_em": set_em, "f1": f1, "exact": exact}

#: A metric: its name (built-in, a plugin's, `module:function`) or a function of one's own.
Metric = str | Callable[..., Any]


@hookimpl
def register_metrics(register: Callable[..., Any]) -> None:
    """The built-in metrics em, set_em, f1 and exact."""
    for name, function in METRICS.items():
        register(name, function)


_imported: dict[tuple, Callable[..., Any]] = {}


def known_metrics() -> list[str]:
    """The metric names one may use: the built-ins and those plugins registered."""
    return sorted({*METRICS, *_registered()})


def _registered() -> dict[str, Callable[..., Any]]:
    from decomp.handlers.plugins import load

    return load().metrics


def metric_name(metric: Metric) -> str:
    """What a metric is called (in summaries, run.json, messages): its name as written; for a
    function given itself, `module:function` (`__main__:close` for one of a notebook)."""
    if isinstance(metric, str):
        return metric
    module = getattr(metric, "__module__", None) or "?"
    return f"{module}:{getattr(metric, '__qualname__', None) or type(metric).__name__}"


def unknown_metric(name: str, also: tuple[str, ...] = ()) -> str:
    """The message for a metric name that is none of the known ones (`also`: others the caller
    knows, such as optimize's `outcome`)."""
    return (f"unknown metric {name!r}; known metrics are: {', '.join([*known_metrics(), *also])} (or name a "
            f"function of your own as 'module:function': {ROW_FORM} or {PAIR_FORM}, returning a float)")


def metric_function(name: Metric, folder: str | Path | None = None, trust: Trust = NO_TRUST) -> Callable[..., Any]:
    """The metric `name`: a registered one (built-in or a plugin's `register_metrics`), or a
    `module:function` path, imported under the rules of Python handlers
    (`decomp.handlers.sandbox.imports`): its module's file in `folder` (default: the working folder) or
    a module `trust` trusts (`--trust MODULE`, `DECOMP_TRUST`); a function given itself is that
    function. An `InputError` (a `ValueError`) listing the known metrics otherwise. Either form of
    :func:`~decomp.dsl.checker.metric_form` is returned; :class:`Scorer` calls it by its form."""
    if callable(name):
        return name
    if not isinstance(name, str) or not name:
        raise InputError(f"a metric is named by a non-empty string, or is a function, not {name!r}")
    registered = _registered()
    if name in registered or name in METRICS:
        return registered.get(name) or METRICS[name]
    if ":" not in name:
        raise InputError(unknown_metric(name))
    folder = Path.cwd() if folder is None else Path(folder)
    key = (name, str(folder), trust.trusted_modules())
    if key not in _imported:
        _imported[key] = _import_metric(name, folder, trust)
    return _imported[key]


def _import_metric(name: str, folder: Path, trust: Trust) -> Callable[..., Any]:
    module = name.partition(":")[0]
    if module and module.split(".")[0] not in DENIED_MODULES and module_allowance(module, folder, trust=trust) is None \
            and find_module_file(module) is not None:
        top = module.partition(".")[0]
        raise InputError(f"metric {name!r} is not allowed: the module {module!r} is not in the folder "
                         f"{folder}, not registered and not trusted; trust it on purpose with --trust {top} "
                         f"or {TRUST_ENV}={top}, or register the metric in a plugin (register_metrics)")
    found = import_function(name, folder, trust=trust)
    if isinstance(found, str):
        raise InputError(f"metric {name!r}: {found}")
    return found


def best_score(pred: Any, alternatives: Alternatives, metric: Metric, limits: MetricLimits | None = None) -> float:
    """The best ``metric`` score of ``pred`` over the gold ``alternatives`` (a metric of the
    two-argument form: :func:`~decomp.dsl.checker.metric_form`).

    As in the official DROP evaluator, alternatives whose first string is empty are ignored,
    and a row with no alternative left (an empty gold answer) scores 0.0 whatever the
    prediction, an empty one included. A metric that is not decomp's own runs contained
    (:class:`Scorer`): a `MetricError` (a `ValueError`) says what it did wrong.
    """
    return Scorer(metric, limits=limits).best(pred, alternatives)


def kept_alternatives(alternatives: Alternatives) -> list[list[str]]:
    """The alternatives a row is scored against: those whose first string is not empty."""
    return [list(alt) for alt in alternatives if alt and alt[0].strip()]


@dataclass(frozen=True)
class RowToScore:
    """What a metric scores one row by (docs/runs.md, "The metric function"): the program's
    `answer` (the typed value the results line holds), the row's `gold` as the row gives it
    (None: it has none), the dataset `row` as the metric sees it (`metric_row`), the row's
    `trace` (`TraceNode.to_dict()`; None where none is kept) and how messages name the row."""

    answer: Any
    gold: Any = None
    row: dict | None = None
    trace: dict | None = None
    label: str = "the row"


def metric_row(row_id: Any, fields: Mapping[str, Any] | None, gold: Any) -> dict[str, Any]:
    """The dataset row as a metric function sees it: its fields, `id`, and `answer` (the gold)."""
    return {"id": row_id, **(fields or {}), "answer": gold}


class Scorer:
    """Scores rows with one metric, called as its form says (`decomp.dsl.checker.metric_form`):
    `function(row, answer, trace)` once per row, or `function(prediction, gold)` once per gold
    alternative, the row scoring the best (a row with no gold: a `MetricError`). Decomp's own
    (em, set_em, f1, exact) run in this process (decomp's code, its time bounded by the answers'
    size); any other (a plugin's, `module:function`, a function given itself) contained, each
    row under `limits` (`decomp.runtime.scoring.metric_calls`; a function no worker can import runs
    in a thread under the deadline). `InputError` (a `ValueError`) for an unknown or refused metric, or a
    function of neither form (`metric_function`, its module looked for in `folder`, default the
    working folder); scoring a row raises `MetricError` for what the metric did wrong on it."""

    def __init__(self, metric: Metric, folder: str | Path | None = None, limits: MetricLimits | None = None,
                 trust: Trust = NO_TRUST):
        self.metric = metric_name(metric)
        function = metric_function(metric, folder, trust)
        self.form = metric_form(function, self.metric)
        where = Path.cwd() if folder is None else Path(folder)
        self._own = function
        own = any(function is builtin for builtin in METRICS.values())
        self._contained = None if own else ContainedMetric(self.metric, function, limits, where)

    @property
    def wants_trace(self) -> bool:
        """Whether the metric sees the row's trace (a `function(row, answer, trace)`)."""
        return self.form == ROW_FORM

    def _calls(self, item: RowToScore) -> tuple[list[list[Any]], str] | float:
        """The row's calls of the function and what the row is, for messages; or its score when
        no call is needed (a pair metric on a gold with no alternative left: 0.0)."""
        if self.form == ROW_FORM:
            return [[item.row if item.row is not None else metric_row(None, None, item.gold), item.answer,
                     item.trace]], item.label
        if item.gold is None:
            raise MetricError(f"{item.label} has no gold answer, and metric {self.metric!r} compares the answer "
                              f"with the gold ({PAIR_FORM}); a {ROW_FORM} may score it")
        kept = kept_alternatives(as_alternatives(item.gold))
        if not kept:
            return 0.0
        gold = shown(kept[0] if len(kept) == 1 else kept)
        return [[item.answer, alt] for alt in kept], f"the prediction {shown(item.answer)} (gold {gold})"

    async def ascore(self, item: RowToScore) -> float:
        """One row's score, awaited (a contained metric's call does not block the loop)."""
        if self._contained is None:
            return self.score(item)
        calls = self._calls(item)
        return calls if isinstance(calls, float) else max(await self._contained.scores(*calls))

    def score(self, item: RowToScore) -> float:
        """One row's score."""
        if self._contained is not None:
            return run_sync(lambda: self.ascore(item))
        calls = self._calls(item)
        return calls if isinstance(calls, float) else max(_number(self.metric, self._own(*args)) for args in calls[0])

    def score_rows(self, items: list[RowToScore],
                   on_scored: Callable[[int], None] | None = None) -> list[float | MetricError]:
        """Each row's score, or the `MetricError` of that row; `on_scored(n)`, when given, is
        called as each `n` more rows are scored (a progress bar: `decomp.evaluate`)."""
        if self._contained is None:
            return [self._outcome(item, on_scored) for item in items]
        return run_sync(lambda: self.ascore_rows(items, on_scored))

    async def ascore_rows(self, items: list[RowToScore],
                          on_scored: Callable[[int], None] | None = None) -> list[float | MetricError]:
        """`score_rows`, awaited: a contained metric scores many rows to a request
        (`ContainedMetric.many`; with `on_scored`, as many rows at a time as are in flight)."""
        if self._contained is None:
            return [self._outcome(item, on_scored) for item in items]
        found: list[Any] = []
        for item in items:
            try:
                found.append(self._calls(item))
            except MetricError as err:
                found.append(err)
        todo = [i for i, calls in enumerate(found) if isinstance(calls, tuple)]
        step = BATCH_ROWS * IN_FLIGHT if on_scored is not None else max(len(todo), 1)
        if on_scored is not None and len(items) > len(todo):
            on_scored(len(items) - len(todo))  # scored without a call
        for start in range(0, len(todo), step):
            part = todo[start:start + step]
            for i, value in zip(part, await self._contained.many([found[i] for i in part])):
                found[i] = value if isinstance(value, MetricError) else max(value)
            if on_scored is not None:
                on_scored(len(part))
        return found

    def _outcome(self, item: RowToScore, on_scored: Callable[[int], None] | None = None) -> float | MetricError:
        try:
            return self.score(item)
        except MetricError as err:
            return err
        finally:
            if on_scored is not None:
                on_scored(1)

    def best(self, pred: Any, alternatives: Alternatives) -> float:
        """`best_score` of one row: `pred` against the gold `alternatives`."""
        return self.score(RowToScore(pred, alternatives))

    def best_of_rows(self, rows: list[tuple[Any, Alternatives]]) -> list[float | MetricError]:
        """`best_score` of each (prediction, alternatives), or the `MetricError` of that row."""
        return self.score_rows([RowToScore(pred, alternatives) for pred, alternatives in rows])


def _number(metric: str, value: Any) -> float:
    """A metric's result as a float; a `MetricError` naming the metric when it is no finite number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise MetricError(f"metric {metric!r} returned {value!r}, not a finite number (a metric returns a float, "
                          "usually between 0 and 1)")
    return float(value)


def score_predictions(gold_rows: Mapping[Any, Any], predictions: Mapping[Any, Any], metric: Metric | Scorer,
                      limits: MetricLimits | None = None, errors: list[str] | None = None, *,
                      rows: Mapping[str, dict] | None = None,
                      traces: Callable[[str], dict | None] | None = None,
                      on_scored: Callable[[int], None] | None = None) -> dict:
    """Score ``predictions`` against ``gold_rows`` with ``metric`` (em, set_em, f1, exact, a
    plugin's, ``module:function``, a function, or a :class:`Scorer`; any but decomp's own
    contained under ``limits``).

    ``gold_rows`` maps an id to its gold (anything :func:`as_alternatives` reads, usually a
    list of alternatives); ``predictions`` maps an id to an answer. Ids are compared as
    strings. A gold id without a prediction scores 0; predictions for unknown ids are ignored.
    A metric ``function(row, answer, trace)`` gets ``rows[id]`` (default: the id and gold) and
    ``traces(id)`` (default: None); ``on_scored(n)`` is called as `n` more rows are scored
    (:meth:`Scorer.score_rows`). A row the metric fails on scores 0 too, its message
    ("row ID: ...") added to ``errors``. Returns ``{"metric", "score" (mean, a float, 0.0 when
    there are no rows), "n", "missing"}``, and ``"metric_errors"`` (how many rows the metric
    failed on) when there were any.
    """
    scorer = metric if isinstance(metric, Scorer) else Scorer(metric, limits=limits)
    preds = {str(key): value for key, value in predictions.items()}
    ids = [row_id for row_id in gold_rows if str(row_id) in preds]
    scored = scorer.score_rows([_to_score(scorer, str(row_id), preds[str(row_id)], gold_rows[row_id], rows, traces)
                                for row_id in ids], on_scored)
    total, failed = 0.0, 0
    for row_id, score in zip(ids, scored):
        if isinstance(score, MetricError):
            failed += 1
            if errors is not None:
                errors.append(f"row {scalar_text(row_id)}: {score}")
        else:
            total += score
    n = len(gold_rows)
    result = {"metric": scorer.metric, "score": float(total / n) if n else 0.0, "n": n, "missing": n - len(ids)}
    return {**result, "metric_errors": failed} if failed else result


def _to_score(scorer: Scorer, row_id: str, answer: Any, gold: Any, rows: Mapping[str, dict] | None,
              traces: Callable[[str], dict | None] | None) -> RowToScore:
    row = (rows or {}).get(row_id) or metric_row(row_id, None, gold)
    trace = traces(row_id) if traces is not None and scorer.wants_trace else None
    return RowToScore(answer, gold, row, trace, f"row {row_id}")


def gold_by_id(rows: Any) -> dict[str, Any]:
    """Map id -> gold for dataset rows (``runtime.datasets.Row``), leaving out rows that
    carry an error or have no gold."""
    return {row.id: row.gold for row in rows if row.error is None and row.gold is not None}
