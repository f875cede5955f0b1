"""A live progress bar for dataset runs, on stderr when it is a terminal; silent otherwise.

Shows rows done of all, failed rows, model calls, tokens, cache hits and the time left. When
stderr is not a terminal (a pipe, a file, CI) nothing is drawn: the run's one machine-readable
line is the summary JSON printed on stdout at the end.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from decomp.runtime.engine.budgets import Usage


@contextmanager
def progress(total: int, usage: Usage, enabled: bool | None = None) -> Iterator[Callable[[dict], None]]:
    """Yields `tick(record)`, to call as each row ends. `enabled` defaults to stderr being a tty."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield lambda record: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    failed = 0
    columns = (TextColumn("rows"), BarColumn(bar_width=16), MofNCompleteColumn(), TextColumn("{task.description}"),
               TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(_line(usage, failed), total=total)

        def tick(record: dict) -> None:
            nonlocal failed
            failed += "error" in record
            bar.update(task, advance=1, description=_line(usage, failed))

        yield tick


def _line(usage: Usage, failed: int) -> str:
    return f"failed {failed} · calls {usage.calls} · tokens {usage.tokens} · cache hits {usage.cache_hits}"
