"""`(plan) [h] #n`: run a handler on the steps of an ADaPT plan in its AND/OR order.

AND runs its items in order and stops at the first failed outcome; OR stops at the first ok
one; groups nest as written. The answer is the nested list of the answers that ran (a group
inside a group is a list inside the list); the outcome is the order's. A plan with no steps
fails, and so does a value that is no plan (a number); a step number the plan does not define
is a failed step. In the trace the plan node
holds one node per group and per step, steps that never ran marked skipped.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from decomp.dsl import nodes
from decomp.dsl.plans import order_text, read_plan
from decomp.dsl.values import Failed, json_kind, outcome
from decomp.runtime.engine.tracing import TraceNode

RunStep = Callable[[str, TraceNode], Awaitable[Any]]


async def run_plan(value: Any, run_one: RunStep, trace: TraceNode) -> Any:
    """Run `run_one(step text, trace node)` over the plan `value` (text or a list of steps).

    A value that is no plan at all (a planner that answered a number) fails like a plan with no
    steps, its trace node saying why."""
    try:
        plan, note = read_plan(value)
    except TypeError as err:
        node = trace.child("plan", label="(not a plan)", answer=value, failed=True)
        node.details = f"{err}, not {json_kind(value)}"
        return Failed(value)
    order = plan.execution_order()
    label = order_text(order) if plan.steps else "(no steps)"
    node = trace.child("plan", label=label, query=value if isinstance(value, str) else None)
    node.details = note
    if not plan.steps:
        node.failed, node.answer, node.details = True, [], "the plan has no steps"
        return Failed([])
    answers, ok = await _run(order, plan, run_one, node)
    answers = answers if isinstance(order, (nodes.PlanAnd, nodes.PlanOr)) else [answers]
    node.answer, node.failed = answers, not ok
    return answers if ok else Failed(answers)


async def _run(order: nodes.PlanNode, plan: nodes.Plan, run_one: RunStep, trace: TraceNode) -> tuple[Any, bool]:
    if isinstance(order, nodes.PlanRef):
        return await _step(order.number, plan, run_one, trace)
    is_and = isinstance(order, nodes.PlanAnd)
    group = trace.child("and" if is_and else "or", label=order_text(order))
    answers: list[Any] = []
    ok = is_and
    for position, item in enumerate(order.items):
        answer, item_ok = await _run(item, plan, run_one, group)
        answers.append(answer)
        if item_ok != is_and:  # AND: a failure decides it; OR: a success does
            ok = item_ok
            for rest in order.items[position + 1:]:
                _skip(rest, plan, group)
            break
    group.answer, group.failed = answers, not ok
    return answers, ok


async def _step(number: int, plan: nodes.Plan, run_one: RunStep, trace: TraceNode) -> tuple[Any, bool]:
    step = plan.step(number)
    if step is None:
        missing = f"Step {number} is not in the plan (its steps: " + \
                  (", ".join(str(s.number) for s in plan.steps) or "none") + ")"
        trace.child("item", label=f"Step {number}", answer=missing, failed=True)
        return missing, False
    node = trace.child("item", label=f"Step {number}: {step.text}")
    answer, ok = outcome(await run_one(step.text, node))
    node.answer, node.failed = answer, not ok
    return answer, ok


def _skip(order: nodes.PlanNode, plan: nodes.Plan, trace: TraceNode) -> None:
    """Trace nodes for steps that never ran, marked skipped."""
    if isinstance(order, nodes.PlanRef):
        step = plan.step(order.number)
        label = f"Step {order.number}: {step.text}" if step else f"Step {order.number}"
        trace.child("item", label=label, skipped=True)
        return
    group = trace.child("and" if isinstance(order, nodes.PlanAnd) else "or", label=order_text(order), skipped=True)
    for item in order.items:
        _skip(item, plan, group)
