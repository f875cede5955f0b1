"""ADaPT runs in `decomp trace show` and `decomp trace html`: plans (their order and note),
AND/OR groups, steps that never ran (skipped), failed outcomes (amber, not an error's red),
executor turns (action and observation) and a node's details.

Most trees are built by hand (a run directory written with `RunDir.create` / `add`); one run
is real: `adapt/textcraft_symbolic` (no model) on three TextCraft tasks.
"""
from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest
from rich.console import Console

from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.manifest import make_manifest
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.views.page import decode_text, page_data, render_html
from decomp.runtime.views.tree import show_rows, show_tree

REPO = Path(__file__).resolve().parents[3]
TASKS = REPO / "tests" / "fixtures" / "textcraft" / "tasks_dev.jsonl"
RED = re.compile(r"\x1b\[(?:\d+;)*31(?:;\d+)*m")
AMBER = re.compile(r"\x1b\[(?:\d+;)*38;5;208m\s*✗ failed")  # dark_orange
DIM = re.compile(r"\x1b\[(?:\d+;)*2(?:;\d+)*m")
ORDER = "((Step 1 AND Step 2) OR Step 3)"
PLAN_TEXT = ("Step 1: Fetch 2 oak planks\nStep 2: Craft 4 sticks using 2 oak planks\n"
             "Step 3: Fetch 4 sticks\nExecution Order: " + ORDER)
NOTE = "the execution order was read leniently: a missing ')' was added"
TRACEBACK = ('Traceback (most recent call last):\n  File "/home/me/project/tools.py", line 3, in count\n'
             '    raise ValueError("no such item")\nValueError: no such item')
MISSING = {"task": "Fetch 2 oak planks", "success": False, "judge": "either", "stopped": "the model said failed"}
GOT = {"task": "Fetch 4 sticks", "success": True, "judge": "reward", "stopped": "the environment is done"}


# ---------------------------------------------------------------- the hand-built trees
def executor_call(task: str, answer: dict, failed: bool, turns: list[tuple[str, str]]) -> TraceNode:
    """A call of [act]: a model request, then an iteration, per turn."""
    call = TraceNode("call", handler="act", query=task, answer=answer, failed=failed, seconds=0.5)
    for line, observation in turns:
        call.child("model", handler="act", prompt=f"Task: {task}\n> ", raw_output=line,
                   prompt_tokens=120, completion_tokens=8, seconds=0.1)
        call.child("iteration", label=line, answer=observation)
    return call


def executor_step(task: str, answer: dict, failed: bool, turns: list[tuple[str, str]]) -> TraceNode:
    """A step of [act] and the call it made."""
    return TraceNode("step", label="[act] #task", handler="act", operator="select", location="/x/m.decomp:9",
                     query=task, answer=answer, failed=failed, children=[executor_call(task, answer, failed, turns)])


def plan_tree() -> TraceNode:
    """Row `planned`: the executor fails, the plan's first AND fails, its OR's Step 3 works."""
    step1 = TraceNode("item", label="Step 1: Fetch 2 oak planks", query="Fetch 2 oak planks", answer=MISSING,
                      failed=True, children=[executor_call("Fetch 2 oak planks", MISSING, True, [
                          ("get 2 oak planks", "Could not find enough items to get 2 oak planks."),
                          ("think: I need logs first.", "OK."),
                          ("task failed", "OK.")])])
    step2 = TraceNode("item", label="Step 2: Craft 4 sticks using 2 oak planks", skipped=True)
    group_and = TraceNode("and", label="(Step 1 AND Step 2)", answer=[MISSING], failed=True, children=[step1, step2])
    step3 = TraceNode("item", label="Step 3: Fetch 4 sticks", query="Fetch 4 sticks", answer=GOT,
                      children=[executor_call("Fetch 4 sticks", GOT, False, [("get 4 sticks", "Got 4 sticks")])])
    group_or = TraceNode("or", label=ORDER, answer=[[MISSING], GOT], children=[group_and, step3])
    plan = TraceNode("plan", label=ORDER, query=PLAN_TEXT, details=NOTE, answer=[[[MISSING], GOT]],
                     children=[group_or])
    run_plan = TraceNode("step", label="(plan) [act] #1", handler="act", operator="plan", location="/x/m.decomp:14",
                         answer=[[[MISSING], GOT]], children=[plan])
    first = executor_step("craft 1 stick", MISSING, True, [("craft 1 stick using 2 planks",
                                                             "Could not find enough items to craft 1 stick.")])
    return TraceNode("row", label="planned", answer=[[[MISSING], GOT]], children=[first, run_plan])


def failed_tree() -> TraceNode:
    """Row `unsolved`: the plan's AND fails at its first step; the later OR group never runs."""
    order = "(Step 1 AND (Step 2 OR Step 3))"
    step1 = TraceNode("item", label="Step 1: Fetch 2 oak planks", query="Fetch 2 oak planks", answer=MISSING,
                      failed=True, children=[executor_call("Fetch 2 oak planks", MISSING, True,
                                                           [("task failed", "OK.")])])
    rest = TraceNode("or", label="(Step 2 OR Step 3)", skipped=True, children=[
        TraceNode("item", label="Step 2: Craft 4 sticks", skipped=True),
        TraceNode("item", label="Step 3: Fetch 4 sticks", skipped=True)])
    group = TraceNode("and", label=order, answer=[MISSING], failed=True, children=[step1, rest])
    plan = TraceNode("plan", label=order, query="Step 1: ...", answer=[MISSING], failed=True, children=[group])
    return TraceNode("row", label="unsolved", answer=[MISSING], failed=True, children=[
        TraceNode("step", label="(plan) [act] #1", handler="act", operator="plan", answer=[MISSING], failed=True,
                  children=[plan])])


def error_tree() -> TraceNode:
    """Row `broken`: a Python handler raised (an error, with the user's traceback)."""
    call = TraceNode("call", handler="count", query="sticks", error="[count] python: ValueError: no such item",
                     details=TRACEBACK)
    return TraceNode("row", label="broken", error=call.error, children=[
        TraceNode("step", label="[count] sticks", handler="count", query="sticks", error=call.error, children=[call])])


def record(index: int, tree: TraceNode, outcome: str) -> dict:
    out = {"id": tree.label, "index": index, "answer": tree.answer, "outcome": outcome,
           "usage": {"calls": 5, "cache_hits": 0, "prompt_tokens": 600, "completion_tokens": 40}, "seconds": 1.5}
    if tree.error is not None:
        out["error"] = tree.error
        out["answer"] = None
    return out


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory) -> RunDir:
    folder = tmp_path_factory.mktemp("plans")
    program, data = folder / "m.decomp", folder / "data.jsonl"
    program.write_text("# trees written by hand\n", encoding="utf-8")
    data.write_text("", encoding="utf-8")
    run = RunDir.create(folder / "run", make_manifest(program, None, [program], data, {}))
    for index, (tree, outcome) in enumerate(((plan_tree(), "ok"), (failed_tree(), "failed"), (error_tree(), "error"))):
        run.add(record(index, tree, outcome), tree)
    run.finish(3, 4.5)
    return RunDir.open(folder / "run")


def text_of(draw, width: int = 200) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    draw(console)
    return console.export_text()


def ansi_of(draw, width: int = 200) -> str:
    out = io.StringIO()
    draw(Console(file=out, force_terminal=True, color_system="truecolor", width=width))
    return out.getvalue()


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


def tree_text(run: RunDir, row: str, ansi: bool = False) -> str:
    found = run.find(row)
    draw = (lambda c: show_tree(found, run.trace(found["index"]), c))
    return ansi_of(draw) if ansi else text_of(draw)


# ---------------------------------------------------------------- decomp trace show
def test_a_plan_reads_as_its_order_with_its_note_and_group_headers(hand_run):
    text = tree_text(hand_run, "planned")
    lines = text.splitlines()
    plan_at = next(i for i, line in enumerate(lines) if "plan " + ORDER in line)
    assert re.search(r"── plan \(\(Step 1 AND Step 2\) OR Step 3\)  ✓$", lines[plan_at])
    assert lines[plan_at + 1].endswith("note: " + NOTE)
    assert re.search(r"── OR  ✓$", lines[plan_at + 2])  # the top group: its order is the plan's
    assert re.search(r"── AND \(Step 1 AND Step 2\)  ✗ failed$", lines[plan_at + 3])  # nested: its own
    assert "Execution Order" not in text  # the planner's text is not repeated
    assert "item [act] Step 1: Fetch 2 oak planks → " in text
    assert 'item [act] Step 3: Fetch 4 sticks → {"task": "Fetch 4 sticks", "success": true' in text


def test_skipped_steps_are_dim_and_have_no_answer(hand_run):
    text = tree_text(hand_run, "unsolved")
    skipped = [line for line in text.splitlines() if line.endswith("skipped")]
    assert len(skipped) == 3
    assert "── OR (Step 2 OR Step 3)  skipped" in skipped[0]  # a nested group: its own order
    assert "item Step 2: Craft 4 sticks  skipped" in skipped[1] and "item Step 3: Fetch 4 sticks" in skipped[2]
    assert all("→" not in line for line in skipped)
    out = tree_text(hand_run, "unsolved", ansi=True)
    for needle in ("Step 2: Craft 4 sticks", "Step 3: Fetch 4 sticks"):
        line = line_with(out, needle)
        assert DIM.search(line) and not RED.search(line)
    planned = tree_text(hand_run, "planned")
    assert line_with(planned, "Step 2: Craft 4 sticks using").rstrip().endswith("item Step 2: Craft 4 sticks using 2 oak planks  skipped")


def test_a_failed_outcome_is_amber_and_an_error_red(hand_run):
    text = tree_text(hand_run, "unsolved")
    assert "✗ failed" in line_with(text, "row unsolved") and "✗ failed" in line_with(text, "Step 1: Fetch 2 oak planks")
    assert re.search(r"plan \(Step 1 AND \(Step 2 OR Step 3\)\)  ✗ failed", text)
    assert text.splitlines()[0].startswith("row 1  id unsolved") and "  ✗ failed  " in text.splitlines()[0]
    out = tree_text(hand_run, "unsolved", ansi=True)
    assert not any(RED.search(line) for line in out.splitlines())  # no error anywhere: nothing red
    assert AMBER.search(line_with(out, "Step 1: Fetch 2 oak planks"))

    broken = tree_text(hand_run, "broken")
    assert "✗ failed" not in broken
    assert "✗ [count] python: ValueError: no such item" in broken
    assert 'File "tools.py", line 3, in count' in broken  # the error's details, as before
    assert RED.search(line_with(tree_text(hand_run, "broken", ansi=True), "✗ [count]"))


def test_executor_turns_are_one_line_each_action_then_observation(hand_run):
    text = tree_text(hand_run, "planned")
    turns = [line.split("> ", 1)[1] for line in text.splitlines() if re.search(r"── > ", line)]
    assert turns == [
        "craft 1 stick using 2 planks  Could not find enough items to craft 1 stick.",
        "get 2 oak planks  Could not find enough items to get 2 oak planks.",
        "think: I need logs first.  OK.",
        "task failed  OK.",
        "get 4 sticks  Got 4 sticks",
    ]
    assert "iteration" not in text
    assert text.count("model [act]") == 5  # each turn's request is still shown, as before


def test_the_rows_table_has_an_outcome_column_and_the_totals_count_failed_outcomes(hand_run):
    text = text_of(lambda c: show_rows(hand_run, c))
    assert "outcome" in line_with(text, "answer")
    assert "✗ failed" in line_with(text, " unsolved ")
    assert "✗ failed" not in line_with(text, " planned ") and " ok " in line_with(text, " planned ")
    assert "✗ failed" not in line_with(text, " broken ")
    assert "failed 1  failed outcome 1  success rate 0.333" in text


# ---------------------------------------------------------------- decomp trace html
def _nodes(node: dict):
    yield node
    for child in node.get("ch", ()):
        yield from _nodes(child)


def _find(tree: dict, strings: list[str], kind: str, label: str | None = None) -> dict:
    return next(n for n in _nodes(tree) if decode_text(n.get("k"), strings) == kind
                and (label is None or decode_text(n.get("l"), strings) == label))


def test_the_page_json_has_failed_skipped_and_details(hand_run):
    data = page_data(hand_run)
    strings, trees = data["strings"], data["trees"]
    plan = _find(trees["0"], strings, "plan")
    assert decode_text(plan["l"], strings) == ORDER and decode_text(plan["q"], strings) == PLAN_TEXT
    assert decode_text(plan["d"], strings) == NOTE and "f" not in plan
    assert _find(trees["0"], strings, "and")["f"] == 1
    step1 = _find(trees["0"], strings, "item", "Step 1: Fetch 2 oak planks")
    assert step1["f"] == 1 and "sk" not in step1 and "e" not in step1
    skipped = _find(trees["0"], strings, "item", "Step 2: Craft 4 sticks using 2 oak planks")
    assert skipped["sk"] == 1 and "a" not in skipped and "f" not in skipped
    assert _find(trees["1"], strings, "or")["sk"] == 1
    turn = _find(trees["0"], strings, "iteration", "get 4 sticks")
    assert decode_text(turn["a"], strings) == "Got 4 sticks"
    call = _find(trees["2"], strings, "call")
    assert decode_text(call["d"], strings) == TRACEBACK and "f" not in call
    assert all("f" not in n and "sk" not in n for n in _nodes(trees["2"]))


def test_the_page_renders_them(hand_run):
    page = render_html(hand_run)
    table = page[page.index('<table id="rows"'):]
    assert '<tr class="row failed-outcome" data-index="1"' in table
    assert '<tr class="row failed" data-index="2"' in table and '<tr class="row" data-index="0"' in table
    assert ">outcome failed</td>" in table and ">failed</td>" in table
    assert '<div data-key="failed_outcome" class="warn"><dt>failed outcome</dt><dd>1</dd></div>' in page
    assert '<div data-key="success_rate"><dt>success rate</dt>' in page
    script = page[page.rindex("<script>"):]
    for code in ('node.classList.add("failed-outcome")', 'node.classList.add("skipped")',
                 'span(head, "ok skipped", "skipped")', 'span(head, "ok outcome-failed", "failed"',
                 'span(head, "action", "> "', 'span(head, "observation"', 'span(head, "note", "note: "',
                 'collapsed("details"', 'collapsed("plan-text"'):
        assert code in script, code
    for rule in (".node.skipped > .node-head", ".node-head .ok.outcome-failed", "tr.row.failed-outcome",
                 "details.details"):
        assert rule in page, rule


# ---------------------------------------------------------------- a real ADaPT run
@pytest.fixture(scope="module")
def adapt_run(tmp_path_factory) -> RunDir:
    from decomp.runtime.runs.api import run_dataset

    if not TASKS.exists():
        pytest.skip(f"{TASKS} is missing")
    rows = [json.loads(line) for line in TASKS.read_text(encoding="utf-8").splitlines() if line.strip()]
    folder = tmp_path_factory.mktemp("adapt")
    data = folder / "tasks.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (rows[0], rows[11])), encoding="utf-8")
    run_dataset("adapt/textcraft_symbolic", data, fields={"dmax": 4}, run_dir=folder / "r")
    return RunDir.open(folder / "r")


def test_a_real_adapt_run_in_the_terminal(adapt_run):
    failed, solved = adapt_run.records()
    assert (failed["outcome"], solved["outcome"]) == ("failed", "ok")  # depth 4 and 3 at dmax=4
    text = tree_text(adapt_run, failed["id"])
    assert re.search(r"── plan \(Step 1 AND Step 2\)  ✗ failed", text)
    assert re.search(r"── AND  ✗ failed", text)
    assert re.search(r"── item Step \d: .*  skipped$", text, re.MULTILINE)
    assert "Error" not in text and "✗ [" not in text
    solved_text = tree_text(adapt_run, solved["id"])
    assert re.search(r"── plan \(Step 1 AND Step 2( AND Step 3)?\)  ✓", solved_text)
    assert re.search(r"── > get \d+ [\w ]+  Got \d+ ", solved_text)  # the executor's action and observation
    assert "skipped" not in solved_text


def test_a_real_adapt_run_in_the_page(adapt_run):
    data = page_data(adapt_run)
    strings = data["strings"]
    failed = data["trees"]["0"]
    assert any(n.get("sk") for n in _nodes(failed)) and _find(failed, strings, "plan")["f"] == 1
    solved = data["trees"]["1"]
    assert not any(n.get("sk") or n.get("e") for n in _nodes(solved))
    assert decode_text(_find(solved, strings, "iteration")["a"], strings).startswith(("Got ", "Crafted "))


# ---------------------------------------------------------------- in Chromium (`browser`: conftest.py)
def _wait(condition, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def _rgb(element, prop: str) -> tuple[int, int, int]:
    return tuple(int(x) for x in re.findall(r"\d+", element.value_of_css_property(prop))[:3])


@pytest.mark.chromium
def test_chromium_shows_skipped_steps_failed_outcomes_turns_and_details(browser, hand_run, tmp_path):
    from selenium.webdriver.common.by import By

    from tests.runtime.views.test_page import _artifacts, _errors

    page = tmp_path / "plans.html"
    page.write_text(render_html(hand_run), encoding="utf-8")
    browser.get(page.as_uri() + "#row=0")
    assert _wait(lambda: browser.find_elements(By.CSS_SELECTOR, '#tree > .node[data-path="0"]'))
    browser.find_element(By.ID, "expand-all").click()

    def head(node, cls):
        return node.find_element(By.CSS_SELECTOR, f":scope > .node-head .{cls}")

    plan = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-kind="plan"]')
    assert head(plan, "label").text == ORDER and head(plan, "note").text == "note: " + NOTE
    assert plan.find_elements(By.CSS_SELECTOR, ":scope > .node-head .answer") == []
    text_box = plan.find_element(By.CSS_SELECTOR, ":scope > .node-body > details.plan-text")
    assert text_box.get_attribute("open") is None
    group_or = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-kind="or"]')
    assert head(group_or, "kind").text == "OR" and group_or.find_elements(By.CSS_SELECTOR, ":scope > .node-head .label") == []
    group_and = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-kind="and"]')
    assert head(group_and, "kind").text == "AND" and head(group_and, "label").text == "(Step 1 AND Step 2)"

    skipped = browser.find_element(By.CSS_SELECTOR, "#tree .node.skipped")
    assert head(skipped, "label").text == "Step 2: Craft 4 sticks using 2 oak planks"
    assert head(skipped, "ok").text == "skipped"
    assert skipped.find_elements(By.CSS_SELECTOR, ":scope > .node-head .answer") == []
    assert float(skipped.find_element(By.CSS_SELECTOR, ":scope > .node-head").value_of_css_property("opacity")) < 1

    failed = browser.find_element(By.CSS_SELECTOR, '#tree .node.failed-outcome[data-kind="item"]')
    assert head(failed, "label").text == "Step 1: Fetch 2 oak planks"
    badge = head(failed, "ok")
    assert badge.text == "failed" and "outcome-failed" in badge.get_attribute("class")
    red, green, blue = _rgb(badge, "background-color")
    assert red > 120 and green > 60 and blue < 40  # amber
    assert browser.find_elements(By.CSS_SELECTOR, "#tree .node.failed") == []  # no error in this row

    turn = browser.find_element(By.CSS_SELECTOR, '#tree .node[data-kind="iteration"]')
    assert head(turn, "kind").text == "turn 1"
    assert head(turn, "action").text == "> craft 1 stick using 2 planks"
    assert head(turn, "observation").text.endswith("Could not find enough items to craft 1 stick.")
    browser.execute_script("arguments[0].scrollIntoView()", plan)
    browser.save_screenshot(str(_artifacts() / "trace_html_plan.png"))

    browser.get("about:blank")
    browser.get(page.as_uri() + "#row=2")
    browser.find_element(By.ID, "expand-all").click()
    error = browser.find_element(By.CSS_SELECTOR, '#tree .node.failed[data-kind="call"]')
    assert head(error, "ok").text == "failed" and "outcome-failed" not in head(error, "ok").get_attribute("class")
    red, green, blue = _rgb(head(error, "ok"), "color")
    assert red > green + 60 and red > blue + 60  # red
    box = error.find_element(By.CSS_SELECTOR, ":scope > .node-head > details.details")
    assert box.get_attribute("open") is None and box.find_element(By.TAG_NAME, "summary").text == "traceback"
    pre = box.find_element(By.CSS_SELECTOR, "pre.details")
    assert not pre.is_displayed()
    box.find_element(By.TAG_NAME, "summary").click()
    assert pre.is_displayed() and pre.text == TRACEBACK
    assert _errors(browser) == []
