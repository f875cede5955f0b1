"""A run's summary statistics: totals over its results lines (rows, score, outcomes, usage),
taken in one line at a time."""
from __future__ import annotations

import math
from typing import Iterable

from decomp.runtime.engine.budgets import Usage


def summarize(records: Iterable[dict], manifest: dict) -> dict:
    """The run's totals over its complete rows (all sessions): rows, failed (rows in error),
    score (mean over rows with gold) and its metric, scored_rows, the `outcomes`, usage
    (calls: model requests; cache hits, handler_calls of every kind, service calls, tokens,
    cost when every model used has a price), wall_s (the sessions' seconds), sessions,
    per-handler calls and latency, and per-model requests, tokens, latency and cost (`models`)."""
    totals = Totals()
    for record in records:
        totals.add(record)
    return totals.summary(manifest)


def outcomes(records: Iterable[dict]) -> dict:
    """Success over rows: `failed_outcome` (rows that answered with a failed outcome),
    `success_rate` (rows answered with an ok outcome, over all rows), `calls_per_row` (model
    requests made: not cache hits, nor symbolic handlers' calls); when
    environments judged the rows (a summary's `success`), `env_success_rate` too (the paper
    found self-judged success inflated: both are kept); and, when their summaries name a
    `group` (TextCraft: the recipe depth), the same per group."""
    totals = Totals()
    for record in records:
        totals.add(record)
    return totals.outcomes()


class Totals:
    """Running totals over results lines, taken in one at a time (`add`): what `summarize`
    reports, in memory that does not grow with the rows. The score's sum is exact (its
    partials, as `math.fsum` keeps them), so it does not depend on the order rows ended in."""

    def __init__(self) -> None:
        self.rows = self.failed = self.scored = 0
        self._score_partials: list[float] = []
        self.usage = Usage()
        self.rates = _Rates()
        self.groups: dict[str, _Rates] = {}

    def add(self, record: dict) -> None:
        self.rows += 1
        self.failed += "error" in record
        if "score" in record:
            self.scored += 1
            _add_exact(self._score_partials, float(record["score"]))
        self.usage.add(Usage.from_dict(record.get("usage") or {}))
        self.rates.add(record)
        group = _group(record)
        if group is not None:
            self.groups.setdefault(group, _Rates()).add(record)

    def outcomes(self) -> dict:
        out = self.rates.result()
        if self.groups:
            out["by_group"] = {name: {"rows": rates.rows, **rates.result()} for name, rates in sorted(self.groups.items())}
        return out

    def summary(self, manifest: dict) -> dict:
        usage = self.usage.to_dict()
        handlers = usage.pop("handlers")
        usage["handler_calls"] = self.usage.handler_total
        usage["models"] = {name: model.latency() for name, model in sorted(self.usage.models.items())}
        if "cost" in usage:
            usage["cost"] = round(usage["cost"], 6)
        sessions = manifest.get("sessions", [])
        metric = {"metric": manifest.get("metric") or "em"} if self.scored else {}
        return {
            "rows": self.rows,
            "failed": self.failed,
            "score": round(math.fsum(self._score_partials) / self.scored, 6) if self.scored else None,
            **metric,
            "scored_rows": self.scored,
            **self.outcomes(),
            **usage,
            "wall_s": round(sum(s.get("seconds") or 0.0 for s in sessions), 3),
            "sessions": len(sessions),
            "handlers": handlers,
        }


class _Rates:
    """Outcome counts over rows (see `outcomes`)."""

    def __init__(self) -> None:
        self.rows = self.failed_outcome = self.succeeded = self.env_ok = self.calls = 0
        self.judged = False

    def add(self, record: dict) -> None:
        self.rows += 1
        self.failed_outcome += record.get("outcome") == "failed"
        self.succeeded += _succeeded(record)
        verdict = _env_success(record)
        self.judged |= verdict is not None
        self.env_ok += bool(verdict)
        # model requests the row made: a cache hit is none (a re-run from the cache makes 0)
        self.calls += (record.get("usage") or {}).get("calls", 0)

    def result(self) -> dict:
        rows = self.rows or 1
        out = {"failed_outcome": self.failed_outcome, "success_rate": round(self.succeeded / rows, 6)}
        if self.judged:
            out["env_success_rate"] = round(self.env_ok / rows, 6)
        out["calls_per_row"] = round(self.calls / rows, 3)
        return out


def _add_exact(partials: list[float], x: float) -> None:
    """Add `x` to the exact sum held as non-overlapping `partials` (Shewchuk's algorithm, as in
    `math.fsum`): `math.fsum(partials)` is then the correctly rounded total, in any order."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


def _group(record: dict) -> str | None:
    """The group the row's environment summary names (TextCraft: the recipe depth), if any."""
    for summary in (record.get("environment") or {}).values():
        if isinstance(summary, dict) and summary.get("group") is not None:
            return str(summary["group"])
    return None


def _succeeded(record: dict) -> bool:
    """Answered with an ok outcome (results lines written before outcomes existed: no error)."""
    return "error" not in record and record.get("outcome", "ok") == "ok"


def _env_success(record: dict) -> bool | None:
    """Whether every environment of the row that judges success says so (None: none judges)."""
    verdicts = [s["success"] for s in (record.get("environment") or {}).values()
                if isinstance(s, dict) and "success" in s]
    return all(verdicts) if verdicts else None
