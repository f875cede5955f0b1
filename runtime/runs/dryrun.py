"""Dry runs: every row run on a stand-in model (the replay of the prompts' own examples), to
count the model calls a real run would make, estimate their tokens and cost, and find the rows
that would fail.

Token estimates (no tokenizer is loaded: a dry run stays instant and offline): prompt tokens
are the rendered prompts' characters / 4, rounded up (`estimated_tokens`, the usual rule of thumb
for English text); completion tokens are the stand-in's answers (the prompts' own examples) at
characters / 4, and `max_completion_tokens` is the requests' `max_tokens` summed, an upper bound.
With a price for the run's model, `estimated_cost` prices the estimates and `max_cost` the upper
bound; without one there is no cost figure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from decomp.runtime.models.prices import Price
from decomp.runtime.models.replay import ReplayModel
from decomp.runtime.storage.datasets import Row


@dataclass
class DryRun:
    """Model calls per row, each failing row as (where, error), and the calls' estimated tokens:
    `prompt_tokens`, `completion_tokens` and their upper bound `max_completion_tokens`."""

    calls: list[int] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    max_completion_tokens: int = 0

    def estimate(self, price: Price | None = None) -> dict:
        """What `dry_run_estimate` says of these rows, with the cost at `price` when given."""
        tokens = (self.prompt_tokens, self.completion_tokens, self.max_completion_tokens)
        return dry_run_estimate(self.calls, len(self.failures), tokens, price)


def dry_run(session: Any, loaded: Any, rows: Iterable[Row], dataset: bool = True) -> DryRun:
    """Run each row of `rows` through `session` (whose model is the stand-in); a row that cannot
    be read, lacks an input or fails on the stand-in's answers is a failure, its calls (and
    their tokens) up to the failure counted. `dataset` False: one question (its row gets no `id`)."""
    found = DryRun()
    replay = session.model_override
    for row in rows:
        if isinstance(replay, ReplayModel):
            replay.new_row()
        if row.error is not None:
            used, error = 0, row.error
        else:
            sent = len(replay.history) if isinstance(replay, ReplayModel) else 0
            result = session.run(loaded, {"id": row.id, **row.fields} if dataset else row.fields)
            used, error = result.usage.calls, result.error
            found.prompt_tokens += result.usage.prompt_tokens
            found.completion_tokens += result.usage.completion_tokens
            if isinstance(replay, ReplayModel):
                found.max_completion_tokens += sum(r.max_tokens * r.n for r in replay.history[sent:])
        found.calls.append(used)
        if error is not None:
            where = f"row {row.id} (index {row.index})" if dataset else "the question"
            found.failures.append((where, str(error)))
    return found


def dry_run_estimate(calls: list[int], failed: int = 0, tokens: tuple[int, int, int] | None = None,
                     price: Price | None = None) -> dict:
    """Summary of model calls per row from a dry run (`failed`: rows that would fail, when any);
    with `tokens` (prompt, completion, most completion tokens), the token estimates, and with
    `price` too, the estimated cost and its upper bound."""
    n = len(calls)
    estimate: dict[str, Any] = {"rows": n, "calls_per_row": round(sum(calls) / n, 3) if n else 0.0,
                                "max_calls_per_row": max(calls, default=0), "estimated_calls": sum(calls)}
    if tokens is not None:
        prompt, completion, most = tokens
        estimate.update(estimated_prompt_tokens=prompt, estimated_completion_tokens=completion,
                        max_completion_tokens=most)
        if price is not None:
            estimate.update(estimated_cost=round(price.cost(prompt, completion), 6),
                            max_cost=round(price.cost(prompt, most), 6))
    if failed:
        estimate["failed"] = failed
    return estimate
