"""Static checks over a loaded module, before any handler runs.

Finds, all at once: unknown handlers, unknown operators, `#n` beyond the steps so far (or in
a branch that may not have run), fan-out operators without exactly one `#n`, unknown named
inputs, recursion (direct or through other handlers) without a declared max_depth, and an
unknown or repeated `metric`.

Warnings (`CheckWarning`) are kept apart from errors: what is accepted but probably not meant,
such as a `# comment` after a `QS:` line, which is part of the query (`module_warnings`).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Mapping, Protocol

import networkx as nx

from decomp.dsl import nodes
from decomp.dsl.errors import CheckError, CheckWarning
from decomp.dsl.walks import iter_steps

FAN_OUT_HINT = "exactly one #n naming the list to iterate over"
#: The metrics a module may declare (`metric NAME`); runtime/runs/scoring.py implements each:
#: em (DROP exact match), set_em (order-free lists), f1 (DROP token F1).
METRIC_NAMES = ("em", "set_em", "f1")
#: `#` then a blank or the end, at the start of a query or after a blank: a comment, to the eye
_COMMENT_IN_QUERY = re.compile(r"(?:^|(?<=[ \t]))#(?=[ \t]|$)")


class Checkable(Protocol):
    name: str
    nests: bool
    max_depth: int | None
    decl: nodes.HandlerDecl | None

    def calls(self) -> Mapping[str, list[nodes.Span]]: ...


def check_program(program: nodes.Program, handlers: Iterable[str]) -> list[CheckError]:
    """Problems of one program's body (handler names, references, operators)."""
    known = frozenset(handlers)
    params = frozenset(p.name for p in program.params)
    walker = _BodyChecker(known, params)
    walker.block(program.body)
    return walker.errors + _duplicate_params(program)


def check_metric(module: nodes.Module, known: Iterable[str] = METRIC_NAMES) -> list[CheckError]:
    """A module's `metric` statements: each names a known metric (`known`: the built-ins, and
    the loader adds those plugins registered), and there is at most one."""
    known = tuple(dict.fromkeys(known))
    errors = []
    for metric in module.metrics:
        if metric.name not in known:
            errors.append(CheckError(f"unknown metric '{metric.name}'", metric.name_span or metric.span,
                                     expected="one of: " + ", ".join(known)))
    for extra in module.metrics[:-1]:
        errors.append(CheckError("metric is declared more than once", extra.span,
                                 expected=f"one metric statement (the last is at {module.metrics[-1].span})"))
    return errors


def check_fewshot(fewshot: nodes.FewShot, handlers: Iterable[str] | None = None) -> list[CheckError]:
    """Problems inside decomposition examples: `#n` beyond the steps so far, fan-out references,
    unknown operators and, when `handlers` is given, handler names that do not exist."""
    known = None if handlers is None else frozenset(handlers) | {"EOQ"}
    errors: list[CheckError] = []
    for example in fewshot.examples:
        for number, item in enumerate(example.steps):
            errors += _step_problems(item.step, range(1, number + 1), None, known)
    return errors


def program_warnings(program: nodes.Program) -> list[CheckWarning]:
    """What a program's body accepts but probably does not mean: a `# comment` written after a
    step, which is part of the step's query (a `QS:` line's text runs to the end of the line)."""
    warnings = []
    for step in iter_steps(program.body):
        if step.query_span is None:
            continue
        match = _COMMENT_IN_QUERY.search(step.query)
        if match is not None:
            span = step.query_span.at(match.start(), len(step.query) - match.start())
            warnings.append(CheckWarning(
                "this looks like a comment, but a QS line's text runs to the end of the line: "
                f"{step.query[match.start():]!r} is part of the query", span,
                expected="the comment on a line of its own, above the step"))
    return warnings


def module_warnings(module: nodes.Module) -> list[CheckWarning]:
    """The warnings of every program of a module, in the order they are written."""
    return [w for program in module.programs for w in program_warnings(program)]


def check_recursion(handlers: Mapping[str, Checkable]) -> list[CheckError]:
    """Every program or decomposer that can reach itself must declare max_depth."""
    graph = nx.DiGraph()
    for name, handler in handlers.items():
        graph.add_node(name)
        graph.add_edges_from((name, callee) for callee in handler.calls() if callee in handlers)
    errors = []
    for component in nx.strongly_connected_components(graph):
        if len(component) == 1 and not graph.has_edge(*(list(component) * 2)):
            continue
        cycle = " -> ".join(edge[0] for edge in nx.find_cycle(graph.subgraph(component)))
        for name in sorted(component):
            handler = handlers[name]
            if handler.nests and handler.max_depth is None:
                span = handler.decl.span if handler.decl is not None else getattr(handler, "program", None).span
                errors.append(CheckError(f"[{name}] is recursive ({cycle} -> ...) but declares no max_depth", span,
                                         expected=_bound_hint(handler)))
    return errors


def effectful(handlers: Mapping[str, Checkable], sources: Iterable[str]) -> set[str]:
    """The handlers from which a call can reach one of `sources` (the handlers that act on an
    environment) over the call graph, the sources included."""
    graph = nx.DiGraph()
    for name, handler in handlers.items():
        graph.add_node(name)
        graph.add_edges_from((name, callee) for callee in handler.calls() if callee in handlers)
    found: set[str] = set()
    for source in sources:
        if source in graph:
            found |= nx.ancestors(graph, source) | {source}
    return found


def _bound_hint(handler) -> str:
    if getattr(handler, "program", None) is not None:
        return "a depth bound: program NAME(...) with max_depth = 8 { ... }"
    return "a depth bound: add max_depth = 8 to the handler's options"


class _Available:
    """The answers a step may read: those of the steps before it, in its block and the blocks
    around it, not those inside an earlier `if` (which may not have run). Numbers come in text
    order and leave in the reverse order (when a branch ends), so they stay a sorted list."""

    def __init__(self):
        self.numbers: list[int] = []
        self._members: set[int] = set()

    def __contains__(self, number) -> bool:
        return number in self._members

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, index):
        return self.numbers[index]

    def add(self, number: int) -> None:
        self.numbers.append(number)
        self._members.add(number)

    def back_to(self, mark: int) -> None:
        """Forget the answers added since there were `mark` of them."""
        self._members.difference_update(self.numbers[mark:])
        del self.numbers[mark:]


class _BodyChecker:
    """One pass over a program's body, in text order, with a stack instead of recursion: linear
    in the number of statements, whatever their depth."""

    def __init__(self, known: frozenset[str], params: frozenset[str]):
        self.known, self.params = known, params
        self.errors: list[CheckError] = []
        self.number = 0

    def block(self, body: tuple) -> None:
        available = _Available()
        work: list = [iter(body)]   # statement iterators, and marks: where a branch's answers end
        while work:
            top = work[-1]
            if isinstance(top, int):
                work.pop()
                available.back_to(top)
                continue
            stmt = next(top, None)
            if stmt is None:
                work.pop()
            elif isinstance(stmt, nodes.If):
                self.condition(stmt.condition, available)
                mark = len(available)
                work += [mark, iter(stmt.otherwise), mark, iter(stmt.then)]
            else:
                self.errors += _step_problems(stmt, available, self.params, self.known)
                if not stmt.is_end:
                    self.number += 1
                    available.add(self.number)

    def condition(self, expr, available) -> None:
        for ref in nodes.condition_refs(expr):
            self.errors += _ref_problems(ref, available, self.params)


def _step_problems(step: nodes.Step, available, params, known) -> list[CheckError]:
    from decomp.dsl.operators import KNOWN, OperatorError, parse_operator

    errors: list[CheckError] = []
    if step.handler is None and known is not None:
        errors.append(CheckError("this step names no handler", step.span, expected="QS: [handler] question"))
    elif known is not None and step.handler not in known and step.handler != "EOQ":
        errors.append(CheckError(f"unknown handler [{step.handler}]", step.handler_span,
                                 expected=one_of(known - {"EOQ"})))
    try:
        op = parse_operator(step.operator)
    except OperatorError as err:
        return errors + [CheckError(str(err), step.operator_span, expected="one of: " + ", ".join(KNOWN))]
    if op.fans_out and len(step.index_refs) != 1:
        errors.append(CheckError(f"({op.name}) needs exactly one #n reference, found {len(step.index_refs)}",
                                 step.query_span or step.span, expected=FAN_OUT_HINT))
    for ref in step.refs:
        errors += _ref_problems(ref, available, params)
    return errors


def _ref_problems(ref: nodes.Ref, available, params) -> list[CheckError]:
    if ref.index is not None and ref.index not in available:
        have = _so_far(available)
        return [CheckError(f"{ref.text} refers to a step that has not run at this point", ref.span,
                           expected=f"one of the answers so far: {have}")]
    if ref.name is not None and params is not None and ref.name not in params:
        names = _names(params, "#") or "none"
        return [CheckError(f"unknown input {ref.text}", ref.span, expected=f"one of the parameters: {names}")]
    return []


def one_of(names: frozenset[str]) -> str:
    """`one of: a, b, c` for a message's `expected` (the names sorted, at most 20 of them)."""
    return "one of: " + _names(names)


@lru_cache(maxsize=64)
def _names(names: frozenset[str], prefix: str = "") -> str:
    """The names sorted and joined, computed once per set: a program with thousands of steps
    and handlers gets each of its messages in constant time."""
    ordered = sorted(names)
    more = f", ... ({len(ordered) - 20} more)" if len(ordered) > 20 else ""
    return ", ".join(prefix + name for name in ordered[:20]) + more


def _so_far(numbers) -> str:
    """The answer numbers (ascending) as a message lists them: all of a few, else the first and
    last ones (a message stays short however long the program)."""
    if len(numbers) > 8:
        return ", ".join([*(f"#{n}" for n in numbers[:3]), "...", *(f"#{n}" for n in numbers[-3:])])
    return ", ".join(f"#{n}" for n in numbers) or "none yet"


def _duplicate_params(program: nodes.Program) -> list[CheckError]:
    seen, errors = set(), []
    for p in program.params:
        if p.name in seen:
            errors.append(CheckError(f"parameter '{p.name}' appears twice", p.span))
        seen.add(p.name)
    return errors
