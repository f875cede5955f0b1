"""ADaPT plans as the `(plan)` operator reads them: the planner's text (or a list of step
texts) as a `Plan`, and its execution order written back as text for traces.

The official controller runs a plan whose order it cannot read as the AND of its steps; so do
we, and `read_plan` says so in its note, which the trace records.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError
from decomp.dsl.limits import normalize_newlines
from decomp.dsl.parser import parse_plan
from decomp.dsl.values import json_text

_ORDER_LINE = re.compile(r"^[ \t]*Execution[ \t]+Order[ \t]*:.*$", re.IGNORECASE | re.MULTILINE)


def read_plan(value: Any, path: str = "<plan>") -> tuple[nodes.Plan, str | None]:
    """The plan `value` holds, and a note when its order could not be read (or was missing) or
    a step number was repeated (the first step of that number is kept).

    A string is parsed with the grammar's `plan` entry; a list is taken as its steps, in order
    (an item that is not a string as its JSON text). Raises `TypeError` for anything else."""
    if isinstance(value, list):
        span = nodes.Span(path, 1, 1, 1, 1)
        steps = tuple(nodes.PlanStep(span, i, v if isinstance(v, str) else json_text(v))
                      for i, v in enumerate(value, 1))
        return nodes.Plan(span, steps, None), "a list of steps: the AND of its items"
    if not isinstance(value, str):
        raise TypeError("a plan is the planner's text (Step n: ... lines and an Execution Order) "
                        "or a list of steps")
    text = normalize_newlines(value)  # `\r` ends a line for the order line's pattern too
    text = text if text.endswith("\n") else text + "\n"
    notes = []
    try:
        plan = parse_plan(text, path)
    except DecompError as err:
        plan = parse_plan(_ORDER_LINE.sub("", text), path)
        where = f"line {err.span.line}: " if err.span is not None else ""
        notes.append(f"Execution Order unreadable ({where}{err.message}); running the AND of its steps")
    else:
        if plan.order is None:
            notes.append("no Execution Order: running the AND of its steps")
    plan, repeated = _first_of_each_number(plan)
    if repeated:
        notes.append("repeated step numbers (" + ", ".join(map(str, repeated)) + "): the first of each is kept")
    return plan, "; ".join(notes) or None


def _first_of_each_number(plan: nodes.Plan) -> tuple[nodes.Plan, list[int]]:
    seen: dict[int, nodes.PlanStep] = {}
    repeated = []
    for step in plan.steps:
        if step.number in seen:
            repeated.append(step.number)
        else:
            seen[step.number] = step
    if not repeated:
        return plan, []
    return dataclasses.replace(plan, steps=tuple(seen.values())), sorted(set(repeated))


def order_text(order: nodes.PlanNode) -> str:
    """An execution order written back: `((Step 1 AND Step 2) OR Step 3)`."""
    if isinstance(order, nodes.PlanRef):
        return f"Step {order.number}"
    word = " AND " if isinstance(order, nodes.PlanAnd) else " OR "
    return "(" + word.join(order_text(i) for i in order.items) + ")"


