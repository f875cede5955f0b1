"""A run whose program recursed 1000 deep (--max-depth 1010): its trace is written to the run
directory, read back, shown as a tree (in parts, the failure in red all the way down), put on the
HTML page and compared by `decomp trace diff`, with no recursion limit in the way."""
from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from tests.helpers import DEEP_RECURSION, registry_with
from decomp.runtime.engine import deepjson
from decomp.runtime.engine.session import Session
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.diff import diff_runs, first_divergence
from decomp.runtime.views.page import page_data, render_html
from decomp.runtime.views.tree import MAX_DRAWN_DEPTH, show_rows, show_tree

DOWN = DEEP_RECURSION
# the innermost call's `inc` fails (1 // 0), so the error is recorded at every level
FNS = {"dec": lambda q: int(q) - 1, "inc": lambda q: 1 // (int(q) + 1) if q == "-1" else int(q) + 1}


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("deep")
    data = tmp / "rows.jsonl"
    data.write_text(json.dumps({"id": "deep", "n": 1000}) + "\n" + json.dumps({"id": "shallow", "n": 2}) + "\n",
                    encoding="utf-8")
    (tmp / "down.decomp").write_text(DOWN, encoding="utf-8")
    session = Session(registry=registry_with(FNS), max_depth=1010)
    module = session.load(tmp / "down.decomp")
    run_dataset(module, data, session=session, run_dir=tmp / "run")
    return RunDir.open(tmp / "run")


def test_the_deep_rows_trace_is_stored_and_read_back(deep_run):
    records = {r["id"]: r for r in deep_run.records()}
    assert set(records) == {"deep", "shallow"}
    assert "ZeroDivisionError" in records["deep"]["error"]
    tree = deep_run.trace(records["deep"]["index"])
    assert tree is not None and len(list(tree.walk())) > 5000
    assert sum(1 for node in tree.walk() if node.error) > 2000


def text_of(draw, width=120) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    draw(console)
    return console.export_text()


def test_the_deep_tree_is_shown_in_parts(deep_run):
    record = next(r for r in deep_run.records() if r["id"] == "deep")
    text = text_of(lambda console: show_tree(record, deep_run.trace(record["index"]), console))
    parts = text.count("⤵ continued in part")
    assert parts >= 2000 // MAX_DRAWN_DEPTH  # some 2000 levels drawn, a part at a time
    assert f"part {parts + 1}, continued from part {parts}" in text
    assert "✗" in text and "ZeroDivisionError" in text  # the failure at the bottom is written
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "deep" in text_of(lambda console: show_rows(deep_run, console))


def test_the_page_and_the_diff_take_the_deep_tree(deep_run):
    page = render_html(deep_run)
    assert page.count('<tr class="row') >= 2
    data = page_data(deep_run)
    deepest, stack = 0, [(data["trees"]["0"], 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.get("ch", ()))
    assert deepest > 3000
    embedded = page.split('id="trace-data">')[1].split("</script>")[0].replace("<\\/", "</")
    assert deepjson.loads(embedded)["strings"] == data["strings"]
    tree = deep_run.trace(0)
    assert first_divergence(tree, deep_run.trace(0)) is None
    assert diff_runs(deep_run, deep_run) == []
