"""Runs steps and programs: reference substitution, operator fan-out, `if`, `[EOQ]`.

Everything is async: handlers are awaited and the items of a fan-out run concurrently
(results keep the order of the items).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from decomp.dsl import nodes
from decomp.dsl.checker import FAN_OUT_HINT, fan_out_problem
from decomp.dsl.errors import DecompError, DepthExceeded, Failure, RunError
from decomp.dsl.operators import OperatorError, combine, item_for_query, items_of, parse_operator
from decomp.dsl.values import Failed, item_text, json_text, named_text, outcome, substitute
from decomp.dsl.repair import fit
from decomp.dsl.walks import ends_program, iter_steps
from decomp.dsl.waits import WAITS, Waits
from decomp.runtime.engine.budgets import current_row
from decomp.runtime.engine.containment import run_kind
from decomp.runtime.engine.cache import cache_key, decode_answer, encode_answer
from decomp.runtime.engine.call import EngineCall, Scope, named
from decomp.runtime.engine.plans import run_plan
from decomp.runtime.engine.tracing import TraceNode


# ------------------------------------------------------------------ handler calls
async def call_handler(name: str, query: str, values: tuple, scope: Scope, span: nodes.Span | None,
                       trace: TraceNode) -> Any:
    """Run handler `name` on one sub-query: the handler-call budgets, recursion bounds, the step
    cache, timing, a trace node.

    Errors leave named: a `RunError` gets this handler's name, kind and line (unless an inner
    call named it first); anything else a handler raises is a bug, an `InternalError`."""
    handler = scope.module.handlers.get(name)
    if handler is None:
        raise Failure(f"unknown handler [{name}]", span, expected="one of: " + ", ".join(sorted(scope.module.handlers)))
    node = None
    started, waits = time.perf_counter(), Waits()  # the call's own waits: its queue time
    token = WAITS.set(waits)
    try:
        current_row().before_handler_call()  # every call counts, symbolic ones too
        stack = _enter(handler, scope, span)
        node = trace.child("call", handler=name, query=query, location=_where(span), started=time.time(),
                           facts={"kind": handler.kind})
        call = EngineCall(query, values, scope.inputs, stack, span, scope.session, handler, node)
        if scope.session.cache is None or not handler.cacheable or handler.effectful:
            answer = await run_kind(handler, call)
        else:
            answer = await _cached_run(handler, call, node)
        answer = typed_answer(handler, answer, node)
    except Exception as err:  # named after this handler; a bug ends the row with its cause kept
        failure = named(err, handler, span)
        _failed(node, failure)
        if failure is err:
            raise
        with_others(failure, also_failed(err))
        raise failure from err
    finally:
        WAITS.reset(token)
        if node is not None:
            node.seconds, node.queued = time.perf_counter() - started, waits.seconds
            current_row().timed(name, node.seconds, node.queued)
    node.answer, ok = outcome(answer)
    node.failed = not ok
    return answer


def typed_answer(handler, answer: Any, node: TraceNode | None = None) -> Any:
    """`answer` fitted to the handler's declared type (`decomp.dsl.repair.fit`); one that does
    not fit is a failed outcome whose reason names the type and the text, never a string passed
    on. An answer already failed stays as it is. A failed outcome's reason is kept in the trace
    node's facts as "reason"."""
    declared = handler.declared_type
    if declared is not None and not declared.is_any and not isinstance(answer, Failed):
        fitted, problem = fit(declared, answer)
        answer = fitted if problem is None else Failed(answer, problem)
    if isinstance(answer, Failed) and answer.reason and node is not None:
        node.facts = {**(node.facts or {}), "reason": answer.reason}
    return answer


def _failed(node: TraceNode | None, err: DecompError) -> None:
    if node is not None:
        node.error = str(err)
        node.details = getattr(err, "details", None)


async def _cached_run(handler, call: EngineCall, node: TraceNode) -> Any:
    cache = call.session.cache
    key = cache_key(handler.cache_parts(call))
    stored = cache.get(key, f"[{handler.name}] {call.query[:60]!r}")
    if cache.hit(stored):
        node.cache_hit = True
        current_row().charge(0, 0, 1)
        return decode_answer(stored)
    answer = await run_kind(handler, call)
    cache.put(key, encode_answer(answer))
    return answer


def _enter(handler, scope: Scope, span) -> tuple[str, ...]:
    if not handler.nests:
        return scope.stack
    stack = scope.stack + (handler.name,)
    bound = handler.max_depth
    if bound is not None and stack.count(handler.name) > bound:
        raise DepthExceeded(f"recursed deeper than its max_depth of {bound}", span)
    limit = scope.session.max_depth
    if len(stack) > limit:
        raise DepthExceeded(f"calls nested deeper than the session's limit of {limit}", span)
    return stack


def _where(span: nodes.Span | None) -> str | None:
    return f"{span.file}:{span.line}" if span else None


# ------------------------------------------------------------------ one step
async def run_step(step: nodes.Step, answers: Mapping[int, Any], scope: Scope, trace: TraceNode,
                   node: TraceNode | None = None, state: ProgramState | None = None) -> Any:
    """Execute one `QS: (op) [handler] query` line given the answers so far (by number).

    Its trace node is `node` when given (already placed), else a new child of `trace`. `state`:
    the running program's, whose outcomes tell a fan-out that its list is a failed answer."""
    if step.handler is None:
        raise Failure("this step names no handler (write it as QS: [handler] ...)", step.span)
    try:
        op = parse_operator(step.operator)
    except OperatorError as err:
        raise Failure(str(err), step.operator_span or step.span) from None
    node = node or trace.child("step")
    node.label, node.handler, node.operator, node.location = step.text, step.handler, op.name, _where(step.span)
    try:
        if op.is_plan:
            answer = await _plan(step, answers, scope, node)
        elif op.fans_out:
            answer = await _fan_out(op, step, answers, scope, node, state)
        else:
            answer = await _select(op, step, answers, scope, node)
    except DecompError as err:
        _name_step(err, step, scope)
        node.error = node.error or str(err)
        raise
    node.answer, ok = outcome(answer)
    node.failed = not ok
    return answer


def _name_step(err: DecompError, step: nodes.Step, scope: Scope) -> None:
    """A run error no handler call named (a reference to no answer, a list a fan-out cannot
    iterate) is named after the step's handler and line, as the errors of its calls are."""
    handler = scope.module.handlers.get(step.handler)
    if isinstance(err, RunError) and handler is not None:
        err.locate(handler.name, handler.kind, step.span)


# ------------------------------------------------------------------ failures at the same time
def also_failed(err: BaseException) -> tuple[BaseException, ...]:
    """The failures of other steps (or items) that happened alongside `err`, before the row it
    ended stopped them: each with its own message (naming its handler and line) and details,
    earliest first. Empty when `err` failed alone."""
    return getattr(err, "also_failed", ())


def with_others(first: BaseException, others) -> BaseException:
    """`first` with `others` (and the failures each carried) attached as its `also_failed`:
    the steps that failed at the same time are kept, each under its own message, instead of
    one step's error standing for all (and their tracebacks shown under it)."""
    seen = [first, *also_failed(first)]
    for other in others:
        for err in (other, *also_failed(other)):
            if not any(err is known for known in seen):
                seen.append(err)
    if len(seen) > 1:
        first.also_failed = tuple(seen[1:])
    return first


async def _select(op, step, answers, scope, node) -> Any:
    values = tuple(_value(ref, answers, scope) for ref in step.refs)
    texts = {ref.text: _select_text(ref, v) for ref, v in zip(step.refs, values) if v is not _MISSING}
    query = _render(step, texts)
    node.query = query
    answer = await call_handler(step.handler, query, _present(values), scope, step.span, node)
    value, ok = outcome(answer)
    try:
        combined = combine(op, [], [value])
    except OperatorError as err:
        raise Failure(str(err), step.span) from None
    return combined if ok else Failed(combined, answer.reason)


def _list_ref(op, step) -> nodes.Ref:
    """The one reference a fan-out or plan step iterates over: its `#n`, or, with none, its
    named input (`nodes.Step.list_refs`)."""
    problem = fan_out_problem(op, step, " to a plan" if op.is_plan else " to a list")
    if problem is not None:
        raise Failure(problem, step.query_span or step.span, expected=FAN_OUT_HINT)
    return step.list_refs[0]


def _other_texts(step, scope) -> dict[str, str]:
    """The texts of a step's named references (`#goal`), for per-item queries."""
    return {r.text: named_text(scope.inputs[r.name]) for r in step.refs if r.name in scope.inputs}


async def _fan_out(op, step, answers, scope, node, state=None) -> Any:
    ref = _list_ref(op, step)
    value = _ref_value(ref, answers, scope)
    if not isinstance(value, list) and state is not None and not state.outcomes.get(ref.index, True):
        return _not_iterated(op, ref, value, state.reasons.get(ref.index), node)
    try:
        items = items_of(op, value)
        shown = [item_for_query(op, item) for item in items]
    except OperatorError as err:
        raise Failure(f"{ref.text}: {err}", ref.span) from None
    others = _other_texts(step, scope)
    as_text = json_text if op.inserts_json else item_text
    runs = (_one_item(step, ref, item, as_text, others, scope, node) for item in shown)
    # items that act on an environment run one at a time, in order
    results = await (in_order(runs) if _effectful(step, scope) else gather_all(runs))
    values, oks = zip(*map(outcome, results)) if results else ((), ())
    try:
        combined = combine(op, items, list(values))
    except OperatorError as err:
        raise Failure(str(err), step.span) from None
    if all(oks):
        return combined
    first = next(r for r in results if isinstance(r, Failed))
    return Failed(combined, first.reason and f"item {results.index(first) + 1}: {first.reason}")


def _not_iterated(op, ref: nodes.Ref, value: Any, reason: str | None, node: TraceNode) -> Failed:
    """A fan-out over a failed answer that is no list (a typed step whose text did not fit
    `list[...]`): it does not run on the text as one item; it fails, saying why."""
    why = f"{ref.text} is a failed answer, not a list" + (f" ({reason})" if reason else "")
    reason = f"({op.name}) did not run: {why}"
    node.facts = {**(node.facts or {}), "reason": reason}
    return Failed(value, reason)


async def _plan(step, answers, scope, node) -> Any:
    ref = _list_ref(parse_operator(step.operator), step)
    value = _ref_value(ref, answers, scope)
    others = _other_texts(step, scope)

    async def run_one(text: str, item_node: TraceNode) -> Any:
        query = _render(step, {**others, ref.text: text})
        item_node.query = query
        return await call_handler(step.handler, query, (text,), scope, step.span, item_node)

    return await run_plan(value, run_one, node)


async def _one_item(step, ref, item, as_text, others, scope, node) -> Any:
    query = _render(step, {**others, ref.text: as_text(item)})
    item_node = node.child("item", label=as_text(item), query=query)
    answer = await call_handler(step.handler, query, (item,), scope, step.span, item_node)
    item_node.answer, ok = outcome(answer)
    item_node.failed = not ok
    return answer


_MISSING = object()


def _value(ref: nodes.Ref, answers: Mapping[int, Any], scope: Scope) -> Any:
    if ref.index is not None:
        if ref.index not in answers:
            have = ", ".join(f"#{n}" for n in sorted(answers)) or "none yet"
            raise Failure(f"{ref.text} refers to an answer that does not exist (answers: {have})", ref.span)
        return answers[ref.index]
    return scope.inputs.get(ref.name, _MISSING)


def _select_text(ref: nodes.Ref, value: Any) -> str:
    return json_text(value) if ref.index is not None else named_text(value)


def _present(values: tuple) -> tuple:
    return tuple(v for v in values if v is not _MISSING)


def _render(step: nodes.Step, texts: Mapping[str, str]) -> str:
    if step.query_span is None:
        return step.query
    return substitute(step.query, step.refs, texts, step.query_span.column)


# ------------------------------------------------------------------ programs
@dataclass
class ProgramState:
    """Answers and outcomes of a running program by step number; each step starts once its
    inputs are ready (and, if it acts on an environment, once the one before it that does is done)."""

    answers: dict[int, Any] = field(default_factory=dict)
    outcomes: dict[int, bool] = field(default_factory=dict)
    #: Why a failed step failed, where its answer says (`Failed.reason`).
    reasons: dict[int, str] = field(default_factory=dict)
    tasks: dict[int, asyncio.Task] = field(default_factory=dict)
    side: list[asyncio.Task] = field(default_factory=list)
    #: The last step started that acts on an environment: the next such step waits for it.
    effect: asyncio.Task | None = None
    #: The failures of steps and branches, in the order they happened.
    failures: list[BaseException] = field(default_factory=list)

    def started(self, task: asyncio.Task) -> asyncio.Task:
        """Follow `task` (a step or a branch): its failure is noted as it happens."""
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.failures.append(task.exception())

    def first_failure(self) -> BaseException:
        """The failure that happened first, with those of the steps that failed at the same
        time (before this one could stop them) attached (`with_others`)."""
        return with_others(self.failures[0], self.failures[1:])

    @property
    def last(self) -> Any:
        """The answer of the last step (in the text) that ran, as a failed outcome if it failed."""
        if not self.answers:
            return None
        number = max(self.answers)
        if self.outcomes.get(number, True):
            return self.answers[number]
        return Failed(self.answers[number], self.reasons.get(number))

    async def ready(self, refs) -> None:
        """Wait for the steps that `refs` name (those started so far)."""
        waiting = [self.tasks[r.index] for r in refs if r.index is not None and r.index in self.tasks]
        if waiting:
            await asyncio.gather(*waiting)

    async def settle(self) -> None:
        """Wait for everything started so far (the first failure to happen is raised, with
        those that happened alongside it: `first_failure`)."""
        while not self.failures:
            pending = [t for t in [*self.tasks.values(), *self.side] if not t.done()]
            if not pending:
                break
            await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)  # after `_ended` ran
        if self.failures:
            raise self.first_failure()

    def cancel(self) -> None:
        """Cancel what still runs; the failures of steps that failed at the same time as the one
        raised are taken as seen (asyncio would log each as "never retrieved")."""
        for task in [*self.tasks.values(), *self.side]:
            task.cancel()
            task.add_done_callback(_seen)


def _seen(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()


async def run_program(body: tuple, numbers: Mapping[nodes.Span, int], scope: Scope, trace: TraceNode) -> Any:
    """Run a program body as a dataflow graph and return its answer (the last step's, with its
    outcome: a `Failed` when that step failed)."""
    state = ProgramState()
    try:
        await run_body(body, numbers, state, scope, trace)
        await state.settle()
    except BaseException:
        state.cancel()
        raise
    return state.last


async def run_body(body: tuple, numbers: Mapping[nodes.Span, int], state: ProgramState, scope: Scope,
                   trace: TraceNode) -> bool:
    """Start the statements of `body`; True when an `[EOQ]` ended the program early.

    A step starts as soon as the steps it references have answered, so independent steps run
    at once. An `if` whose branches can end the program waits for everything before it; other
    `if`s run alongside the steps that follow them (which cannot see inside them).
    """
    for stmt in body:
        if isinstance(stmt, nodes.If):
            node = trace.child("if", label=f"if at line {stmt.span.line}", location=_where(stmt.span))
            if ends_program(stmt) or any(_effectful(s, scope) for s in iter_steps((stmt,))):
                await state.settle()
                if await _branch(stmt, numbers, state, scope, node):
                    return True
            else:
                state.side.append(state.started(asyncio.ensure_future(_branch(stmt, numbers, state, scope, node))))
        elif stmt.is_end:
            await state.settle()
            return True
        else:
            number = numbers[stmt.span]
            node = trace.child("step")  # placed now, so the trace keeps program order
            after = state.effect if _effectful(stmt, scope) else None
            task = state.started(asyncio.ensure_future(_step_task(stmt, number, state, scope, trace, node, after)))
            state.tasks[number] = task
            if _effectful(stmt, scope):
                state.effect = task
    return False


def _effectful(step: nodes.Step, scope: Scope) -> bool:
    """Whether the step's handler can reach an environment (the loader marks such handlers)."""
    handler = scope.module.handlers.get(step.handler) if step.handler else None
    return handler is not None and handler.effectful


async def _branch(stmt: nodes.If, numbers, state: ProgramState, scope: Scope, trace: TraceNode) -> bool:
    await state.ready(nodes.condition_refs(stmt.condition))
    taken = truth(condition_value(stmt.condition, state, scope))
    trace.answer = taken
    return await run_body(stmt.then if taken else stmt.otherwise, numbers, state, scope, trace)


async def _step_task(step: nodes.Step, number: int, state: ProgramState, scope: Scope, trace: TraceNode,
                     node: TraceNode, after: asyncio.Task | None = None) -> Any:
    await state.ready(step.refs)
    if after is not None:
        await asyncio.gather(after)  # the environment's previous step (its failure is raised by settle)
    answer = await run_step(step, state.answers, scope, trace, node, state)
    state.answers[number], state.outcomes[number] = outcome(answer)
    if isinstance(answer, Failed) and answer.reason:
        state.reasons[number] = answer.reason
    return answer


async def in_order(coroutines) -> list:
    """Run coroutines one after another, results in order (the first failure is raised)."""
    return [await c for c in coroutines]


async def gather_all(coroutines) -> list:
    """Run coroutines at once, results in order; on the first failure cancel the rest and raise
    it, with the failures of those that failed at the same time attached (`with_others`)."""
    failures: list[BaseException] = []

    def ended(task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())

    tasks = [asyncio.ensure_future(c) for c in coroutines]
    for task in tasks:
        task.add_done_callback(ended)
    try:
        return list(await asyncio.gather(*tasks))
    except Exception as err:  # the first failure: `ended` saw it, and those alongside it
        for task in tasks:
            task.cancel()
        with_others(err, [failure for failure in failures if failure is not err])
        raise
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


# ------------------------------------------------------------------ conditions
def condition_value(expr, state: ProgramState, scope: Scope) -> Any:
    """Value of an `if` condition; no Python evaluation, only the forms the grammar allows."""
    if isinstance(expr, nodes.Literal):
        return expr.value
    if isinstance(expr, nodes.RefOperand):
        return _ref_value(expr.ref, state.answers, scope)
    if isinstance(expr, nodes.Len):
        return _length(_ref_value(expr.ref, state.answers, scope), expr)
    if isinstance(expr, nodes.Ok):
        _ref_value(expr.ref, state.answers, scope)  # exists
        return expr.ref.index is None or state.outcomes.get(expr.ref.index, True)
    if isinstance(expr, nodes.Depth):
        return depth(scope.stack)
    if isinstance(expr, nodes.Not):
        return not truth(condition_value(expr.operand, state, scope))
    if isinstance(expr, nodes.BoolOp):
        results = (truth(condition_value(e, state, scope)) for e in expr.operands)
        return all(results) if expr.op == "and" else any(results)
    return _compare(expr, condition_value(expr.left, state, scope), condition_value(expr.right, state, scope))


def depth(stack: tuple[str, ...]) -> int:
    """`depth()`: how many times the program (or decomposer) running this code is active on the
    call chain, itself included: 1 at the top."""
    return max(1, stack.count(stack[-1])) if stack else 1


def _ref_value(ref: nodes.Ref, answers, scope) -> Any:
    value = _value(ref, answers, scope)
    if value is _MISSING:
        raise Failure(f"{ref.text} is not an input of this program", ref.span)
    return value


def _length(value: Any, expr) -> int:
    if isinstance(value, (list, str, dict)):
        return len(value)
    raise Failure(f"len() needs a list or a string, got {json_text(value)}", expr.span)


_COMPARE = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "in": lambda a, b: a in b,
}


def _compare(expr: nodes.Compare, left: Any, right: Any) -> bool:
    try:
        return bool(_COMPARE[expr.op](left, right))
    except TypeError:
        raise Failure(f"cannot compare {json_text(left)} {expr.op} {json_text(right)}", expr.span) from None


def truth(value: Any) -> bool:
    """Truth of an answer: "no", "false", "0" and empty values are false; so is JSON false."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "no", "false", "0")
    return bool(value)



class Interpreter:
    """The runner the session hands every `EngineCall` (`decomp.runtime.engine.call.Runner`):
    nested work a kind asks for through its `Call` comes back here, never by an import of the
    interpreter from the call."""

    call_handler = staticmethod(call_handler)
    run_step = staticmethod(run_step)
    run_program = staticmethod(run_program)


RUNNER = Interpreter()
