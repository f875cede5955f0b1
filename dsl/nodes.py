"""Typed syntax tree of the .decomp language.

Every node is a frozen dataclass with a ``span``. Node names follow the grammar rules in
grammar.lark. Few-shot files and ADaPT plans have their own roots (`FewShot`, `Plan`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Union


@dataclass(frozen=True)
class Span:
    """Where a node sits in its source: 1-based line and column, end exclusive."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def at(self, offset: int, length: int) -> "Span":
        """A sub-span on the same (first) line, `offset` characters in."""
        col = self.column + offset
        return Span(self.file, self.line, col, self.line, col + length)


# ------------------------------------------------------------------ references and steps
@dataclass(frozen=True)
class Ref:
    """`#3` (an earlier answer) or `#question` (a named input or parameter)."""

    span: Span
    index: int | None = None
    name: str | None = None

    @cached_property
    def text(self) -> str:
        return f"#{self.index}" if self.index is not None else f"#{self.name}"


@dataclass(frozen=True)
class Step:
    """One `QS: (operator) [handler] query` line."""

    span: Span
    operator: str | None
    handler: str | None
    query: str
    refs: tuple[Ref, ...] = ()
    operator_span: Span | None = None
    handler_span: Span | None = None
    query_span: Span | None = None

    @property
    def is_end(self) -> bool:
        return self.handler == "EOQ"

    @property
    def index_refs(self) -> tuple[Ref, ...]:
        return tuple(r for r in self.refs if r.index is not None)

    @property
    def list_refs(self) -> tuple[Ref, ...]:
        """The references a fan-out or `(plan)` step may iterate over: its `#n` references, or,
        when it has none, its named inputs (`#items`). The step needs exactly one; with a `#n`,
        the named inputs are inserted as they are."""
        return self.index_refs or tuple(r for r in self.refs if r.name is not None)

    @cached_property
    def text(self) -> str:
        """The line as DecomP writes it, without the `QS:` marker."""
        parts = [f"({self.operator})" if self.operator else "", f"[{self.handler}]" if self.handler else "", self.query]
        return " ".join(p for p in parts if p)


# ------------------------------------------------------------------ module
@dataclass(frozen=True)
class Value:
    """An option value: string, number, boolean, null, identifier or list of values."""

    span: Span
    value: Any
    kind: str  # "string" | "number" | "bool" | "null" | "ident" | "list" | "type" (its canonical text)

    def plain(self) -> Any:
        """The Python value, lists unwrapped."""
        if self.kind == "list":
            return [v.plain() for v in self.value]
        return self.value


@dataclass(frozen=True)
class Option:
    span: Span
    name: str
    value: Value


@dataclass(frozen=True)
class Import:
    span: Span
    path: str


@dataclass(frozen=True)
class ModelDecl:
    span: Span
    name: str
    spec: str
    options: tuple[Option, ...] = ()


@dataclass(frozen=True)
class HandlerDecl:
    span: Span
    name: str
    kind: str
    options: tuple[Option, ...] = ()
    name_span: Span | None = None
    kind_span: Span | None = None

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class Param:
    span: Span
    name: str
    #: `name: T`: the type as written (a Value of kind "type", its canonical text); None: any
    type: "Value | None" = None


# conditions of `if` statements
@dataclass(frozen=True)
class Literal:
    span: Span
    value: Any


@dataclass(frozen=True)
class RefOperand:
    span: Span
    ref: Ref


@dataclass(frozen=True)
class Len:
    span: Span
    ref: Ref


@dataclass(frozen=True)
class Ok:
    """`ok(#n)`: whether step n's outcome is ok (a named input always is)."""

    span: Span
    ref: Ref


@dataclass(frozen=True)
class Depth:
    """`depth()`: how many times the running program is active on this call chain (1 at the top)."""

    span: Span


@dataclass(frozen=True)
class Compare:
    span: Span
    op: str
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class BoolOp:
    span: Span
    op: str  # "and" | "or"
    operands: tuple["Expr", ...]


@dataclass(frozen=True)
class Not:
    span: Span
    operand: "Expr"


Expr = Union[Literal, RefOperand, Len, Ok, Depth, Compare, BoolOp, Not]


def condition_refs(expr: Expr):
    """The references a condition reads, left to right (with a stack, not recursion)."""
    stack = [expr]
    while stack:
        expr = stack.pop()
        if isinstance(expr, (RefOperand, Len, Ok)):
            yield expr.ref
        elif isinstance(expr, Not):
            stack.append(expr.operand)
        elif isinstance(expr, BoolOp):
            stack.extend(reversed(expr.operands))
        elif isinstance(expr, Compare):
            stack += [expr.right, expr.left]


@dataclass(frozen=True)
class If:
    span: Span
    condition: Expr
    then: tuple["Stmt", ...]
    otherwise: tuple["Stmt", ...] = ()


Stmt = Union[Step, If]


@dataclass(frozen=True)
class Program:
    """A fixed program written in the file: parameters, options and a body of steps."""

    span: Span
    name: str
    params: tuple[Param, ...]
    body: tuple[Stmt, ...]
    options: tuple[Option, ...] = ()
    name_span: Span | None = None
    #: `-> T`: the type of the program's answer as written (a Value of kind "type"); None: any
    result: "Value | None" = None

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class Main:
    span: Span
    target: str


@dataclass(frozen=True)
class Metric:
    """`metric NAME`: how `decomp run --input` scores rows with gold answers, and what `decomp
    eval --pred RUN` uses when no --metric is given (em, set_em, f1, exact, a plugin's, or a
    function `module:function`, its `name` as written; the checker knows them)."""

    span: Span
    name: str
    name_span: Span | None = None


@dataclass(frozen=True)
class Module:
    span: Span
    path: str
    imports: tuple[Import, ...] = ()
    models: tuple[ModelDecl, ...] = ()
    handlers: tuple[HandlerDecl, ...] = ()
    programs: tuple[Program, ...] = ()
    main: Main | None = None
    mains: tuple[Main, ...] = field(default=(), repr=False)
    metric: Metric | None = None
    metrics: tuple[Metric, ...] = field(default=(), repr=False)


# ------------------------------------------------------------------ few-shot files
@dataclass(frozen=True)
class Answer:
    """An `A:` line: the raw text and its JSON value (the text itself when not JSON)."""

    span: Span
    text: str
    value: Any
    is_json: bool


@dataclass(frozen=True)
class ExampleStep:
    step: Step
    answer: Answer | None


@dataclass(frozen=True)
class Example:
    """One blank-line-separated example: context, question, steps, final answer."""

    span: Span
    question: str | None
    question_kind: str  # "QC" | "Q" | "implicit" | "none"
    context: str = ""
    steps: tuple[ExampleStep, ...] = ()
    answer: Answer | None = None
    metadata: tuple[dict, ...] = ()
    lines: tuple[str, ...] = ()
    #: Where the question's `Q:` or `QC:` marker is (None for an implicit question or none).
    question_span: Span | None = None


@dataclass(frozen=True)
class FewShot:
    span: Span
    path: str
    examples: tuple[Example, ...]
    text: str

    @property
    def is_decomposition(self) -> bool:
        """True when the examples are QC/QS programs rather than Q/A pairs."""
        return any(e.steps for e in self.examples)


# ------------------------------------------------------------------ ADaPT plans
@dataclass(frozen=True)
class PlanStep:
    span: Span
    number: int
    text: str


@dataclass(frozen=True)
class PlanRef:
    span: Span
    number: int


@dataclass(frozen=True)
class PlanAnd:
    span: Span
    items: tuple["PlanNode", ...]


@dataclass(frozen=True)
class PlanOr:
    span: Span
    items: tuple["PlanNode", ...]


PlanNode = Union[PlanRef, PlanAnd, PlanOr]


@dataclass(frozen=True)
class Plan:
    """Planner output: numbered steps and an AND/OR execution order over them.

    `order` is None when the text has no `Execution Order:` line; `execution_order()` then
    gives the AND of all steps, in order.
    """

    span: Span
    steps: tuple[PlanStep, ...]
    order: PlanNode | None
    text: tuple[str, ...] = ()

    def step(self, number: int) -> PlanStep | None:
        return next((s for s in self.steps if s.number == number), None)

    def execution_order(self) -> PlanNode:
        """The written order, or the AND of all steps when none was written."""
        if self.order is not None:
            return self.order
        return PlanAnd(self.span, tuple(PlanRef(s.span, s.number) for s in self.steps))
