"""Terminal views of a run directory, for `decomp trace show`.

    show_rows(run, console)            the run's header (program, input, model, totals) and a
                                       table of its rows; failed rows in red; a run of more
                                       than 50 rows shows its failed rows first, then its first
                                       rows, and says how many are left out
    show_tree(record, tree, console)   one row's decomposition tree, one line per node

A tree line reads `kind [handler] (operator) query → answer` followed by dim details: the
program line (file:line), tokens in/out, latency, and "cached" when the step cache answered. A
call or model request that waited for a slot (a worker, the concurrency limit, a busy model)
shows its time in two parts, `102.0 ms + 1,061.0 ms queued`: the time it ran (its service time)
and the time it waited. The run's header gives the same two means per model and per handler.
The default operator `select` is not written. A step (or foreach item) whose only child is
the handler call it made, with the same query and answer, is drawn as one line (the call's
details on it), so a row reads as its program. Nodes that failed, and the path down to them,
are red and bold; the error is written under the deepest node that has it. A model request
shows the last lines of its prompt and its raw output beneath it.

A failed outcome (a node that answered, but failed: an executor that did not finish its task)
is not an error: its line ends in an amber `✗ failed`, and the path to it stays as it is. An
ADaPT plan reads as its order, `plan ((Step 1 AND Step 2) OR Step 3)` (its note beneath it when
the order was unreadable), its groups as `AND` / `OR` headers (a nested group with its own
order), its steps as `item Step n: text`; a step that never ran (its group was decided before
it) is dim and marked `skipped`, with no answer. An executor's turn reads `> action` then the
observation, on one line.
"""
from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from decomp.dsl import lexicon
from decomp.dsl.text import shorten
from decomp.runtime.engine import deepjson
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.rundir import RunDir
#: Runs with more rows than this show failed rows first, then the first rows.
MAX_ROWS = 50
#: Of those, at most this many failed rows.
MAX_FAILED_ROWS = 30
QUERY_WIDTH, ANSWER_WIDTH, ERROR_WIDTH, PROMPT_LINES = 80, 60, 60, 3
FAILED = "bold red"
#: A failed outcome (answered, but not ok): amber, not an error's red.
FAILED_OUTCOME = "dark_orange"
SKIPPED = "dim"
KIND_STYLES = {"row": "bold", "step": "cyan", "item": "blue", "call": "green", "model": "magenta",
               "if": "yellow", "decomposer-line": "magenta", "plan": "bold yellow", "and": "bold yellow",
               "or": "bold yellow", "iteration": "bold"}
#: A plan's group nodes, drawn as `AND` / `OR` headers.
GROUPS = ("and", "or")
#: An error's place, "file:line:col" after "[name] kind, " (or leading): the table drops it.
_LEADING_PLACE = re.compile(r"^((?:\[[^\]]+\] [\w-]+)?)(?:, )?[^\s:,]+(?::\d+)+: ")
_PATH = re.compile(r"(?<![\w.<])/(?:[^\s:/]+/)+([^\s:/]+(?::\d+)+)")


# ---- small text helpers (also used by views.diff)
def show_value(value: Any, width: int = ANSWER_WIDTH) -> str:
    """An answer as JSON (a string in quotes, so "3" and 3 differ), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:  # nested deeper than Python's encoder goes
        text = deepjson.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return shorten(text, width)


#: A traceback's `File "/dir/name.py"`: the tree shows the file's name only.
_TRACEBACK_FILE = re.compile(r'File "(?:[^"\n]*/)?([^"/\n]+)"')


def short_paths(text: str) -> str:
    """`text` with absolute `/dir/file:line` paths cut to `file:line`."""
    return _PATH.sub(r"\1", text)


def timing_text(seconds: float, queued: float | None = None) -> str:
    """A time in milliseconds: `seconds` whole, or, when part of it was `queued` (waiting for a
    slot), its two parts: `102.0 ms + 1,061.0 ms queued` (service time first)."""
    waited = min(queued or 0.0, seconds)
    if round(waited * 1000, 1) == 0:
        return f"{seconds * 1000:,.1f} ms"
    return f"{(seconds - waited) * 1000:,.1f} ms + {waited * 1000:,.1f} ms queued"


def where(location: str | None) -> str:
    """A node's program line as `file:line` (no folders)."""
    if not location:
        return ""
    path, sep, line = location.rpartition(":")
    if not sep or not line.isdigit() or path.startswith("<"):
        return location
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


# ---- the rows' table
def show_rows(run: RunDir, console: Console) -> None:
    """Print the run's header and a table of its rows (failed rows in red)."""
    records = run.records()
    console.print(_run_header(run, run.summary()))
    if not records:
        console.print(Text("no complete rows yet", style="yellow"))
    else:
        failed, first, hidden = _pick_rows(records)
        console.print(_rows_table(records, failed, first))
        if hidden:
            left_failed = sum("error" in r for r in hidden)
            console.print(Text(f"{len(hidden)} more rows not shown ({left_failed} of them failed); "
                               f"decomp trace html {run.path} -o PAGE.html shows them all", style="dim"))
    console.print(Text(f"decomp trace show {run.path} --row ID for a row's tree", style="dim"))


def _run_header(run: RunDir, summary: dict) -> Text:
    main = f" (main {run.main})" if run.main else ""
    lines = [("run", str(run.path)), ("program", f"{run.program_path or '?'}{main}"),
             ("input", run.input_path or "?"), ("model", str(run.model or "none"))]
    text = Text()
    for name, value in lines:
        text.append(f"{name:<8}", style="bold").append(value + "\n")
    return text.append(_totals(summary)).append(_latencies(summary))


def _totals(summary: dict) -> Text:
    text = Text(f"rows {summary['rows']}  ")
    text.append(f"failed {summary['failed']}", style="red" if summary["failed"] else "")
    if summary.get("score") is not None:
        metric = summary.get("metric")  # named when the program chose another metric than exact match
        named = f" ({metric})" if metric and metric != "em" else ""
        text.append(f"  score {summary['score']:.3f}{named} over {summary['scored_rows']}")
    text.append_text(_outcome_totals(summary))
    cached = f" ({summary['cached_tokens']} prompt-cached)" if summary.get("cached_tokens") else ""
    text.append(f"  calls {summary['calls']}  tokens {summary['prompt_tokens']}/{summary['completion_tokens']}"
                f"{cached}  cache hits {summary['cache_hits']}  wall {summary['wall_s']} s"
                f"  sessions {summary['sessions']}")
    return text


#: The handlers the run's header names with their mean times: those of the most seconds.
MAX_TIMED_HANDLERS = 8


def _latencies(summary: dict) -> Text:
    """Lines of mean times, each as `timing_text` gives it (service time + queue time): per model
    request, and per call of the handlers that took the most time; nothing for a summary without
    them (a run of another version)."""
    text = Text()
    for name, model in sorted((summary.get("models") or {}).items()):
        if isinstance(model, dict) and isinstance(model.get("mean_s"), (int, float)):
            mean = timing_text(model["mean_s"], model.get("queue_mean_s"))
            text.append(f"\nmodel {name}: {model.get('requests', 0)} requests, mean {mean}", style="dim")
    handlers = [(name, h) for name, h in (summary.get("handlers") or {}).items()
                if isinstance(h, dict) and isinstance(h.get("mean_ms"), (int, float))]
    handlers.sort(key=lambda item: -(item[1].get("seconds") or 0))
    for name, h in handlers[:MAX_TIMED_HANDLERS]:
        mean = timing_text(h["mean_ms"] / 1000, (h.get("queue_mean_ms") or 0) / 1000)
        text.append(f"\nhandler [{name}]: {h.get('calls', 0)} calls, mean {mean}", style="dim")
    return text


def _outcome_totals(summary: dict) -> Text:
    """"  failed outcome N  success rate X" (and the environments' rate) when a row answered
    with a failed outcome or an environment judged the rows; else nothing."""
    text = Text()
    if not summary.get("failed_outcome") and summary.get("env_success_rate") is None:
        return text
    text.append(f"  failed outcome {summary.get('failed_outcome', 0)}",
                style=FAILED_OUTCOME if summary.get("failed_outcome") else "")
    if summary.get("success_rate") is not None:
        text.append(f"  success rate {summary['success_rate']:.3f}")
    if summary.get("env_success_rate") is not None:
        text.append(f"  env success rate {summary['env_success_rate']:.3f}")
    return text


def _pick_rows(records: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(failed rows shown first, other rows shown, rows left out) for a large run."""
    if len(records) <= MAX_ROWS:
        return [], records, []
    failed = [r for r in records if "error" in r][:MAX_FAILED_ROWS]
    taken = {r["index"] for r in failed}
    first = [r for r in records if r["index"] not in taken][: MAX_ROWS - len(failed)]
    taken |= {r["index"] for r in first}
    return failed, first, [r for r in records if r["index"] not in taken]


def _rows_table(records: list[dict], failed: list[dict], first: list[dict]) -> Table:
    has_gold = any("gold" in r for r in records)
    has_score = any("score" in r for r in records)
    has_outcome = any(_failed_outcome(r) for r in records)
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("#", justify="right", no_wrap=True, min_width=len(str(records[-1]["index"])))
    table.add_column("id", no_wrap=True, overflow="ellipsis", min_width=4, max_width=24)
    table.add_column("answer", no_wrap=True, overflow="ellipsis", min_width=8, max_width=40)
    if has_gold:
        table.add_column("gold", no_wrap=True, overflow="ellipsis", min_width=6, max_width=30)
    if has_score:
        table.add_column("score", justify="right", no_wrap=True, min_width=5)
    if has_outcome:
        table.add_column("outcome", no_wrap=True, min_width=8)
    for name in ("calls", "tokens", "cached"):
        table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
    table.add_column("error", overflow="fold", max_width=ERROR_WIDTH)
    for record in failed:
        table.add_row(*_cells(record, has_gold, has_score, has_outcome), style="red")
    if failed:
        table.add_section()
    for record in first:
        table.add_row(*_cells(record, has_gold, has_score, has_outcome), style="red" if "error" in record else None)
    return table


def _failed_outcome(record: dict) -> bool:
    """The row answered, with a failed outcome (not an error)."""
    return record.get("outcome") == "failed" and "error" not in record


def _cells(record: dict, has_gold: bool, has_score: bool, has_outcome: bool = False) -> list[Text]:
    """The row's cells as plain text (never read as rich markup: "[split]" stays as written)."""
    cells = [Text(cell) for cell in _cell_texts(record, has_gold, has_score)]
    if has_outcome:
        at = 3 + has_gold + has_score
        cells.insert(at, Text("✗ failed", style=FAILED_OUTCOME) if _failed_outcome(record)
                     else Text("ok" if "error" not in record else "", style="dim"))
    return cells


def _cell_texts(record: dict, has_gold: bool, has_score: bool) -> list[str]:
    usage = record.get("usage") or {}
    cells = [str(record["index"]), shorten(str(record.get("id", "")), 24), _answer_cell(record)]
    if has_gold:
        cells.append(show_value(record["gold"], 30) if "gold" in record else "")
    if has_score:
        cells.append(f"{record['score']:g}" if isinstance(record.get("score"), (int, float)) else "")
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    cells += [str(usage.get("calls", 0)), str(tokens), str(usage.get("cache_hits", 0))]
    cells.append(_error_cell(record["error"]) if "error" in record else "")
    return cells


def _error_cell(error: object) -> str:
    """A row's error for the table: no folders, no leading file:line:col, cut short."""
    return shorten(_LEADING_PLACE.sub(r"\1: ", short_paths(str(error))).lstrip(": "), ERROR_WIDTH)


def _answer_cell(record: dict) -> str:
    if "error" in record and record.get("answer") is None:
        return "—"
    return show_value(record.get("answer"), 40)


# ---- one row's tree
def show_tree(record: dict, tree: TraceNode | None, console: Console) -> None:
    """Print one row's decomposition tree (failures and the path to them in red).

    A tree deeper than `MAX_DRAWN_DEPTH` levels (fewer on a narrow terminal) is drawn in parts:
    a node at that depth whose subtree goes on is marked "⤵ continued in part N", and part N,
    printed after, is drawn from that node (so a recursion thousands of calls deep reads as a
    sequence of parts)."""
    console.print(_row_header(record))
    if tree is None:
        console.print(Text(f"row {record.get('id')!s} (index {record.get('index')}) has no stored trace: "
                           "its tree was not written to traces.sqlite", style="yellow"))
        return
    bad = failed_nodes(tree)
    levels = max(4, min(MAX_DRAWN_DEPTH, (console.width - 40) // 4))  # room for the labels
    parts: list[tuple[TraceNode, TraceNode, TraceNode | None, int]] = [(tree, tree, None, 0)]
    for number, (node, shown, parent, came_from) in enumerate(parts, 1):  # drawing a part may add parts
        if came_from:
            console.print(Text(f"part {number}, continued from part {came_from} ({levels} levels further down):",
                               style="dim"))
        root = Tree(_label(node, shown, bad, parent), guide_style="dim")
        _draw(root, shown, bad, parts, number, levels)
        console.print(root)


#: Levels of nesting drawn in one tree at most (fewer on a narrow terminal: each takes 4
#: columns); deeper subtrees are drawn after it, as parts of their own.
MAX_DRAWN_DEPTH = 24


def _draw(root: Tree, top: TraceNode, bad: set[int], parts: list, number: int, levels: int) -> None:
    """Draw `top`'s notes and subtree under `root`, part `number` (no recursion: a stack of
    branches to fill); a subtree that starts `levels` levels down is added to `parts`."""
    stack: list[tuple[Tree, TraceNode, int]] = [(root, top, 0)]
    while stack:
        branch, parent, depth = stack.pop()
        _add_notes(branch, parent)
        below = []
        for child in parent.children:
            shown = _merged(child) or child
            twig = branch.add(_label(child, shown, bad, parent))
            if depth + 1 >= levels and shown.children:
                parts.append((child, shown, parent, number))
                twig.add(Text(f"⤵ continued in part {len(parts)}", style="dim"))
            else:
                below.append((twig, shown, depth + 1))
        stack.extend(reversed(below))


def _row_header(record: dict) -> Text:
    failed = "error" in record
    text = Text(f"row {record.get('index')}  id {record.get('id')}", style=FAILED if failed else "bold")
    text.append("  answer ").append(show_value(record.get("answer")), style="red" if failed else "")
    if failed:
        text.append("  failed", style=FAILED)
    elif _failed_outcome(record):
        text.append("  ✗ failed", style=FAILED_OUTCOME)
    if "gold" in record:
        text.append("  gold ").append(show_value(record["gold"]))
    if "score" in record:
        text.append(f"  score {record['score']:g}" if isinstance(record["score"], (int, float)) else "")
    usage = record.get("usage") or {}
    text.append(f"  calls {usage.get('calls', 0)}  tokens {usage.get('prompt_tokens', 0)}/"
                f"{usage.get('completion_tokens', 0)}  cache hits {usage.get('cache_hits', 0)}", style="dim")
    if isinstance(record.get("seconds"), (int, float)):
        text.append(f"  {record['seconds'] * 1000:.1f} ms", style="dim")
    return text


def failed_nodes(tree: TraceNode) -> set[int]:
    """ids of the nodes that failed or lie on the path down to one that did."""
    order: list[tuple[TraceNode, TraceNode | None]] = []
    stack: list[tuple[TraceNode, TraceNode | None]] = [(tree, None)]
    while stack:  # parents before their children
        node, parent = stack.pop()
        order.append((node, parent))
        stack.extend((child, node) for child in node.children)
    bad: set[int] = set()
    for node, parent in reversed(order):  # children before their parents
        if node.error is not None or id(node) in bad:
            bad.add(id(node))
            if parent is not None:
                bad.add(id(parent))
    return bad


def _merged(node: TraceNode) -> TraceNode | None:
    """The call drawn on the same line as `node`: its only child, a call with the same query
    and answer (a step and the call it made); else None."""
    if node.kind not in ("step", "item") or len(node.children) != 1:
        return None
    call = node.children[0]
    same = call.query == node.query and call.answer == node.answer and call.error == node.error
    handler_ok = node.handler is None or call.handler == node.handler
    return call if call.kind == "call" and same and handler_ok else None


def _add_notes(branch: Tree, parent: TraceNode) -> None:
    """What is written under a node before its children: its error (and traceback), a plan's
    note, a model request's prompt and output."""
    if parent.error is not None and not any(c.error == parent.error for c in parent.children):
        failure = branch.add(Text("✗ " + short_paths(parent.error), style="red"))
        if parent.details:  # the user's own traceback (a Python handler), under the error
            failure.add(Text(_TRACEBACK_FILE.sub(r'File "\1"', parent.details.rstrip("\n")), style="dim"))
    elif parent.kind == "plan" and parent.details:  # the plan's note: its order was unreadable
        branch.add(Text("note: ", style=FAILED_OUTCOME).append(parent.details, style="dim"))
    if parent.kind == "model":
        _add_model_text(branch, parent)


def _label(node: TraceNode, details: TraceNode, bad: set[int], parent: TraceNode | None = None) -> Text:
    """One line: kind [handler] (operator) query → answer, then dim details."""
    if node.skipped:
        return _skipped_label(node, parent)
    if node.kind == "iteration":
        return _iteration_label(node)
    failed = id(node) in bad or id(details) in bad
    if node.kind in GROUPS or node.kind == "plan":
        return _plan_label(node, parent, failed)
    text = Text(node.kind, style=FAILED if failed else KIND_STYLES.get(node.kind, ""))
    if _not_run(node):
        return text.append(" (not run)", style="dim")
    handler = node.handler or details.handler
    if handler:
        text.append(f" [{handler}]", style=FAILED if failed else "bold")
    if node.operator and node.operator != "select":
        text.append(f" ({node.operator})")
    text.append_text(_step_text(node) if _plan_step(node, parent) else _query_text(node, failed))
    if node.kind != "model" and (node.answer is not None or node.error is None):  # no "→ null" for failures
        text.append(" → ", style="dim").append(show_value(node.answer), style=FAILED if failed else "")
    if (node.failed or details.failed) and node.error is None and details.error is None:
        text.append("  ✗ failed", style=FAILED_OUTCOME)
    return text.append_text(_details(details))


def _plan_step(node: TraceNode, parent: TraceNode | None) -> bool:
    """A step of a plan (an item of an AND/OR group), labelled "Step n: text"."""
    return node.kind == "item" and parent is not None and parent.kind in GROUPS and bool(node.label)


def _step_text(node: TraceNode) -> Text:
    """A plan step as "Step n: text" (its query is the text)."""
    return Text(" " + shorten(node.label, QUERY_WIDTH))


def _group_head(node: TraceNode, parent: TraceNode | None) -> Text:
    """`plan ORDER`, or `AND` / `OR` with the group's own order when nested (the top group's
    order is the plan's, already written)."""
    if node.kind == "plan":
        return Text("plan", style=KIND_STYLES["plan"]).append(" " + shorten(node.label or "(no order)", QUERY_WIDTH))
    text = Text(node.kind.upper(), style=KIND_STYLES[node.kind])
    if node.label and not (parent is not None and parent.label == node.label):
        text.append(" " + shorten(node.label, QUERY_WIDTH), style="dim")
    return text


def _plan_label(node: TraceNode, parent: TraceNode | None, failed: bool) -> Text:
    """A plan or one of its groups: its order and its outcome, no answer (its steps show them)."""
    text = _group_head(node, parent)
    if failed:
        text.stylize(FAILED)
    if node.error is None and node.failed:
        text.append("  ✗ failed", style=FAILED_OUTCOME)
    elif node.error is None:
        text.append("  ✓", style="green")
    return text.append_text(_details(node))


def _skipped_label(node: TraceNode, parent: TraceNode | None) -> Text:
    """A plan step (or group) that never ran: dim, `skipped`, no answer."""
    if node.kind in GROUPS:
        text = _group_head(node, parent)
    else:
        text = Text(node.kind).append(" " + shorten(node.label, QUERY_WIDTH))
    text.stylize(SKIPPED)
    return text.append("  skipped", style="dim italic")


def _iteration_label(node: TraceNode) -> Text:
    """An executor's turn, one line: `> action` then the observation."""
    text = Text("> ", style="dim").append(shorten(node.label or "(nothing)", QUERY_WIDTH // 2), style="bold")
    if node.answer is not None:
        observation = node.answer if isinstance(node.answer, str) else show_value(node.answer)
        text.append("  ").append(shorten(observation, QUERY_WIDTH), style="dim")
    return text  # an error (none is made today) is written beneath, as any node's


def _query_text(node: TraceNode, failed: bool) -> Text:
    if node.kind == "row":
        return Text(f" {node.label}" if node.label else "")
    if node.kind == "item" and node.query is None:
        return Text(f" {shorten(node.label, QUERY_WIDTH)}")
    if node.query is not None:
        return Text(" " + shorten(node.query, QUERY_WIDTH), style="red" if failed else "")
    if node.label and node.kind == "step":  # a fan-out step: its program line, less what is shown
        head = lexicon.STEP_HEAD.match(node.label).end()  # "(op) [handler] " of a step line
        return Text(" " + shorten(node.label[head:], QUERY_WIDTH), style="dim")
    if node.label:
        return Text(" " + shorten(node.label, QUERY_WIDTH), style="dim")
    return Text("")


def _not_run(node: TraceNode) -> bool:
    """A step placed in the tree but never run (a step before it failed)."""
    return (node.kind == "step" and not node.label and node.handler is None and not node.children
            and node.answer is None and node.error is None)


def _details(node: TraceNode) -> Text:
    parts = []
    if node.location:
        parts.append(where(node.location))
    if node.prompt_tokens or node.completion_tokens:
        cached = (node.facts or {}).get("cached_tokens")
        parts.append(f"{node.prompt_tokens}/{node.completion_tokens} tok"
                     + (f" ({cached} prompt-cached)" if cached else ""))
    if node.seconds is not None:
        parts.append(timing_text(node.seconds, node.queued))
    if node.cache_hit:
        parts.append("cached")
    return Text("  " + " · ".join(parts), style="dim") if parts else Text("")


def _add_model_text(branch: Tree, node: TraceNode) -> None:
    """A model request's last prompt lines and its raw output, as text under it."""
    if node.prompt:
        lines = [line for line in node.prompt.splitlines() if line.strip()][-PROMPT_LINES:]
        text = Text("prompt …", style="dim")
        for line in lines:
            text.append("\n" + shorten(line, QUERY_WIDTH + 20), style="dim")
        branch.add(text)
    if node.raw_output is not None:
        branch.add(Text("output ", style="dim").append(shorten(node.raw_output, QUERY_WIDTH + 20), style="green"))
