"""The live progress bar (decomp.runtime.runs.progress): calls, tokens, cache hits and cost move
as each call ends, while its row still runs; the time left shows from the first row that ends."""
from __future__ import annotations

import asyncio
import io
import json
from contextlib import contextmanager

from rich.console import Console

from decomp.runtime.engine.budgets import Usage
from decomp.runtime.engine.session import Session
from decomp.runtime.models.prices import Price
from decomp.runtime.runs import api
from decomp.runtime.runs.progress import eta, progress
from decomp.runtime.testing.fake import FakeModel, fake_tokens

from tests.helpers import THREE_CALLS


def console() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=160)


class Watching(FakeModel):
    """A fake model that, as each request arrives, notes what the progress bar says."""

    def __init__(self, bars, **kw):
        super().__init__(default='"ok"', **kw)
        self.bars, self.seen = bars, []

    async def complete(self, request):
        await asyncio.sleep(0)
        self.seen.append(self.bars[0].line())
        return await super().complete(request)


def test_the_bar_moves_as_calls_end_while_the_row_still_runs(tmp_path, monkeypatch):
    bars = []

    @contextmanager
    def watched(total, usage, enabled=None):
        with progress(total, usage, True, console()) as ticker:
            bars.append(ticker)
            yield ticker

    monkeypatch.setattr(api, "progress_bar", watched)
    (tmp_path / "p.decomp").write_text(THREE_CALLS)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"id": "only", "question": "q"}) + "\n")
    model = Watching(bars)
    session = Session(model=model, prices={"fake": Price(1e6, 0)})
    done = api.run_dataset(tmp_path / "p.decomp", tmp_path / "rows.jsonl", session=session,
                           run_dir=tmp_path / "run", progress=True)
    assert done.rows == 1 and done.failed == 0
    # one row: as its 2nd and 3rd requests arrive, the bar already shows the calls that ended
    first, second, third = model.seen
    assert "calls 0 " in first and "tokens 0 " in first and "cost" not in first
    assert "calls 1 " in second and "calls 2 " in third
    # one unit of money per prompt token: the first request's prompt tokens
    assert f"cost {fake_tokens(model.history[0].prompt)}" in second
    assert len({first, second, third}) == 3
    assert bars[0].bar.tasks[0].completed == 1  # the row itself ended only after
    assert bars[0].usage.listener is None      # the bar stops listening when the run ends


def test_cache_hits_move_the_bar_too():
    usage = Usage()
    with progress(2, usage, True, console()) as ticker:
        usage.cache_hits += 2
        usage.changed()
        assert "cache hits 2" in ticker.line()


def test_the_time_left_shows_from_the_first_row():
    assert eta(None, 0, 3) == eta(5.0, 0, 3) == "-:--:--"
    assert eta(10.0, 1, 3) == "0:00:20"
    assert eta(3600.0, 1, 2) == "1:00:00"
    assert eta(4.0, 2, 2) == "0:00:00"
    out = console()
    with progress(3, Usage(), True, out) as ticker:
        ticker.bar.refresh()
        assert "-:--:--" in out.file.getvalue().rsplit("\r", 1)[-1]  # no row ended yet
        ticker({"index": 0})
        ticker.bar.refresh()
        shown = out.file.getvalue().rsplit("\r", 1)[-1]  # the bar as drawn last
    assert "1/3" in shown and "ETA" in shown and "-:--:--" not in shown


def test_disabled_progress_draws_nothing_but_still_says_its_line(capsys):
    usage = Usage(calls=3)
    with progress(2, usage, enabled=False) as ticker:
        ticker({"index": 0, "error": "x"})
        assert ticker.line() == "failed 1 · calls 3 · tokens 0 · cache hits 0"
        assert usage.listener is None
    assert capsys.readouterr().err == ""


def test_the_bar_gives_the_time_requests_and_calls_ran_and_queued():
    """The mean model request and the mean call of the handler that waited the most, each as
    the time it ran + the time it queued (issue 44: latencies that hid their queueing)."""
    usage = Usage()
    with progress(4, usage, enabled=False) as ticker:
        assert "queued" not in ticker.line() and "model" not in ticker.line()
        usage.request("m", 0.5, 1, 1, None, queued=0.2)
        usage.request("m", 0.3, 1, 1, None)  # 0.4 s on average, 0.1 of it queued
        usage.count("fast", 10, 0.01)
        usage.count("nap", 2, 3.0, 2.6)
        line = ticker.line()
    assert " · model 300 ms + 100 ms queued" in line
    assert " · [nap] 200 ms + 1.30 s queued" in line and "[fast]" not in line
    usage.request("m", 0.4, 1, 1, None)  # taken as it comes: each request once
    assert ticker.times.text(usage).startswith(" · model 333 ms + 67 ms queued")
