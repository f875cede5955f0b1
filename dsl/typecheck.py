"""The type checker: follows answer types through a program's `#n` references, operators,
conditions and program calls, before any handler runs (`decomp.dsl.answer_types`); a fan-out
over a named input (`#items`) takes its items' type from the parameter's.

Given each handler's answer type (declared, else inferred: `Handler.answer_type`) and each
program's parameter types, it reports, each at its position with both types named: a fan-out
over an answer (or input) that is not a list; a `(filter)` whose handler does not answer
yes/no; `len()` of a scalar; a comparison that can never hold (a list with a string, a number
with a string, a `one_of` with a value not among its choices); an argument that does not fit
the program it is passed to. `any` fits everything: an untyped program checks as before.
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from decomp.dsl import nodes
from decomp.dsl.answer_types import (ANY, Bool, Float, Int, ListOf, Obj, OneOf, Pattern, SchemaFile, Str, Type,
                                     accepts, flat, item_type)
from decomp.dsl.errors import CheckError, CheckWarning
from decomp.dsl.operators import OperatorError, parse_operator
from decomp.dsl.walks import iter_steps, number_steps


def check_types(program: nodes.Program, answers: Mapping[str, Type], params: Mapping[str, Type],
                callees: Mapping[str, Type]) -> list[CheckError | CheckWarning]:
    """The type errors of one program, and its warnings (a `foreach` over a string, which runs
    as a one-item list). `answers`: each handler's answer type; `params`: this program's
    parameter types; `callees`: for each program handler, the type of the first parameter,
    which receives the sub-query."""
    flow = _Flow(answers, params, callees).run(program)
    return flow.errors + flow.warnings


def step_types(program: nodes.Program, answers: Mapping[str, Type],
               params: Mapping[str, Type] | None = None) -> dict[int, Type]:
    """The type of each step's answer, by step number (what hover shows for `#n`)."""
    return _Flow(answers, params or {}, {}).run(program).types


def _walk(body: tuple) -> Iterator[Any]:
    """Steps and `if`s in text order (an `if` before the steps of its branches), by a stack;
    after each branch, `_BranchEnd` (the answers of the steps inside are no longer available)."""
    stack: list = [iter(body)]
    while stack:
        top = stack[-1]
        if isinstance(top, _BranchEnd):
            stack.pop()
            yield top
            continue
        stmt = next(top, None)
        if stmt is None:
            stack.pop()
            continue
        yield stmt
        if isinstance(stmt, nodes.If):
            stack += [_BranchEnd(stmt.otherwise), iter(stmt.otherwise), _BranchEnd(stmt.then), iter(stmt.then)]


class _BranchEnd:
    """The end of an `if` branch, with its statements."""

    def __init__(self, body: tuple):
        self.body = body


class _Flow:
    def __init__(self, answers, params, callees):
        self.answers, self.params, self.callees = answers, params, callees
        self.types: dict[int, Type] = {}
        #: Steps inside an `if` that has ended: their answers may not exist (the checker says so).
        self.hidden: set[int] = set()
        self.errors: list[CheckError] = []
        self.warnings: list[CheckWarning] = []

    def run(self, program: nodes.Program) -> "_Flow":
        numbers = number_steps(program.body)
        for stmt in _walk(program.body):
            if isinstance(stmt, _BranchEnd):
                self.hidden |= {numbers[s.span] for s in iter_steps(stmt.body) if s.span in numbers}
            elif isinstance(stmt, nodes.If):
                self.condition(stmt.condition)
            elif not stmt.is_end and stmt.span in numbers:
                self.types[numbers[stmt.span]] = self.step(stmt)
        return self

    def ref_type(self, ref: nodes.Ref) -> Type:
        if ref.index is not None:
            return ANY if ref.index in self.hidden else self.types.get(ref.index, ANY)
        return self.params.get(ref.name, ANY)

    # ---- steps
    def step(self, step: nodes.Step) -> Type:
        try:
            op = parse_operator(step.operator)
        except OperatorError:
            return ANY
        answer = self.answers.get(step.handler, ANY) if step.handler else ANY
        if op.is_plan:
            return ANY
        if not op.fans_out:
            self.argument(step, _sole_ref(step), step.query_span or step.span)
            return answer
        refs = step.list_refs
        if len(refs) != 1:
            return ANY  # the checker's own error says so
        over = self.ref_type(refs[0])
        item = item_type(over)
        kind = "answer" if refs[0].index is not None else "input"
        if item is None and op.base.startswith("project") and isinstance(over, (Str, Pattern)):
            self.warnings.append(CheckWarning(
                f"({op.name}) iterates over {refs[0].text}, which is {over.text}: it runs once, on the whole "
                "string", refs[0].span, expected=f"a list {kind}, such as list[str]; {refs[0].text} is {over.text}"))
            item = over
        elif item is None:
            self.errors.append(CheckError(
                f"({op.name}) iterates over {refs[0].text}, which is {over.text}, not a list", refs[0].span,
                expected=f"a list {kind}, such as list[...]; {refs[0].text} is {over.text}"))
            return ANY
        if step.query.strip() == refs[0].text:
            self.fits_callee(step, item, refs[0].span, f"each item of {refs[0].text}")
        return self.fan_out(op, step, answer, item)

    def fan_out(self, op, step: nodes.Step, answer: Type, item: Type) -> Type:
        if op.base == "filter":
            if not _yes_no(answer):
                self.errors.append(CheckError(
                    f"(filter) keeps the items whose answer is yes/true, but [{step.handler}] answers {answer.text}",
                    step.handler_span or step.span, expected="a handler answering bool, one_of(\"yes\", \"no\") or str"))
            return ListOf(item)
        if op.base == "project" and not op.subops:
            return ListOf(ListOf(ANY))
        if op.base != "project" or op.subops[:1] != ("values",):
            return ANY
        return ListOf(flat(answer)) if "flat" in op.subops else ListOf(answer)

    def argument(self, step: nodes.Step, ref: nodes.Ref | None, span) -> None:
        if ref is not None:
            self.fits_callee(step, self.ref_type(ref), ref.span, ref.text)

    def fits_callee(self, step: nodes.Step, have: Type, span, what: str) -> None:
        want = self.callees.get(step.handler)
        if want is not None and not accepts(want, have):
            self.errors.append(CheckError(
                f"[{step.handler}] takes {want.text}, but {what} is {have.text}", span,
                expected=f"a value of type {want.text}"))

    # ---- conditions
    def condition(self, expr) -> None:
        stack = [expr]
        while stack:
            expr = stack.pop()
            if isinstance(expr, nodes.Not):
                stack.append(expr.operand)
            elif isinstance(expr, nodes.BoolOp):
                stack.extend(expr.operands)
            elif isinstance(expr, nodes.Len):
                self.length(expr)
            elif isinstance(expr, nodes.Compare):
                self.compare(expr)
                stack += [expr.right, expr.left]

    def length(self, expr: nodes.Len) -> None:
        have = self.ref_type(expr.ref)
        if isinstance(have, (Int, Float, Bool)) or (isinstance(have, OneOf) and not _all_str(have)):
            self.errors.append(CheckError(f"len() of {expr.ref.text}, which is {have.text}: only a list, a string "
                                          "or an object has a length", expr.ref.span,
                                          expected=f"a list or string answer; {expr.ref.text} is {have.text}"))

    def compare(self, expr: nodes.Compare) -> None:
        left, right = self.operand(expr.left), self.operand(expr.right)
        for this, other in ((left, right), (right, left)):
            if isinstance(this[1], OneOf) and isinstance(other[1], _Literal) and expr.op in ("==", "!="):
                if this[1].coerce(other[1].value) not in this[1].choices:
                    self.errors.append(CheckError(
                        f"{this[0]} is {this[1].text}: it is never {other[0]}, so this comparison "
                        f"{'always holds' if expr.op == '!=' else 'never holds'}", expr.span,
                        expected="one of its choices: " + ", ".join(map(_shown, this[1].choices))))
                return
        if expr.op == "in":
            if _shape(right[1]) not in ("list", "str", "object", None):
                self.errors.append(CheckError(f"'in' needs a list or a string on its right, but {right[0]} is "
                                              f"{_described(right[1])}", expr.span))
            return
        shapes = _shape(left[1]), _shape(right[1])
        if None not in shapes and shapes[0] != shapes[1] and {"number", "bool"} != set(shapes):
            never = "always holds" if expr.op == "!=" else "can never hold"
            self.errors.append(CheckError(
                f"this comparison {never}: {left[0]} is {_described(left[1])}, {right[0]} is "
                f"{_described(right[1])}", expr.span, expected="two values of the same kind"))

    def operand(self, expr) -> tuple[str, Any]:
        """(how the operand reads, its type or a `_Literal`)."""
        if isinstance(expr, nodes.RefOperand):
            return expr.ref.text, self.ref_type(expr.ref)
        if isinstance(expr, nodes.Literal):
            return _shown(expr.value), _Literal(expr.value)
        if isinstance(expr, (nodes.Len, nodes.Depth)):
            return "len()" if isinstance(expr, nodes.Len) else "depth()", Int()
        if isinstance(expr, nodes.Ok):
            return f"ok({expr.ref.text})", Bool()
        return "a condition", Bool()


class _Literal:
    def __init__(self, value):
        self.value = value


def _shape(t) -> str | None:
    """What kind of value a type or literal is ("list", "object", "str", "number", "bool"), or
    None when it could be several (`any`, a schema file, a choice of mixed kinds, null)."""
    if isinstance(t, _Literal):
        v = t.value
        if isinstance(v, bool):
            return "bool"
        return "number" if isinstance(v, (int, float)) else "str" if isinstance(v, str) else None
    if isinstance(t, ListOf):
        return "list"
    if isinstance(t, Obj):
        return "object"
    if isinstance(t, (Str, Pattern)):
        return "str"
    if isinstance(t, (Int, Float)):
        return "number"
    if isinstance(t, Bool):
        return "bool"
    if isinstance(t, OneOf):
        shapes = {_shape(_Literal(c)) for c in t.choices}
        return shapes.pop() if len(shapes) == 1 else None
    return None


def _described(t) -> str:
    if isinstance(t, _Literal):
        return {"str": "a string", "number": "a number", "bool": "a boolean"}.get(_shape(t), "null")
    return t.text


def _shown(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _yes_no(t: Type) -> bool:
    if t.is_any or isinstance(t, (SchemaFile, Bool, Str, Pattern)):
        return True
    if isinstance(t, OneOf):
        return all(isinstance(c, (str, bool)) or c in (0, 1) for c in t.choices)
    return isinstance(t, Int)


def _all_str(t: OneOf) -> bool:
    return all(isinstance(c, str) for c in t.choices)


def _sole_ref(step: nodes.Step) -> nodes.Ref | None:
    """The reference a step's query is made of alone (`[h] #2`), which a program receives as
    the value itself; None for any other query."""
    return step.refs[0] if len(step.refs) == 1 and step.query.strip() == step.refs[0].text else None
