"""What the views show of issue 44: each call's and request's time in two parts, the time it ran
and the time it queued (`decomp trace show`, the HTML page), and the rows' questions in the
HTML page's table (escaped, cut, whole in the cell's title)."""
from __future__ import annotations

import asyncio
import html
import io
import json
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from decomp.runtime.cli import main
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.views.page import QUESTION_WIDTH, page_data, render_html, row_questions
from decomp.runtime.views.tree import show_rows, show_tree, timing_text

NAP = 0.1
ASK = '''
handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)
program main(question: str) -> str {
    QS: [ask] #question
}
main main
'''
LONG = "Which <b>bold</b> & \"quoted\" question " + "goes on and on " * 10 + "until the end?"


class Napping(FakeModel):
    async def complete(self, request):
        await asyncio.sleep(NAP)
        return await super().complete(request)


def napping_run(tmp_path, questions: list[str]):
    """A run whose requests queue behind one another (concurrency 1)."""
    (tmp_path / "p.decomp").write_text(ASK)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": q}) + "\n" for i, q in enumerate(questions)))
    session = Session(model=Napping(default='"x"'), scheduler=Scheduler(1))
    run_dataset(tmp_path / "p.decomp", data, run_dir=tmp_path / "run", session=session)
    return RunDir.open(tmp_path / "run"), data


def text_of(draw) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    draw(console)
    return console.export_text()


# ---- the two parts of a time
def test_a_time_is_shown_whole_or_in_its_two_parts():
    assert timing_text(0.1234) == "123.4 ms"
    assert timing_text(0.1234, 0.00001) == "123.4 ms"  # a wait too short to show
    assert timing_text(1.5, 1.25) == "250.0 ms + 1,250.0 ms queued"


def test_trace_show_gives_the_time_each_request_ran_and_queued(tmp_path):
    run, _ = napping_run(tmp_path, ["q0", "q1", "q2"])
    records = {r["index"]: r for r in run.records()}
    last = text_of(lambda c: show_tree(records[2], run.trace(2), c))
    found = re.findall(r"([\d,.]+) ms \+ ([\d,.]+) ms queued", last)
    assert found  # the request and its handler call, each in two parts
    ran, waited = (float(x.replace(",", "")) for x in found[-1])
    assert ran >= NAP * 1000 and waited >= 1.5 * NAP * 1000  # the third request waited for two
    header = text_of(lambda c: show_rows(run, c))
    assert re.search(r"model fake: 3 requests, mean [\d.]+ ms \+ [\d.]+ ms queued", header)
    assert re.search(r"handler \[ask\]: 3 calls, mean [\d.]+ ms \+ [\d.]+ ms queued", header)


def test_the_page_shows_both_in_the_trees_and_the_latency_tables(tmp_path):
    run, _ = napping_run(tmp_path, ["q0", "q1", "q2"])
    data = page_data(run)
    queued = [node.get("qs", 0) for tree in data["trees"].values() for node in _nodes(tree)
              if data["strings"][node["k"]] == "model"]
    assert sorted(round(q / NAP) for q in queued) == [0, 1, 2]
    page = render_html(run)
    assert "s queued\"" in page  # the script's text for a node that waited
    handlers = re.search(r'<table id="handlers">.*?</table>', page).group()
    assert "<th>service ms</th><th>queue ms</th>" in handlers
    models = re.search(r'<table id="models">.*?</table>', page).group()
    cells = re.findall(r"<td>([^<]*)</td>", models)
    heads = re.findall(r"<th>([^<]*)</th>", models)
    figures = dict(zip(heads, cells))
    assert figures["model"] == "fake" and figures["requests"] == "3"
    assert float(figures["service s"]) >= NAP and float(figures["queue s"]) >= NAP * 0.9
    assert float(figures["mean s"]) == pytest.approx(float(figures["service s"]) + float(figures["queue s"]), abs=2e-6)


def _nodes(tree: dict):
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("ch", ()))


# ---- the rows' questions
def _rows_table(page: str) -> str:
    return re.search(r'<table id="rows">.*?</table>', page, re.S).group()


def test_the_rows_table_has_each_rows_question_escaped_and_cut(tmp_path):
    run, _ = napping_run(tmp_path, ["What is <2 & 3>?", LONG])
    table = _rows_table(render_html(run))
    heads = re.findall(r"<th>([^<]*)</th>", table)
    assert heads[:4] == ["#", "id", "question", "answer"]
    cells = re.findall(r'<td class="question" title="([^"]*)">([^<]*)</td>', table)
    assert len(cells) == 2
    (title0, shown0), (title1, shown1) = cells
    assert html.unescape(title0) == html.unescape(shown0) == "What is <2 & 3>?"
    assert "&lt;2 &amp; 3&gt;" in shown0  # escaped, never markup
    assert html.unescape(title1) == LONG  # the whole question in the title
    assert len(html.unescape(shown1)) == QUESTION_WIDTH and html.unescape(shown1).endswith("…")
    assert "<b>" not in table
    for row in re.findall(r'<tr class="row[^"]*".*?</tr>', table):  # every row has every cell
        assert row.count("<td") == len(heads)


def test_a_row_without_a_question_shows_its_first_text_input(tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": "a", "steps": 3, "task": "make tea", "answer": "x"}) + "\n")
    (tmp_path / "p.decomp").write_text(ASK.replace("question: str", "task: str").replace("#question", "#task"))
    run_dataset(tmp_path / "p.decomp", data, run_dir=tmp_path / "run", session=Session(model=Napping(default='"x"')))
    assert row_questions(RunDir.open(tmp_path / "run")) == {0: "make tea"}


def test_no_question_column_when_the_input_is_gone_or_changed(tmp_path):
    run, data = napping_run(tmp_path, ["q0", "q1"])
    assert row_questions(run) == {0: "q0", 1: "q1"}
    data.write_text(data.read_text().replace("q1", "other"))  # not the file the run read any more
    assert row_questions(run) == {}
    assert "<th>question</th>" not in _rows_table(render_html(run))
    data.unlink()
    assert row_questions(run) == {}
    assert "<th>question</th>" not in _rows_table(render_html(run))


def test_trace_html_from_the_command_line_writes_the_question_column(tmp_path):
    run, _ = napping_run(tmp_path, ["How many <legs>?"])
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["trace", "html", str(run.path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    table = _rows_table(out.read_text())
    assert '<td class="question" title="How many &lt;legs&gt;?">How many &lt;legs&gt;?</td>' in table


def test_a_node_of_an_older_trace_has_no_queue_figure(tmp_path):
    node = TraceNode("call", handler="x", seconds=0.5)
    assert node.queued is None and node.service == 0.5
    text = text_of(lambda c: show_tree({"index": 0, "id": "a"}, TraceNode("row", children=[node]), c))
    assert "500.0 ms" in text and "queued" not in text
