"""A live progress bar for dataset runs, on stderr when it is a terminal; silent otherwise.

Shows rows done of all, failed rows, model calls, tokens (with the share of prompt tokens the
provider served from its prompt cache, when any were), cache hits, the cost (when every model
used has a price) and the time left. Calls, tokens, cache hits and cost move as each call ends
(the bar listens to the run's `Usage`), not only as rows end; the time left is shown from the
first row that ends (elapsed time per row so far, times the rows left). When stderr is not a
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

    def __call__(self, record: dict) -> None:
        self.failed += "error" in record
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=_line(self.usage, self.failed))

    def refresh(self) -> None:
        """Show the usage as it is now (the run's `Usage` calls this as each call ends)."""
        if self.bar is not None:
            self.bar.update(self.task, description=_line(self.usage, self.failed))

    def line(self) -> str:
        if self.bar is not None:
            return self.bar.tasks[0].description
        return _line(self.usage, self.failed)


@contextmanager
def progress(total: int, usage: Usage, enabled: bool | None = None, console: Any = None) -> Iterator[Ticker]:
    """Yields a `Ticker`, to call as each row ends; meanwhile `usage` tells it of every call.
    `enabled` defaults to stderr being a tty; `console`: a rich Console (default: stderr's)."""
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


def _line(usage: Usage, failed: int) -> str:
    cost = usage.cost
    priced = f" · cost {cost:.6g}" if cost is not None else ""
    return (f"failed {failed} · calls {usage.calls} · tokens {usage.tokens}{_cached(usage)} · cache hits "
            f"{usage.cache_hits}{priced}")


def _cached(usage: Usage) -> str:
    """The share of prompt tokens the providers served from their prompt caches, as
    ` (cached 41%)`; '' when none were (or no server said)."""
    if not usage.cached_tokens or not usage.prompt_tokens:
        return ""
    return f" (cached {usage.cached_tokens / usage.prompt_tokens:.0%})"
