"""ADaPT plans as the `(plan)` operator reads them: the planner's text (or a list of step
texts) as a `Plan`, and its execution order written back as text for traces.

The official controller runs a plan whose order it cannot read as the AND of its steps; so do
we, and `read_plan` says so in its note, which the trace records.
"""
from __future__ import annotations

import re
from typing import Any

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_plan

_ORDER_LINE = re.compile(r"^[ \t]*Execution[ \t]+Order[ \t]*:.*$", re.IGNORECASE | re.MULTILINE)


def read_plan(value: Any, path: str = "<plan>") -> tuple[nodes.Plan, str | None]:
    """The plan `value` holds, and a note when its order could not be read (or was missing).

    A string is parsed with the grammar's `plan` entry; a list is taken as its steps, in
    order. Raises `TypeError` for anything else."""
    if isinstance(value, list):
        text = "\n".join(f"Step {i}: {_item(v)}" for i, v in enumerate(value, 1))
        return parse_plan(text + "\n", path), "a list of steps: the AND of its items"
    if not isinstance(value, str):
        raise TypeError("a plan is the planner's text (Step n: ... lines and an Execution Order) "
                        "or a list of steps")
    text = value if value.endswith("\n") else value + "\n"
    try:
        plan = parse_plan(text, path)
    except DecompError as err:
        plan = parse_plan(_ORDER_LINE.sub("", text), path)
        where = f"line {err.span.line}: " if err.span is not None else ""
        return plan, f"Execution Order unreadable ({where}{err.message}); running the AND of its steps"
    if plan.order is None:
        return plan, "no Execution Order: running the AND of its steps"
    return plan, None


def order_text(order: nodes.PlanNode) -> str:
    """An execution order written back: `((Step 1 AND Step 2) OR Step 3)`."""
    if isinstance(order, nodes.PlanRef):
        return f"Step {order.number}"
    word = " AND " if isinstance(order, nodes.PlanAnd) else " OR "
    return "(" + word.join(order_text(i) for i in order.items) + ")"


def _item(value: Any) -> str:
    return value if isinstance(value, str) else str(value)
