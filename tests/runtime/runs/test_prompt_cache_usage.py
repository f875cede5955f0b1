"""Prompt-cache tokens end to end: an OpenAI-shaped server (the mock) that reports
`prompt_tokens_details.cached_tokens` and `completion_tokens_details.reasoning_tokens`; a dataset
run through `decomp.runtime.runs.api.run_dataset` and `decomp run --input` counts them per row,
per model and in the summary, prices the cached ones at `price_cached`, and shows them in the
progress line and the trace views."""
from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from decomp.runtime.cli import main
from decomp.runtime.engine.budgets import RowContext, Budget, Usage
from decomp.runtime.models.prices import Price
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.runtime.runs.progress import progress
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.tree import show_rows, show_tree

pytestmark = pytest.mark.usefixtures("clean_env")

CACHED, REASONING, ROWS = 3, 1, 3
PROGRAM = '''
model default = "openai:mock" (base_url="{url}", api="completions"{price})
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {{
    QS: [ask] #question
    QS: [ask] again #1
}}
main p
'''

# the mock server's replies report cached and reasoning tokens (the `server` fixture, tests/conftest.py)
MOCK_SERVER = {"usage": {"prompt_tokens_details": {"cached_tokens": CACHED},
                         "completion_tokens_details": {"reasoning_tokens": REASONING}}}


@pytest.fixture
def rows(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "question": f"question {i}"}) + "\n" for i in range(ROWS)))
    return path


def program(tmp_path, server, price="") -> str:
    path = tmp_path / "p.decomp"
    path.write_text(PROGRAM.format(url=server.base_url, price=price))
    return path


def cost(summary: dict, price: Price) -> float:
    """What the summary's tokens cost at `price`, its cached ones at `price_cached`."""
    prompt, cached = summary["prompt_tokens"], summary["cached_tokens"]
    return ((prompt - cached) * price.price_in + cached * price.price_cached
            + summary["completion_tokens"] * price.price_out) / 1e6


def text_of(draw) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    draw(console)
    return console.export_text()


def test_a_run_counts_and_prices_cached_tokens(tmp_path, rows, server):
    price = ", price_in=2, price_out=10, price_cached=0.5"
    done = run_dataset(program(tmp_path, server, price), rows, run_dir=tmp_path / "run",
                       options=RunOptions(cache_mode="off"))
    summary = done.summary
    assert (done.rows, done.failed, summary["calls"]) == (ROWS, 0, 2 * ROWS)
    assert (summary["cached_tokens"], summary["reasoning_tokens"]) == (CACHED * 2 * ROWS, REASONING * 2 * ROWS)
    assert summary["prompt_tokens"] > summary["cached_tokens"]
    expected = cost(summary, Price(2, 10, 0.5))
    assert summary["cost"] == pytest.approx(expected, abs=1e-6)
    assert expected < cost({**summary, "cached_tokens": 0}, Price(2, 10, 0.5))  # cheaper than uncached
    model = summary["models"]["openai:mock"]
    assert (model["requests"], model["cached_tokens"], model["reasoning_tokens"]) == (2 * ROWS, CACHED * 2 * ROWS,
                                                                                  REASONING * 2 * ROWS)
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary
    assert done.to_dict()["cached_tokens"] == summary["cached_tokens"]  # the line `decomp run --input` prints
    for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines():
        usage = json.loads(line)["usage"]
        assert (usage["cached_tokens"], usage["reasoning_tokens"]) == (2 * CACHED, 2 * REASONING)
        assert usage["models"]["openai:mock"]["cached_tokens"] == 2 * CACHED


def test_the_trace_views_show_the_cached_tokens(tmp_path, rows, server):
    run_dataset(program(tmp_path, server), rows, run_dir=tmp_path / "run", options=RunOptions(cache_mode="off"))
    run = RunDir.open(tmp_path / "run")
    assert f"({CACHED * 2 * ROWS} prompt-cached)" in text_of(lambda c: show_rows(run, c))
    record = run.records()[0]
    tree = run.trace(record["index"])
    models = [node for node in _walk(tree) if node.kind == "model"]
    assert [node.facts["cached_tokens"] for node in models] == [CACHED, CACHED]
    assert text_of(lambda c: show_tree(record, tree, c)).count(f"tok ({CACHED} prompt-cached)") == 2


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def test_decomp_run_prices_cached_tokens_from_a_prices_file(tmp_path, rows, server):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"mock": {"price_in": 4, "price_out": 8, "price_cached": 1}}))
    result = CliRunner().invoke(main, ["run", str(program(tmp_path, server)), "--input", str(rows), "--cache", "off",
                                       "--prices", str(prices), "--run-dir", str(tmp_path / "run")],
                                env={"OPENAI_API_KEY": "dummy"})
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["cached_tokens"] == CACHED * 2 * ROWS
    assert summary["cost"] == pytest.approx(cost(summary, Price(4, 8, 1)), abs=1e-6)


def test_the_progress_line_shows_the_share_of_prompt_tokens_cached():
    usage = Usage()
    bar = Console(file=io.StringIO(), force_terminal=True, width=160)
    with progress(1, usage, True, bar) as ticker:  # the bar, told by the run's usage as each call ends
        assert "cached" not in ticker.line()
        row = RowContext(0, Budget(), usage)
        row.charge(150, 30, 0, model="m", cached_tokens=None)
        assert "tokens 180 · cache hits 0" in ticker.line()  # no server said: nothing shown
        row.charge(100, 10, 0, model="m", cached_tokens=82)
        assert "tokens 290 (cached 33%) · cache hits 0" in ticker.line()  # 82 of 250 prompt tokens
