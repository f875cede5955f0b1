"""A live progress bar for dataset runs, on stderr when it is a terminal; silent otherwise.

Shows rows done of all, failed rows, model calls, tokens (with the share of prompt tokens the
provider served from its prompt cache, when any were), cache hits, the cost (when every model
used has a price), the mean model request's time and that of a call of the handler that waited
the most, each in two parts, `303 ms + 151 ms queued` (the time it ran, then the time it waited
for a slot: a worker, the concurrency limit, a busy model), and the time left. Calls, tokens,
cache hits and cost move as each call ends (the bar listens to the run's `Usage`), not only as
rows end; the time left is shown from the first row that ends (elapsed time per row so far, times the rows left). When stderr is not a
terminal (a pipe, a file, CI) nothing is drawn: the run's one machine-readable line is the
summary JSON printed on stdout at the end.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator

from decomp.runtime.engine.budgets import Usage


class Ticker:
    """What `progress` yields: call it with each row's record as the row ends; `line()` is the
    bar's text now (failed rows, calls, tokens, cache hits, cost)."""

    def __init__(self, usage: Usage, bar: Any = None, task: Any = None):
        self.usage, self.bar, self.task = usage, bar, task
        self.failed = 0
        self.times = Times()

    def __call__(self, record: dict) -> None:
        self.failed += "error" in record
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=_line(self.usage, self.failed, self.times))

    def refresh(self) -> None:
        """Show the usage as it is now (the run's `Usage` calls this as each call ends)."""
        if self.bar is not None:
            self.bar.update(self.task, description=_line(self.usage, self.failed, self.times))

    def line(self) -> str:
        if self.bar is not None:
            return self.bar.tasks[0].description
        return _line(self.usage, self.failed, self.times)


class Times:
    """The run's model requests' seconds and queued seconds, summed as they come (each request
    once, so that a bar redrawn at every call costs what the new requests do, not the run's)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}
        self.requests, self.seconds, self.queued = 0, 0.0, 0.0

    def take(self, usage: Usage) -> None:
        """Add the requests of `usage`'s models not taken yet."""
        for name, model in usage.models.items():
            start, end = self._seen.get(name, 0), len(model.seconds)
            if end <= start:
                continue
            self.requests += end - start
            self.seconds += sum(model.seconds[start:end])
            self.queued += sum(model.queued[start:end])  # a request counted without one waited 0
            self._seen[name] = end

    def text(self, usage: Usage) -> str:
        """` · model 303 ms + 151 ms queued` (the mean request) and ` · [nap] 102 ms + 1.06 s
        queued` (the mean call of the handler that waited the most, when one waited)."""
        self.take(usage)
        out = ""
        if self.requests:
            out += f" · model {_two(self.seconds / self.requests, self.queued / self.requests)}"
        queued = usage.handler_queued
        slowest = max(queued, key=queued.__getitem__, default=None)
        calls = usage.handler_calls.get(slowest, 0) if slowest is not None else 0
        if calls and queued[slowest] / calls >= 0.0005:
            out += f" · [{slowest}] {_two(usage.handler_seconds[slowest] / calls, queued[slowest] / calls)}"
        return out


def _two(seconds: float, queued: float) -> str:
    """A mean time as its two parts: the time it ran, then (when any) the time it queued."""
    waited = min(queued, seconds)
    ran = _duration(seconds - waited)
    return f"{ran} + {_duration(waited)} queued" if waited >= 0.0005 else ran


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


@contextmanager
def progress(total: int, usage: Usage, enabled: Any = None, console: Any = None) -> Iterator[Ticker]:
    """Yields a `Ticker`, to call as each row ends; meanwhile `usage` tells it of every call.
    `enabled` defaults to stderr being a tty; `console`: a rich Console (default: stderr's).
    `enabled` may also be a bar of one's own, `enabled(total, usage)` a context manager that
    yields what to call as each row ends (`decomp.runtime.runs.bars`: tqdm's, in notebooks)."""
    if callable(enabled):
        with enabled(total, usage) as ticker:
            yield ticker
        return
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield Ticker(usage)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("rows"), BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("{task.description}"),
               TextColumn("ETA"), _eta_column())
    with Progress(*columns, console=console or Console(stderr=True), transient=False) as bar:
        ticker = Ticker(usage, bar, bar.add_task(_line(usage, 0), total=total))
        before, usage.listener = usage.listener, ticker.refresh
        try:
            yield ticker
        finally:
            usage.listener = before


def _eta_column():
    """A rich column: the time left, from the first row that ends (rich's own waits for two)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        def render(self, task) -> Text:
            return Text(eta(task.elapsed, task.completed, task.total), style="progress.remaining")

    return EtaColumn()


def eta(elapsed: float | None, done: float, total: float | None) -> str:
    """The time left as h:mm:ss: the seconds per row so far times the rows left; `-:--:--`
    before the first row ends."""
    if not done or elapsed is None or total is None:
        return "-:--:--"
    return str(timedelta(seconds=round(elapsed / done * max(total - done, 0))))


def _line(usage: Usage, failed: int, times: Times | None = None) -> str:
    cost = usage.cost
    priced = f" · cost {cost:.6g}" if cost is not None else ""
    timed = times.text(usage) if times is not None else ""
    return (f"failed {failed} · calls {usage.calls} · tokens {usage.tokens}{_cached(usage)} · cache hits "
            f"{usage.cache_hits}{priced}{timed}")


def _cached(usage: Usage) -> str:
    """The share of prompt tokens the providers served from their prompt caches, as
    ` (cached 41%)`; '' when none were (or no server said)."""
    if not usage.cached_tokens or not usage.prompt_tokens:
        return ""
    return f" (cached {usage.cached_tokens / usage.prompt_tokens:.0%})"
