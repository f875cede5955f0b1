"""Two runs compared row by row (`decomp trace diff A B`): which rows' answers differ, and for
each the first node where the two decomposition trees part.

Rows are matched by id (rows without an id by index; the n-th row with a given id in A with
the n-th with that id in B). A pair is reported when its outcome differs: the answer, or
whether the row failed (two rows that both failed with no answer agree, whatever their error
texts). A row found in one run only is always reported. `diff_runs` returns one dict per
reported row, the matched rows in A's order, then the rows only in B:

    {"id": "a",                  the row's id
     "index_a": 0, "index_b": 0, its index in each run (None where it is absent)
     "answer_a": "n a s", "answer_b": "n n c",
     "error_a": None, "error_b": None,          the row's error in each run, if it failed
     "only_in": None,            "a" or "b" for a row found in one run only
     "diverges_at": {            None when not found (see "note")
         "path": "row > step 3 [letter] > item 1 \"Donna\" > call [letter] > step 1 [position] > call [position]",
         "field": "answer",      kind|handler|operator|query|prompt|missing|answer|raw_output|error
         "a": 3, "b": 4,         the field's value in each tree
         "location": "/…/a.decomp:24"},   file:line of the node (else its nearest ancestor's), or None
     "note": None}               why there is no divergence point (a missing trace, a row in one run)

The first divergence. Both trees are walked together from the row node, depth first, each
node before its children, children matched by position. At a pair of nodes (x, y):

  1. what the node is: kind, then handler, then operator; the first that differs is reported
     here (field "kind", "handler" or "operator");
  2. what it was given: the query, then, for model requests, the prompt (field "query",
     "prompt"); reported here, without looking below: a node given other input computes
     other things, and this is the cause;
  3. the children, pair by pair in order: the first pair with a divergence (found by these
     same rules) gives the answer, so a difference inside a subtree whose answers happen to
     agree still counts, being where the computations first part;
  4. a child on one side only: field "missing"; the path names the extra child, "a" and "b"
     describe it (`step [upper]`) on the side that has it and are None on the other;
  5. what the node gave, once nothing below it differs: the error (with folders cut from
     paths, so two copies of a program in different folders agree; a node that failed on one
     side only is reported as "error", the more telling field, not as an answer missing), then
     the answer, then the raw model output (ends' whitespace ignored) (field "error",
     "answer", "raw_output").

So two nodes that differ only in their answer are never reported while a difference lies
below them: the reported node is the first differing node, in pre-order, with no differing
node beneath it: the deepest and earliest cause. Timings, tokens and cache hits are never
compared. Path parts are `kind N [handler]`, N counting the node's siblings of the same kind
from 1 (left out when the node is its parent's only one of its kind, but always written for
steps); foreach items add their item's text.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.text import Text

from decomp.dsl.text import shorten
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.views.tree import short_paths, show_value, where

_SAYS = {"kind": "another kind of node", "handler": "another handler", "operator": "another operator",
         "query": "another sub-query", "prompt": "another prompt", "missing": "a node on one side only",
         "answer": "another answer", "raw_output": "another raw model output", "error": "another error"}
FIELDS = ("kind", "handler", "operator", "query", "prompt", "missing", "error", "answer", "raw_output")


# ---- matching rows
def _keyed(records: list[dict]) -> dict[tuple, dict]:
    """Each row under (id, n): its id (else `#index`) and how many rows had that id before."""
    seen: Counter = Counter()
    keyed = {}
    for record in records:
        ident = str(record["id"]) if record.get("id") is not None else f"#{record['index']}"
        keyed[(ident, seen[ident])] = record
        seen[ident] += 1
    return keyed


def pair_rows(a: RunDir, b: RunDir) -> tuple[list[tuple[dict, dict]], list[dict], list[dict]]:
    """(matched pairs in A's order, rows only in A, rows only in B)."""
    rows_a, rows_b = _keyed(a.records()), _keyed(b.records())
    pairs = [(row, rows_b[key]) for key, row in rows_a.items() if key in rows_b]
    only_a = [row for key, row in rows_a.items() if key not in rows_b]
    only_b = [row for key, row in rows_b.items() if key not in rows_a]
    return pairs, only_a, only_b


def _outcome(record: dict) -> tuple[Any, bool, str]:
    """What a row's comparison looks at: its answer, whether it errored, and its outcome (the same
    answer ok in one run and failed in the other is a difference)."""
    return record.get("answer"), "error" in record, record.get("outcome", "error" if "error" in record else "ok")


# ---- the runs compared
def diff_runs(a: RunDir, b: RunDir) -> list[dict]:
    """The rows whose outcomes differ between runs `a` and `b`, each with the first node where
    their trees part (see the module docstring for the dicts)."""
    pairs, only_a, only_b = pair_rows(a, b)
    found = []
    for row_a, row_b in pairs:
        if _outcome(row_a) != _outcome(row_b):
            found.append(_row_difference(a, b, row_a, row_b))
    found += [_one_side(row, "a") for row in only_a]
    found += [_one_side(row, "b") for row in only_b]
    return found


def _base(row_a: dict | None, row_b: dict | None) -> dict:
    some = row_a if row_a is not None else row_b
    return {"id": some.get("id"),
            "index_a": row_a["index"] if row_a else None, "index_b": row_b["index"] if row_b else None,
            "answer_a": row_a.get("answer") if row_a else None, "answer_b": row_b.get("answer") if row_b else None,
            "error_a": row_a.get("error") if row_a else None, "error_b": row_b.get("error") if row_b else None,
            "only_in": None, "diverges_at": None, "note": None}


def _one_side(row: dict, side: str) -> dict:
    out = _base(row, None) if side == "a" else _base(None, row)
    other = "B" if side == "a" else "A"
    return {**out, "only_in": side, "note": f"row only in run {side.upper()}: run {other} has no row with this id"}


def _row_difference(a: RunDir, b: RunDir, row_a: dict, row_b: dict) -> dict:
    out = _base(row_a, row_b)
    tree_a, tree_b = a.trace(row_a["index"]), b.trace(row_b["index"])
    missing = [name for name, tree in (("A", tree_a), ("B", tree_b)) if tree is None]
    if missing:
        out["note"] = f"no stored trace for this row in run {' and '.join(missing)}"
    else:
        out["diverges_at"] = first_divergence(tree_a, tree_b)
    outcomes = [row.get("outcome", "error" if "error" in row else "ok") for row in (row_a, row_b)]
    if out["diverges_at"] is None and out["note"] is None and outcomes[0] != outcomes[1]:
        out["note"] = f"the same answer, but its outcome is {outcomes[0]} in run A and {outcomes[1]} in run B"
    return out


# ---- the first divergence of two trees
def first_divergence(a: TraceNode, b: TraceNode) -> dict | None:
    """Where trees `a` and `b` first part (rules in the module docstring), or None when they
    agree node for node: {"path", "field", "a", "b", "location"}.

    The walk keeps its own stack (one frame per pair of nodes on the way down), so trees of any
    depth are compared."""
    stack: list[_Pair] = []
    found = _enter(stack, a, b, "row")
    while found is None and stack:
        pair = stack[-1]
        child = next(pair.children, None)
        if child is not None:
            (part, cx), cy = child
            found = _enter(stack, cx, cy, part)
            continue
        found = _leave(stack)
        stack.pop()
    return found


class _Pair:
    """A pair of nodes on the way down: its path part, its program line, its children's pairs."""

    __slots__ = ("x", "y", "part", "place", "children")

    def __init__(self, x: TraceNode, y: TraceNode, part: str):
        self.x, self.y, self.part = x, y, part
        self.place = x.location or y.location
        self.children = zip(_named(x.children), y.children)


def _enter(stack: list[_Pair], x: TraceNode, y: TraceNode, part: str) -> dict | None:
    """Step down to (x, y): what the nodes are and what they were given (rules 1 and 2)."""
    stack.append(_Pair(x, y, part))
    for name in ("kind", "handler", "operator", "query") + (("prompt",) if x.kind == "model" else ()):
        if getattr(x, name) != getattr(y, name):
            return _point(stack, name, getattr(x, name), getattr(y, name))
    return None


def _leave(stack: list[_Pair]) -> dict | None:
    """Once nothing below differs: a child on one side only, then what the nodes gave (4, 5)."""
    pair = stack[-1]
    x, y = pair.x, pair.y
    if len(x.children) != len(y.children):
        return _missing(stack)
    for name, vx, vy in _results(x, y):
        if vx != vy:
            return _point(stack, name, getattr(x, name), getattr(y, name))
    return None


def _results(x: TraceNode, y: TraceNode) -> Iterator[tuple[str, Any, Any]]:
    """What each node gave, as compared: error (no folders), answer, raw output (trimmed)."""
    yield "error", _no_folders(x.error), _no_folders(y.error)
    yield "answer", x.answer, y.answer
    yield "raw_output", _trimmed(x.raw_output), _trimmed(y.raw_output)


def _trimmed(text: str | None) -> str | None:
    return text.strip() if isinstance(text, str) else text


def _no_folders(text: str | None) -> str | None:
    return short_paths(text) if isinstance(text, str) else text


def _missing(stack: list[_Pair]) -> dict:
    x, y = stack[-1].x, stack[-1].y
    n = min(len(x.children), len(y.children))
    longer = x if len(x.children) > n else y
    part, extra = list(_named(longer.children))[n]
    described = _describe(extra)
    return _point(stack, "missing", described if longer is x else None, described if longer is y else None,
                  extra=(part, extra.location))


def _point(stack: list[_Pair], field: str, a: Any, b: Any, extra: tuple[str, str | None] | None = None) -> dict:
    path = [pair.part for pair in stack] + ([extra[0]] if extra else [])
    places = [pair.place for pair in stack] + ([extra[1]] if extra else [])
    location = next((p for p in reversed(places) if p), None)
    return {"path": " > ".join(path), "field": field, "a": a, "b": b, "location": location}


def _named(children: list[TraceNode]) -> Iterator[tuple[str, TraceNode]]:
    """Each child with its path part: `kind N [handler]` (and an item's text)."""
    total = Counter(c.kind for c in children)
    seen: Counter = Counter()
    for child in children:
        seen[child.kind] += 1
        part = child.kind
        if child.kind == "step" or total[child.kind] > 1:
            part += f" {seen[child.kind]}"
        if child.handler:
            part += f" [{child.handler}]"
        if child.kind == "item" and child.label:
            part += " " + show_value(child.label, 24)
        yield part, child


def _describe(node: TraceNode) -> str:
    """A node in a few words: `step [upper]`, `model [split]`, `item "Guan"`."""
    text = node.kind + (f" [{node.handler}]" if node.handler else "")
    if node.kind == "item" and node.label:
        text += " " + show_value(node.label, 24)
    elif node.query is not None:
        text += " " + shorten(node.query, 40)
    return text


# ---- printing
def show_diff(differences: list[dict], a: RunDir, b: RunDir, console: Console) -> None:
    """Print the comparison: both runs, the counts, then each differing row and its divergence."""
    pairs, only_a, only_b = pair_rows(a, b)
    for name, run in (("A", a), ("B", b)):
        console.print(_run_line(name, run))
    differ = sum(d["only_in"] is None for d in differences)
    console.print(f"{len(pairs)} rows compared, {differ} differ, {len(only_a)} only in A, {len(only_b)} only in B",
                  markup=False, highlight=False)
    if not differences:
        console.print(Text("no differences", style="green"))
        return
    for difference in differences:
        console.print(_difference(difference))


def _run_line(name: str, run: RunDir) -> Text:
    return Text(f"{name}  ", style="bold").append(str(run.path)).append(
        f"  ({run.program_name or '?'}, model {run.model or 'none'})", style="dim")


def _difference(d: dict) -> Text:
    text = Text("\n")
    indexes = f"index {d['index_a']}" if d["index_a"] == d["index_b"] else f"index {d['index_a']} / {d['index_b']}"
    text.append(f"row {d['id']}", style="bold").append(f"  ({indexes})", style="dim")
    text.append("\n  A: ").append_text(_answer(d, "a"))
    text.append("\n  B: ").append_text(_answer(d, "b"))
    if d["note"]:
        text.append(f"\n  {d['note']}", style="yellow")
    point = d["diverges_at"]
    if point:
        text.append("\n  first difference: ").append(point["path"], style="bold")
        text.append(f"\n    {_SAYS.get(point['field'], point['field'])}", style="cyan")
        shown_a, shown_b = _field_values(point)
        text.append("\n    A: ").append(shown_a, style="red")
        text.append("\n    B: ").append(shown_b, style="green")
        if point["location"]:
            text.append(f"\n    at {where(point['location'])}", style="dim")
    return text


def _answer(d: dict, side: str) -> Text:
    if d["index_" + side] is None:
        return Text("(no such row)", style="dim")
    if d["error_" + side] is not None:
        return Text(f"failed: {shorten(short_paths(d['error_' + side]), 100)}", style="red")
    return Text(show_value(d["answer_" + side], 100))


def _field_values(point: dict) -> tuple[str, str]:
    """Both sides of a divergence as text: answers as JSON, other text as it is; of two
    prompts, the first line where they differ."""
    a, b = point["a"], point["b"]
    if point["field"] == "prompt" and isinstance(a, str) and isinstance(b, str):
        lines = list(zip(a.splitlines(), b.splitlines()))
        n = next((i for i, (x, y) in enumerate(lines) if x != y), len(lines))
        line_a, line_b = (a.splitlines() + [""])[n], (b.splitlines() + [""])[n]
        return f"line {n + 1}: {shorten(line_a, 140)}", f"line {n + 1}: {shorten(line_b, 140)}"
    return _field_value(point["field"], a), _field_value(point["field"], b)


def _field_value(field: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if field != "answer" and isinstance(value, str):
        return shorten(short_paths(value), 160)
    return show_value(value, 160)
