"""The progress bars of the Python API: `Program.run_dataset` and `decomp.evaluate`.

`progress=None` (their default) draws a bar in a Jupyter kernel and when stderr is a terminal;
True always, False never. The bar is tqdm's when tqdm is installed (in Jupyter a widget when
ipywidgets is installed too, else a line of text on stderr); without tqdm, a line of text on
stderr redrawn in place (in a Jupyter kernel) or the command line's bar (rich, in a terminal).
A dataset run's bar says what the command line's does (`decomp.runtime.runs.progress`): rows
done of all, failed rows, calls, tokens, cache hits, cost. The choice is each call's own: no
setting of the process changes it.
"""
from __future__ import annotations

import importlib.util
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TextIO

from decomp.runtime.engine.budgets import Usage
from decomp.runtime.runs.progress import Ticker, eta

#: A bar of one's own as `run_dataset`'s `progress` takes it: (rows to run, the run's usage) ->
#: a context manager yielding what to call with each row's record as the row ends.
RowBar = Callable[[int, Usage], Any]


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (an IPython shell that talks over ZMQ)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def wanted(progress: bool | None) -> bool:
    """Whether to draw a bar: `progress` when it is True or False; None: in a Jupyter kernel,
    or when stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    return in_kernel() or _isatty(sys.stderr)


def has_tqdm() -> bool:
    """Whether tqdm is installed (found, not imported)."""
    try:
        return importlib.util.find_spec("tqdm") is not None
    except (ImportError, ValueError):
        return False


def run_bar(progress: bool | None) -> bool | RowBar:
    """What `run_dataset` takes as its `progress` for `Program.run_dataset(..., progress=progress)`:
    False, a tqdm bar, a text line (Jupyter without tqdm), or True (rich, on stderr)."""
    if not wanted(progress):
        return False
    if has_tqdm():
        return tqdm_rows
    return text_rows if in_kernel() else True


@contextmanager
def tqdm_rows(total: int, usage: Usage) -> Iterator[RowTicker]:
    """A dataset run's bar drawn by tqdm (a `RowBar`)."""
    with _rows(_TqdmBar(total, "rows"), usage) as ticker:
        yield ticker


@contextmanager
def text_rows(total: int, usage: Usage) -> Iterator[RowTicker]:
    """A dataset run's bar as a line of text on stderr, redrawn in place (a `RowBar`)."""
    with _rows(TextBar(total, "rows"), usage) as ticker:
        yield ticker


@contextmanager
def counting(total: int, what: str, progress: bool | None) -> Iterator[Callable[[int], None]]:
    """A bar of `total` things (`what`: "rows scored"), when `wanted(progress)`: yields what to
    call with how many more are done."""
    if not wanted(progress) or total <= 0:
        yield lambda done: None
        return
    bar = _TqdmBar(total, what) if has_tqdm() else TextBar(total, what)
    try:
        yield lambda done: bar.advance(done, "")
    finally:
        bar.close()


class RowTicker:
    """A `progress.Ticker` whose bar is one of these: called with each row's record as the row
    ends, refreshed by the run's `Usage` as each call ends (at most a few times a second)."""

    def __init__(self, usage: Usage, bar: _TqdmBar | TextBar):
        self.text, self.bar = Ticker(usage), bar

    def __call__(self, record: dict) -> None:
        self.text(record)
        self.bar.advance(1, self.text.line())

    def refresh(self) -> None:
        self.bar.advance(0, self.text.line())

    def line(self) -> str:
        return self.text.line()


@contextmanager
def _rows(bar: _TqdmBar | TextBar, usage: Usage) -> Iterator[RowTicker]:
    ticker = RowTicker(usage, bar)
    before, usage.listener = usage.listener, ticker.refresh
    try:
        yield ticker
    finally:
        usage.listener = before
        bar.close()


class _TqdmBar:
    """tqdm's bar: a widget in a Jupyter kernel with ipywidgets, else text on stderr."""

    def __init__(self, total: int, what: str):
        self.bar = _tqdm_class()(total=total, desc=what, unit=" rows", file=sys.stderr, leave=True, dynamic_ncols=True)

    def advance(self, done: int, text: str) -> None:
        if text:
            self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(done)  # redrawn when tqdm's interval has passed

    def close(self) -> None:
        self.bar.close()


def _tqdm_class() -> Any:
    if in_kernel() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


class TextBar:
    """A line of text on `stream` (default stderr), redrawn in place (a carriage return) at most
    every `every` seconds and when the last one is done: `rows 3/20 failed 0 · ... ETA 0:00:12`."""

    def __init__(self, total: int, what: str, stream: TextIO | None = None, every: float = 0.5):
        self.total, self.what, self.stream, self.every = total, what, stream or sys.stderr, every
        self.done, self.started, self.drawn = 0, time.monotonic(), None

    def advance(self, done: int, text: str) -> None:
        self.done += done
        now = time.monotonic()
        if self.drawn is None or now - self.drawn >= self.every or self.done >= self.total:
            self.drawn = now
            said = f" {text}" if text else ""
            self.stream.write(f"\r{self.what} {self.done}/{self.total}{said} ETA "
                              f"{eta(now - self.started, self.done, self.total)}")
            self.stream.flush()

    def close(self) -> None:
        if self.drawn is not None:
            self.stream.write("\n")
            self.stream.flush()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
