"""Usage accounting and budgets, per row and per run.

Each row runs inside a `RowContext` (a context variable, so concurrent foreach items and
program steps of the row share it). Model calls are charged to the row and to the run; a
budget that runs out ends that row with a `BudgetExceeded` error naming the budget.

`calls` counts model requests only: a cache hit is not a call (`cache_hits`), nor is a symbolic
handler's call (`handlers`: every handler's calls) or another service's (`service_calls`). Each
model request is also counted under its model (`ModelUsage`: requests, tokens, latencies, cost
when the model has a price), and a money budget (`Budget.run_cost`) stops model calls once the
run's cost reaches it. A `Usage` may have a `listener` (the progress bar), told of every change.

Time is kept whole and in two parts, for handler calls and model requests alike: `seconds` (a
call's time from its start to its end), and of it the time `queued` (waiting for a slot: a
worker thread or process, the scheduler's concurrency limit, a rate limit, a model that serves
one request at a time); the rest is its service time. A handler call's service time includes
the handlers it called (they have their own figures); its queue time, its own waits and those
of the model and service requests it made.

Of the prompt tokens, `cached_tokens` are those the provider served from its prompt cache (billed
at `Price.price_cached`), and of the completion tokens, `reasoning_tokens` those a reasoning
model spent thinking: parts of the two counts, not more tokens (the token budgets count prompt
and completion tokens, cached or not). Both are written only when some were reported; a
record without them reads as 0.

Every handler call, of any kind (a Python function, a regex, a program: symbolic work too),
counts against its own budget, per row (`Budget.row_handler_calls`, 10,000 unless told) and per
run, so a program that fans out without end stops there; and every `MEMORY_EVERY` handler calls
the process's memory (its resident set) is checked against `Budget.memory_mb`, if set: the row
whose call finds it over ends with a budget error naming memory (memory the process keeps after
that row ends still counts for the next).
"""
from __future__ import annotations

import contextvars
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from decomp.dsl.errors import BudgetExceeded
from decomp.dsl.sizes import CYCLIC, answer_size, over_answer_limit
from decomp.runtime.models.prices import Price


@dataclass
class ModelUsage:
    """The requests made of one model: how many, their tokens, each one's seconds (from the
    request to its reply: cache hits are not requests) and of them the seconds it waited for a
    slot or the model (`queued`, one per timed request), and, when the model has a price, their
    cost (`priced`: the requests a price was known for; cost is a figure only when all were),
    and of their tokens, those served from the provider's prompt cache and those spent
    reasoning."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    priced: int = 0
    spent: float = 0.0
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def cost(self) -> float | None:
        """Money spent on these requests, or None when a request's price was not known."""
        return self.spent if self.requests and self.priced == self.requests else None

    def add(self, other: "ModelUsage") -> None:
        self.requests += other.requests
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.queued.extend([0.0] * (len(self.seconds) - len(self.queued)))  # in step with `seconds`
        self.queued.extend(other.waits())
        self.seconds.extend(other.seconds)
        self.priced += other.priced
        self.spent += other.spent

    def to_dict(self) -> dict:
        """What a results line keeps: the counts and every request's seconds and queued seconds
        (so that totals over rows, sessions and shards have exact percentiles)."""
        out = {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, **_details(self),
               "seconds": [round(s, 6) for s in self.seconds], "queued": [round(q, 6) for q in self.waits()]}
        if self.cost is not None:
            out["cost"] = self.cost
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "ModelUsage":
        """The usage `to_dict` gave; raises TypeError or ValueError for anything else. A record
        written before queue times were kept has no `queued`: each of its requests waited 0 s."""
        seconds, queued = data.get("seconds", []), data.get("queued")
        if not isinstance(seconds, list):
            raise TypeError("'seconds' is not a list")
        if queued is not None and (not isinstance(queued, list) or len(queued) != len(seconds)):
            raise ValueError("'queued' is not a list of one figure per request's seconds")
        times = [_number(s) for s in seconds]
        usage = cls(_count(data.get("requests", 0)), _count(data.get("prompt_tokens", 0)),
                    _count(data.get("completion_tokens", 0)), times,
                    [min(_number(q), t) for q, t in zip(queued, times)] if queued is not None else [0.0] * len(times),
                    cached_tokens=_count(data.get("cached_tokens", 0)),
                    reasoning_tokens=_count(data.get("reasoning_tokens", 0)))
        if "cost" in data:
            usage.priced, usage.spent = usage.requests, _number(data["cost"])
        return usage

    def waits(self) -> list[float]:
        """Each timed request's queued seconds, in the order of `seconds` (0 for a request
        counted without one)."""
        return self.queued + [0.0] * (len(self.seconds) - len(self.queued))

    def latency(self) -> dict:
        """Count, mean, p50 and p95 of the requests' seconds (numpy's linear percentiles), the
        mean of their service time and of their queue time (`service_mean_s` + `queue_mean_s` =
        `mean_s`), with the tokens, and the cost when known: what a summary shows per model."""
        out: dict[str, Any] = {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                               "completion_tokens": self.completion_tokens, **_details(self)}
        if self.seconds:
            import numpy  # here, not at import: most runs never summarize

            p50, p95 = numpy.percentile(self.seconds, [50, 95])
            mean, queued = float(numpy.mean(self.seconds)), float(numpy.mean(self.waits()))
            out.update(mean_s=round(mean, 6), p50_s=round(float(p50), 6), p95_s=round(float(p95), 6),
                       service_mean_s=round(mean - queued, 6), queue_mean_s=round(queued, 6))
        if self.cost is not None:
            out["cost"] = round(self.cost, 6)
        return out


#: The parts of the token counts a server may report: of the prompt tokens, those served from
#: its prompt cache; of the completion tokens, those spent reasoning.
DETAILS = ("cached_tokens", "reasoning_tokens")


def _details(usage: "ModelUsage | Usage") -> dict[str, int]:
    """`cached_tokens` and `reasoning_tokens` of `usage`, each where it is not 0 (what a record
    writes beside the token counts: runs whose servers report none write what they always did)."""
    return {name: getattr(usage, name) for name in DETAILS if getattr(usage, name)}


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{value!r} is not a number >= 0")
    return float(value)


@dataclass
class Usage:
    """Model calls (requests made, not cache hits), calls of other services by kind, cache hits,
    tokens, time spent per handler (and of it, time queued), and each model's requests
    (`models`)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Of `prompt_tokens`, those served from the provider's prompt cache.
    cached_tokens: int = 0
    #: Of `completion_tokens`, those a reasoning model spent thinking.
    reasoning_tokens: int = 0
    handler_calls: dict[str, int] = field(default_factory=dict)
    handler_seconds: dict[str, float] = field(default_factory=dict)
    #: Of `handler_seconds`, the seconds each handler's calls waited for a slot (their queue time).
    handler_queued: dict[str, float] = field(default_factory=dict)
    #: Calls of outbound services other than models, by kind ("search", ...).
    service_calls: dict[str, int] = field(default_factory=dict)
    #: Handler calls started, of every kind (symbolic ones too): what the handler-call budgets
    #: count (not written by `to_dict`: `handlers` has the calls of each).
    started: int = 0
    #: Each model's requests, by model name.
    models: dict[str, ModelUsage] = field(default_factory=dict)
    #: Money held by calls in flight, at most what each may cost (see `RowContext.before_call`).
    held: float = 0.0
    #: Told (called with no argument) whenever a call's tokens, cache hits or cost are added.
    listener: Callable[[], None] | None = field(default=None, repr=False, compare=False)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def handler_total(self) -> int:
        """Handler calls of every kind (symbolic ones too), over all handlers."""
        return sum(self.handler_calls.values())

    @property
    def cost(self) -> float | None:
        """Money spent on model requests; None when there were none or one model had no price."""
        costs = [m.cost for m in self.models.values()]
        return sum(costs) if costs and None not in costs else None

    @property
    def spent(self) -> float:
        """Money spent on the requests of models with a price (what `--max-cost` counts)."""
        return sum(m.spent for m in self.models.values())

    def changed(self) -> None:
        if self.listener is not None:
            self.listener()

    def add(self, other: "Usage") -> None:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.reasoning_tokens += other.reasoning_tokens
        for name, count in other.handler_calls.items():
            self.count(name, count, other.handler_seconds[name], other.handler_queued.get(name, 0.0))
        for kind, count in other.service_calls.items():
            self.service_calls[kind] = self.service_calls.get(kind, 0) + count
        for name, model in other.models.items():
            self.models.setdefault(name, ModelUsage()).add(model)

    def request(self, model: str, seconds: float | None, prompt_tokens: int, completion_tokens: int,
                price: Price | None, cached_tokens: int = 0, reasoning_tokens: int = 0, queued: float = 0.0) -> None:
        """Count one request of `model` that took `seconds` (None: not timed), `queued` of them
        waiting for a slot, and used these tokens (`cached_tokens` of the prompt's from the
        provider's cache, `reasoning_tokens` of the completion's spent reasoning)."""
        entry = self.models.setdefault(model, ModelUsage())
        entry.requests += 1
        entry.prompt_tokens += prompt_tokens
        entry.completion_tokens += completion_tokens
        entry.cached_tokens += cached_tokens
        entry.reasoning_tokens += reasoning_tokens
        if seconds is not None:
            entry.seconds.append(seconds)
            entry.queued.append(min(queued, seconds))
        if price is not None:
            entry.priced += 1
            entry.spent += price.cost(prompt_tokens, completion_tokens, cached_tokens)

    def count(self, handler: str, calls: int, seconds: float, queued: float = 0.0) -> None:
        """Add `calls` calls of `handler` that took `seconds` in all, `queued` of them waiting."""
        self.handler_calls[handler] = self.handler_calls.get(handler, 0) + calls
        self.handler_seconds[handler] = self.handler_seconds.get(handler, 0.0) + seconds
        self.handler_queued[handler] = self.handler_queued.get(handler, 0.0) + queued

    def handler_latency(self, handler: str) -> dict:
        """What a record and a summary keep of `handler`'s calls: their count, `seconds` in all
        and `queue_seconds` of them, and the mean milliseconds of a call, whole (`mean_ms`) and
        in its two parts (`service_mean_ms` + `queue_mean_ms`)."""
        count, seconds = self.handler_calls[handler], self.handler_seconds[handler]
        queued = min(self.handler_queued.get(handler, 0.0), seconds)

        def mean(total: float) -> float:
            return round(1000 * total / count, 3) if count else 0.0

        return {"calls": count, "seconds": round(seconds, 6), "queue_seconds": round(queued, 6),
                "mean_ms": mean(seconds), "service_mean_ms": mean(seconds - queued), "queue_mean_ms": mean(queued)}

    def to_dict(self) -> dict:
        latency = {name: self.handler_latency(name) for name in sorted(self.handler_calls)}
        out = {"calls": self.calls, "cache_hits": self.cache_hits, "prompt_tokens": self.prompt_tokens,
               "completion_tokens": self.completion_tokens, **_details(self), "handlers": latency}
        if self.service_calls:
            out["service_calls"] = dict(sorted(self.service_calls.items()))
        if self.models:
            out["models"] = {name: model.to_dict() for name, model in sorted(self.models.items())}
        if self.cost is not None:
            out["cost"] = self.cost
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Usage":
        """The usage `to_dict` gave (missing counts are 0, a handler's `queue_seconds` too, as in
        records written before queue times were kept; per-handler means are recomputed)."""
        usage = cls(**{key: data.get(key, 0) for key in ("calls", "cache_hits", "prompt_tokens", "completion_tokens",
                                                         *DETAILS)})
        for name, handler in (data.get("handlers") or {}).items():
            usage.count(name, handler.get("calls", 0), handler.get("seconds", 0.0), handler.get("queue_seconds", 0.0))
        usage.service_calls.update(data.get("service_calls") or {})
        models = data.get("models") or {}
        if not isinstance(models, dict):
            raise TypeError("'models' is not an object")
        usage.models = {name: ModelUsage.from_dict(model) for name, model in models.items()}
        return usage


#: Handler calls one row may make unless told otherwise (every kind counts).
DEFAULT_ROW_HANDLER_CALLS = 10_000
#: How often (in handler calls, run-wide) the process's memory is checked against its budget.
MEMORY_EVERY = 64
#: The most text (MiB of characters) one handler answer may hold unless told (`--max-answer-size`).
DEFAULT_ANSWER_MB = 16.0
#: Answers holding this much text (characters) since the last memory check have it checked at once.
MEMORY_CHECK_CHARS = 2**20


@dataclass(frozen=True)
class Budget:
    """Limits; None means unlimited. Per row: model calls and tokens; per run: the same.
    `service_calls` bounds the calls of each other kind of service per row ({"search": 20}).

    row_handler_calls, run_handler_calls: handler calls of every kind (symbolic ones too), per
        row (`DEFAULT_ROW_HANDLER_CALLS` unless told; None: unlimited) and per run.
    memory_mb: the process's resident memory, in MiB, beyond which a row's next handler call
        ends the row (checked every `MEMORY_EVERY` calls, and whenever answers holding
        `MEMORY_CHECK_CHARS` of text came back since the last check; None: unchecked).
    answer_mb: the most text, in MiB of characters, one handler answer may hold (every string
        in it, keys too; numbers and the like count 8): a larger one ends the row before it is
        kept, cached or traced (`DEFAULT_ANSWER_MB` unless told; None: unlimited)."""

    row_calls: int | None = None
    row_tokens: int | None = None
    run_calls: int | None = None
    run_tokens: int | None = None
    #: Money the run may spend on model requests (`--max-cost`; needs every model's price).
    run_cost: float | None = None
    service_calls: tuple[tuple[str, int], ...] = ()
    row_handler_calls: int | None = DEFAULT_ROW_HANDLER_CALLS
    run_handler_calls: int | None = None
    memory_mb: float | None = None
    answer_mb: float | None = DEFAULT_ANSWER_MB

    def __post_init__(self) -> None:
        if self.run_cost is not None and not self.run_cost >= 0:
            raise ValueError(f"budget run_cost must be >= 0 (or None: unlimited), got {self.run_cost}")
        for name in ("row_handler_calls", "run_handler_calls", "memory_mb", "answer_mb"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"budget {name} must be > 0 (or None: unlimited), got {value}")

    @property
    def unlimited(self) -> bool:
        """No model, token or service budget (the handler-call and memory budgets aside)."""
        return (self.row_calls is None and self.row_tokens is None and self.run_calls is None
                and self.run_tokens is None and self.run_cost is None and not self.service_calls)


@dataclass
class RowContext:
    """What one row's calls are charged to."""

    priority: int
    budget: Budget
    run: Usage
    usage: Usage = field(default_factory=Usage)
    #: The row's fields (what environment factories are made with).
    fields: Mapping[str, Any] = field(default_factory=dict)
    #: The row's live environments, by declaration: (label, instance).
    environments: dict[int, tuple[str, Any]] = field(default_factory=dict)
    #: How often each request of temperature > 0 was made in this row (see `Session.complete`).
    occurrences: dict[str, int] = field(default_factory=dict)
    #: Handler calls this row started (every kind).
    handler_calls: int = 0
    #: Where the run's budgets are counted when its rows run in several processes (None: here).
    shared: "SharedRun | None" = None

    def environment(self, declared: Any, fresh: bool = False) -> Any:
        """The row's instance of the `environment` handler `declared` (made on first use, or
        anew when `fresh`: the old one is closed)."""
        found = self.environments.get(id(declared))
        if found is not None and not fresh:
            return found[1]
        if found is not None:
            found[1].close()
        label = found[0] if found is not None else self._label(declared)
        self.environments[id(declared)] = (label, declared.make(self.fields))
        return self.environments[id(declared)][1]

    def _label(self, declared: Any) -> str:
        """The handler's name; `name@file:line` when another declaration of that name is in use."""
        taken = {label for label, _ in self.environments.values()}
        if declared.name not in taken:
            return declared.name
        span = declared.decl.span if declared.decl is not None else None
        label = f"{declared.name}@{span.file}:{span.line}" if span else f"{declared.name}@{id(declared)}"
        return label if label not in taken else f"{label}#{len(taken)}"

    def environment_summaries(self) -> dict[str, Any]:
        """What each environment the row used reports (`Environment.summary()`), by handler name."""
        return {label: env.summary() for label, env in self.environments.values()}

    def close_environments(self) -> None:
        """Call every live environment's close hook (the row is done)."""
        for _, env in self.environments.values():
            env.close()

    def occurrence(self, key: str) -> int:
        """How many times `key` was seen in this row before (0 the first time)."""
        seen = self.occurrences.get(key, 0)
        self.occurrences[key] = seen + 1
        return seen

    def before_call(self, kind: str = "model", model: str = "", price: Price | None = None,
                    hold: float = 0.0) -> None:
        """Count a call of a service of `kind` about to be made, or refuse it if a budget is spent.

        The call is counted before it is made, so concurrent calls of a row (or of the run)
        cannot overshoot a call budget. Token budgets are checked against tokens already used:
        calls in flight at that moment may take a run past them by their size. The money budget
        is checked against the money spent plus `hold` (the most a call may cost, held until it
        ends: `release`) of each call in flight. With a money budget, a call of a model (named
        `model`) with no `price` is refused."""
        if kind != "model":
            self._service_call(kind)
            return
        if not self.budget.unlimited:
            if self.budget.run_cost is not None and price is None:
                raise BudgetExceeded(f"budget: --max-cost needs a price for model {model or '(unnamed)'}: give it "
                                     "price_in and price_out (a model option, or --prices FILE)")
            _check("model calls for this row", self.usage.calls, self.budget.row_calls)
            _check("tokens for this row", self.usage.tokens, self.budget.row_tokens)
            if self.shared is None:
                admit_call(self.budget, self.run, hold)
            else:
                self.shared.admit("model", hold)
                self.run.calls += 1
            self.usage.calls += 1
            return
        self.usage.calls += 1
        self.run.calls += 1

    def release(self, hold: float) -> None:
        """Give back what `before_call` held for a call that ended without an answer to charge
        (one that did is given back by `charge(..., held=...)`)."""
        self.run.held = max(0.0, self.run.held - hold)
        if self.shared is not None and hold:
            self.shared.release(hold)

    def before_handler_call(self) -> None:
        """Count a handler call about to start (any kind: symbolic ones too), or refuse it when
        the row's or the run's handler-call budget is spent or the process is over its memory
        budget (checked every `MEMORY_EVERY` calls)."""
        budget, run = self.budget, self.run
        _check("handler calls for this row", self.handler_calls, budget.row_handler_calls, "--max-row-handler-calls")
        if self.shared is not None and budget.run_handler_calls is not None:
            self.shared.admit("handler", 0.0)
        else:
            _check("handler calls for the run", run.started, budget.run_handler_calls, "--max-handler-calls")
        self.handler_calls += 1
        run.started += 1
        if budget.memory_mb is not None and run.started % MEMORY_EVERY == 1:
            check_memory(budget.memory_mb)

    def after_answer(self, answer: Any, handler: str) -> None:
        """Refuse an answer of handler `handler` over the answer size limit, and check the
        process's memory at once when enough answer text came back since the last check."""
        budget = self.budget
        if budget.answer_mb is None and budget.memory_mb is None:
            return
        size = answer_size(answer)
        if size == CYCLIC:
            raise BudgetExceeded(f"limit exceeded: the answer of [{handler}] holds itself (a list or dict within "
                                 "itself), which no text can write out")
        if budget.answer_mb is not None and size > budget.answer_mb * 2**20:
            raise over_answer_limit(handler, size, budget.answer_mb)
        if budget.memory_mb is not None:
            _UNCHECKED[0] += size
            if _UNCHECKED[0] >= MEMORY_CHECK_CHARS:
                _UNCHECKED[0] = 0
                check_memory(budget.memory_mb)

    def _service_call(self, kind: str) -> None:
        used = self.usage.service_calls.get(kind, 0)
        if self.budget.service_calls:
            _check(f"{kind} calls for this row", used, dict(self.budget.service_calls).get(kind))
        self.usage.service_calls[kind] = used + 1
        self.run.service_calls[kind] = self.run.service_calls.get(kind, 0) + 1

    def charge(self, prompt_tokens: int | None, completion_tokens: int | None, hits: int, *,
               model: str | None = None, seconds: float | None = None, price: Price | None = None,
               held: float = 0.0, cached_tokens: int | None = None, reasoning_tokens: int | None = None,
               queued: float = 0.0) -> None:
        """Add the tokens of a call made (counted by `before_call`) and cache hits. A count that
        is unknown (None) or cannot be one (negative, not an integer) adds nothing: what a server
        reports never takes tokens back from a budget. `cached_tokens` (of the prompt tokens,
        those the provider served from its prompt cache) and `reasoning_tokens` (of the
        completion tokens) count as at most the tokens they are part of. With `model`: the call
        was a request of that model, which took `seconds` (`queued` of them waiting for a slot)
        and costs its tokens at `price` (None: unknown). `held`: the money `before_call` held for
        it, given back in the same step as its cost is added (so that no other call is admitted
        in between seeing neither)."""
        prompt_tokens, completion_tokens = _chargeable(prompt_tokens), _chargeable(completion_tokens)
        cached = min(_chargeable(cached_tokens), prompt_tokens) if cached_tokens else 0
        reasoning = min(_chargeable(reasoning_tokens), completion_tokens) if reasoning_tokens else 0
        self.run.held = max(0.0, self.run.held - held)
        for usage in (self.usage, self.run):
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.cached_tokens += cached
            usage.reasoning_tokens += reasoning
            usage.cache_hits += hits
            if model is not None:
                usage.request(model, seconds, prompt_tokens, completion_tokens, price, cached, reasoning, queued)
        if self.shared is not None and (prompt_tokens or completion_tokens or held):
            spent = price.cost(prompt_tokens, completion_tokens, cached) if price is not None and model is not None \
                else 0.0
            self.shared.charge(prompt_tokens + completion_tokens, spent, held)
        self.run.changed()

    def timed(self, handler: str, seconds: float, queued: float = 0.0) -> None:
        """Count a call of `handler` that took `seconds`, `queued` of them waiting for a slot."""
        self.usage.count(handler, 1, seconds, queued)
        self.run.count(handler, 1, seconds, queued)


def admit_call(budget: Budget, run: Usage, hold: float = 0.0) -> None:
    """Count a model call against the budgets of the whole run `run`, or refuse it (raises
    `BudgetExceeded`): the money spent and held (`hold` more held for this call until it ends),
    the model calls and the tokens used so far."""
    limit = budget.run_cost
    if limit is not None and run.spent + run.held >= limit:
        raise BudgetExceeded(f"budget exhausted: cost for the run reached {limit:g} (spent "
                             f"{run.spent:.6g}, {run.held:.6g} more held by calls in flight; "
                             "raise it with --max-cost X)")
    _check("model calls for the run", run.calls, budget.run_calls)
    _check("tokens for the run", run.tokens, budget.run_tokens)
    run.held += hold
    run.calls += 1


def admit_handler_call(budget: Budget, run: Usage) -> None:
    """Count a handler call against the run's handler-call budget, or refuse it."""
    _check("handler calls for the run", run.started, budget.run_handler_calls, "--max-handler-calls")
    run.started += 1


class SharedRun(Protocol):
    """The budgets of a whole run whose rows run in several processes (`decomp run --ray`):
    counted in one place for all of them, so that each means the whole run. `admit` counts a
    call of `kind` ("model", holding `hold` money until `release` or `charge`; "handler") or
    raises `BudgetExceeded` as `admit_call` / `admit_handler_call` would; `release` gives back
    the money held for a call that failed; `charge` adds a call's tokens and cost and gives back
    what was `held` for it, at once."""

    def admit(self, kind: str, hold: float) -> None: ...

    def release(self, hold: float) -> None: ...

    def charge(self, tokens: int, spent: float, held: float) -> None: ...


def _chargeable(tokens: Any) -> int:
    """`tokens` when it is a count (an int >= 0, not a bool), else 0."""
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0 else 0


def _check(what: str, used: int, limit: int | None, flag: str | None = None) -> None:
    if limit is not None and used >= limit:
        how = f" (raise it with {flag} N)" if flag else ""
        raise BudgetExceeded(f"budget exhausted: {what} reached {limit}{how}")


_UNCHECKED = [0]  # characters of answers since the process's memory was last checked
def check_memory(limit_mb: float) -> None:
    """Raise `BudgetExceeded` when the process's resident memory is over `limit_mb` MiB."""
    used = resident_mb()
    if used is not None and used > limit_mb:
        raise BudgetExceeded(f"budget exhausted: memory: the process uses {used:,.0f} MiB, over the limit of "
                             f"{limit_mb:,.0f} MiB (raise it with --max-memory MB)")


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_mb() -> float | None:
    """The process's resident memory now, in MiB (Linux: /proc/self/statm); elsewhere its peak
    (`getrusage`), or None when neither can be read."""
    try:
        with open("/proc/self/statm", "rb") as file:
            return int(file.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB elsewhere
    except (ImportError, OSError, ValueError):
        return None
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def default_memory_mb(fraction: float = 0.75) -> float | None:
    """`fraction` of the machine's physical memory, in MiB (a sensible `--max-memory`), or None
    when the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * _PAGE * fraction / 2**20
    except (AttributeError, OSError, ValueError):
        return None


CURRENT_ROW: contextvars.ContextVar[RowContext | None] = contextvars.ContextVar("decomp_row", default=None)


def current_row() -> RowContext:
    """The row being run, or a throw-away context for calls made outside any row."""
    row = CURRENT_ROW.get()
    return row if row is not None else RowContext(0, Budget(), Usage())
