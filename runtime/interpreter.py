"""Runs steps and programs: reference substitution, operator fan-out, `if`, `[EOQ]`.

Everything is async: handlers are awaited and the items of a fan-out run concurrently
(results keep the order of the items).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from ..dsl import ast
from ..dsl.errors import DecompError, DecompRuntimeError, DepthExceeded
from ..handlers.base import Call
from .operators import OperatorError, combine, item_for_query, items_of, parse_operator
from .trace import TraceNode
from .values import item_text, json_text, named_text, substitute

if TYPE_CHECKING:  # pragma: no cover
    from .loader import LoadedModule
    from .session import Session


@dataclass(frozen=True)
class Scope:
    """What running code sees: the session, the module's handlers, named inputs, the call stack."""

    session: "Session"
    module: "LoadedModule"
    inputs: Mapping[str, Any] = field(default_factory=dict)
    stack: tuple[str, ...] = ()


# ------------------------------------------------------------------ handler calls
async def call_handler(name: str, query: str, values: tuple, scope: Scope, span: ast.Span | None,
                       trace: TraceNode) -> Any:
    """Run handler `name` on one sub-query, checking recursion bounds, recording a trace node."""
    handler = scope.module.handlers.get(name)
    if handler is None:
        raise DecompRuntimeError(f"unknown handler [{name}]", span,
                                 expected="one of: " + ", ".join(sorted(scope.module.handlers)))
    stack = _enter(handler, scope, span)
    node = trace.child("call", handler=name, query=query, location=_where(span))
    call = Call(query, scope.session, values, scope.inputs, stack, span, node)
    try:
        answer = await handler.run(call)
    except DecompError as err:
        node.error = str(err)
        raise
    node.answer = answer
    return answer


def _enter(handler, scope: Scope, span) -> tuple[str, ...]:
    if not handler.nests:
        return scope.stack
    stack = scope.stack + (handler.name,)
    bound = handler.max_depth
    if bound is not None and stack.count(handler.name) > bound:
        raise DepthExceeded(f"[{handler.name}] recursed deeper than its max_depth of {bound}", span)
    limit = scope.session.max_depth
    if len(stack) > limit:
        raise DepthExceeded(f"calls nested deeper than the session's limit of {limit}", span)
    return stack


def _where(span: ast.Span | None) -> str | None:
    return f"{span.file}:{span.line}" if span else None


# ------------------------------------------------------------------ one step
async def run_step(step: ast.Step, answers: Mapping[int, Any], scope: Scope, trace: TraceNode) -> Any:
    """Execute one `QS: (op) [handler] query` line given the answers so far (by number)."""
    if step.handler is None:
        raise DecompRuntimeError("this step names no handler (write it as QS: [handler] ...)", step.span)
    try:
        op = parse_operator(step.operator)
    except OperatorError as err:
        raise DecompRuntimeError(str(err), step.operator_span or step.span) from None
    node = trace.child("step", label=step.text, handler=step.handler, operator=op.name, location=_where(step.span))
    try:
        answer = await (_fan_out(op, step, answers, scope, node) if op.fans_out
                        else _select(step, answers, scope, node))
    except DecompError as err:
        node.error = node.error or str(err)
        raise
    node.answer = answer
    return answer


async def _select(step, answers, scope, node) -> Any:
    values = tuple(_value(ref, answers, scope) for ref in step.refs)
    texts = {ref.text: _select_text(ref, v) for ref, v in zip(step.refs, values) if v is not _MISSING}
    query = _render(step, texts)
    node.query = query
    return await call_handler(step.handler, query, _present(values), scope, step.span, node)


async def _fan_out(op, step, answers, scope, node) -> Any:
    numbered = step.index_refs
    if len(numbered) != 1:
        raise DecompRuntimeError(f"({op.name}) needs exactly one #n reference to a list, found {len(numbered)}",
                                 step.query_span or step.span)
    ref = numbered[0]
    try:
        items = items_of(_value(ref, answers, scope))
        shown = [item_for_query(op, item) for item in items]
    except OperatorError as err:
        raise DecompRuntimeError(f"{ref.text}: {err}", ref.span) from None
    others = {r.text: named_text(scope.inputs[r.name]) for r in step.refs if r.name in scope.inputs}
    calls = [_one_item(step, ref, item, others, scope, node) for item in shown]
    results = await asyncio.gather(*calls)
    try:
        return combine(op, items, list(results))
    except OperatorError as err:
        raise DecompRuntimeError(str(err), step.span) from None


async def _one_item(step, ref, item, others, scope, node) -> Any:
    query = _render(step, {**others, ref.text: item_text(item)})
    item_node = node.child("item", label=item_text(item), query=query)
    answer = await call_handler(step.handler, query, (item,), scope, step.span, item_node)
    item_node.answer = answer
    return answer


_MISSING = object()


def _value(ref: ast.Ref, answers: Mapping[int, Any], scope: Scope) -> Any:
    if ref.index is not None:
        if ref.index not in answers:
            have = ", ".join(f"#{n}" for n in sorted(answers)) or "none yet"
            raise DecompRuntimeError(f"{ref.text} refers to an answer that does not exist (answers: {have})", ref.span)
        return answers[ref.index]
    return scope.inputs.get(ref.name, _MISSING)


def _select_text(ref: ast.Ref, value: Any) -> str:
    return json_text(value) if ref.index is not None else named_text(value)


def _present(values: tuple) -> tuple:
    return tuple(v for v in values if v is not _MISSING)


def _render(step: ast.Step, texts: Mapping[str, str]) -> str:
    if step.query_span is None:
        return step.query
    return substitute(step.query, step.refs, texts, step.query_span.column)


# ------------------------------------------------------------------ programs
@dataclass
class ProgramState:
    answers: dict[int, Any] = field(default_factory=dict)
    last: Any = None


async def run_body(body: tuple, numbers: Mapping[ast.Span, int], state: ProgramState, scope: Scope,
                   trace: TraceNode) -> bool:
    """Run statements in order; True when an `[EOQ]` ended the program early."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            branch = stmt.then if truth(evaluate(stmt.condition, state.answers, scope)) else stmt.otherwise
            if await run_body(branch, numbers, state, scope, trace):
                return True
        elif stmt.is_end:
            return True
        else:
            state.last = await run_step(stmt, state.answers, scope, trace)
            state.answers[numbers[stmt.span]] = state.last
    return False


def number_steps(body: tuple) -> dict[ast.Span, int]:
    """Answer numbers of a program's steps: their order in the text, `[EOQ]` lines not counted."""
    numbers: dict[ast.Span, int] = {}
    for step in iter_steps(body):
        if not step.is_end:
            numbers[step.span] = len(numbers) + 1
    return numbers


def iter_steps(body: tuple):
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from iter_steps(stmt.then)
            yield from iter_steps(stmt.otherwise)
        else:
            yield stmt


# ------------------------------------------------------------------ conditions
def evaluate(expr, answers: Mapping[int, Any], scope: Scope) -> Any:
    """Value of an `if` condition; no Python evaluation, only the forms the grammar allows."""
    if isinstance(expr, ast.Literal):
        return expr.value
    if isinstance(expr, ast.RefOperand):
        return _ref_value(expr.ref, answers, scope)
    if isinstance(expr, ast.Len):
        return _length(_ref_value(expr.ref, answers, scope), expr)
    if isinstance(expr, ast.Not):
        return not truth(evaluate(expr.operand, answers, scope))
    if isinstance(expr, ast.BoolOp):
        results = (truth(evaluate(e, answers, scope)) for e in expr.operands)
        return all(results) if expr.op == "and" else any(results)
    return _compare(expr, evaluate(expr.left, answers, scope), evaluate(expr.right, answers, scope))


def _ref_value(ref: ast.Ref, answers, scope) -> Any:
    value = _value(ref, answers, scope)
    if value is _MISSING:
        raise DecompRuntimeError(f"{ref.text} is not an input of this program", ref.span)
    return value


def _length(value: Any, expr) -> int:
    if isinstance(value, (list, str, dict)):
        return len(value)
    raise DecompRuntimeError(f"len() needs a list or a string, got {json_text(value)}", expr.span)


_COMPARE = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
}


def _compare(expr: ast.Compare, left: Any, right: Any) -> bool:
    try:
        return bool(_COMPARE[expr.op](left, right))
    except TypeError:
        raise DecompRuntimeError(f"cannot compare {json_text(left)} {expr.op} {json_text(right)}", expr.span) from None


def truth(value: Any) -> bool:
    """Truth of an answer: "no", "false", "0" and empty values are false; so is JSON false."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "no", "false", "0")
    return bool(value)
