"""Static checks over a loaded module, before any handler runs.

Finds, all at once: unknown handlers, unknown operators, `#n` beyond the steps so far (or in
a branch that may not have run), fan-out operators without exactly one `#n` (or, with none,
one named input) to iterate over, unknown named inputs, recursion (direct or through other
handlers) without a declared max_depth, and an unknown or repeated `metric`.

Warnings (`CheckWarning`) are kept apart from errors: what is accepted but probably not meant,
such as a `# comment` after a `QS:` line, which is part of the query (`module_warnings`).
"""
from __future__ import annotations

import inspect
import re
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping, Protocol

import networkx as nx

from decomp.dsl import nodes
from decomp.dsl.errors import CheckError, CheckWarning, InputError
from decomp.dsl.walks import iter_steps

FAN_OUT_HINT = "exactly one #n naming the list to iterate over, or, with no #n, one named input (#items)"
#: The metrics a module may declare (`metric NAME`); runtime/scoring/metrics.py implements each:
#: em (DROP exact match), set_em (order-free lists), f1 (DROP token F1), exact (the very text).
#: Besides these, a plugin's registered metric or a function of one's own (`metric mod:fn`).
METRIC_NAMES = ("em", "set_em", "f1", "exact")
#: The two forms a metric function may take (`metric_form`).
ROW_FORM, PAIR_FORM = "function(row, answer, trace)", "function(prediction, gold)"
_METRIC_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: `#` then a blank or the end, at the start of a query or after a blank: a comment, to the eye
_COMMENT_IN_QUERY = re.compile(r"(?:^|(?<=[ \t]))#(?=[ \t]|$)")
#: The start of a few-shot line that reads as context but looks like a marker misspelt: `A "x"`,
#: `A ["x"]`, `Q. Who?`, `A; x`, `a: x`, `Q : x`, `QS [h] ...`, `QC What ...?`, `Q What ...?`
_MARKERS = ("QC:", "QS:", "Q:", "A:")
_MISSPELT = re.compile(
    r"(?P<punct>QC|QS|Q|A)[ \t]*[.;=](?=[ \t]|$)"
    r"|(?P<cased>(?i:qc|qs|q|a))[ \t]*:"
    r"|(?P<bare>Q|A)[ \t]+(?=[\"\[{])"
    r"|(?P<word>QC|QS)[ \t]+(?=\S)"
    r"|(?P<asks>Q)[ \t]+(?=\S.*\?[ \t]*$)")


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


def check_metric(module: nodes.Module, known: Iterable[str] = METRIC_NAMES,
                 resolve: Callable[[str], Callable[..., Any] | str | None] | None = None) -> list[CheckError]:
    """A module's `metric` statements: each names a known metric (`known`: the built-ins, and
    the loader adds those plugins registered) or a function `module:function`, and there is at
    most one. `resolve` (the loader's) imports such a function under the rules of python
    handlers: the function (its form is checked, `metric_form`), why it cannot be used (an
    error at the name), or None (not imported: a check's untrusted folder, said elsewhere)."""
    known = tuple(dict.fromkeys(known))
    errors = []
    for metric in module.metrics:
        span = metric.name_span or metric.span
        if _METRIC_PATH.fullmatch(metric.name):
            found = resolve(metric.name) if resolve is not None else None
            problem = _function_problem(metric.name, found)
            if problem is not None:
                forms = f"{ROW_FORM} or {PAIR_FORM}, returning a float"
                errors.append(CheckError(problem, span, expected=None if isinstance(found, str) else forms))
        elif metric.name not in known:
            errors.append(CheckError(f"unknown metric '{metric.name}'", span,
                                     expected="one of: " + ", ".join(known) + ", or a function as module:function"))
    for extra in module.metrics[:-1]:
        errors.append(CheckError("metric is declared more than once", extra.span,
                                 expected=f"one metric statement (the last is at {module.metrics[-1].span})"))
    return errors


def _function_problem(name: str, found: Callable[..., Any] | str | None) -> str | None:
    if found is None:
        return None
    if isinstance(found, str):
        return f"metric {name!r}: {found}"
    try:
        metric_form(found, name)
    except ValueError as err:
        return str(err)
    return None


def metric_form(function: Callable[..., Any], name: str) -> str:
    """How the metric `name` calls `function`: `ROW_FORM` or `PAIR_FORM` (docs/runs.md, "The
    metric function"). A function of exactly two positional parameters, neither with a default
    (and no `*args`, no keyword-only parameter without a default), is called
    `function(prediction, gold)` once per gold alternative; one that can be called with three
    positional arguments, `function(row, answer, trace)`. `InputError` (a `ValueError`) naming it otherwise."""
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        raise InputError(f"metric {name!r}: the parameters of {_called(function)} cannot be read; a metric is "
                         f"{ROW_FORM} or {PAIR_FORM}, returning a float") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    star = any(p.kind is p.VAR_POSITIONAL for p in params)
    keywords = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if not keywords and not star and len(positional) == len(required) == 2:
        return PAIR_FORM
    if not keywords and len(required) <= 3 and (star or len(positional) >= 3):
        return ROW_FORM
    raise InputError(f"metric {name!r}: {_called(function)}{inspect.signature(function)} takes neither form of a "
                     f"metric: {ROW_FORM} (the dataset row, the program's answer, the row's trace) or {PAIR_FORM} "
                     "(called once per gold alternative), returning a float")


def _called(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or type(function).__name__


def misspelt_marker(line: str) -> tuple[str, str] | None:
    """For a few-shot line that reads as context but looks like a misspelt marker (`A "x"`,
    `Q. Who?`, `a: x`, `QS [h] ...`): the marker meant (`A:`) and the line written with it
    (`A: "x"`); None for any other line."""
    text = line.strip()
    match = None if text.startswith(_MARKERS) else _MISSPELT.match(text)
    if match is None:
        return None
    mark = next(group for group in match.groups() if group).upper() + ":"
    return mark, f"{mark} {text[match.end():].strip()}".rstrip()


def fewshot_warnings(fewshot: nodes.FewShot) -> list[CheckWarning]:
    """Lines after an example's question that read as context but look like a misspelt marker
    (`a: x` between a question and its answer): each at its line, with the marker meant. (Where
    such a line leaves a question without an answer, reading the file fails there instead.)"""
    warnings, seen = [], set()
    for example in fewshot.examples:  # (the examples of one block share its lines)
        if example.question_span is None:
            continue
        first = example.question_span.line - example.span.line + 1
        for number, line in enumerate(example.lines[first:], example.question_span.line + 1):
            meant = misspelt_marker(line)
            if meant is not None and number not in seen:
                seen.add(number)
                column = len(line) - len(line.lstrip()) + 1
                warnings.append(CheckWarning(
                    f"this line is read as context, not as a marker: did you mean `{meant[0]}`?",
                    nodes.Span(fewshot.path, number, column, number, len(line.rstrip()) + 1),
                    expected=meant[1], line_text=line))
    return warnings


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
    problem = fan_out_problem(op, step) if op.fans_out else None
    if problem is not None:
        errors.append(CheckError(problem, step.query_span or step.span, expected=FAN_OUT_HINT))
    for ref in step.refs:
        errors += _ref_problems(ref, available, params)
    return errors


def fan_out_problem(op, step: nodes.Step, what: str = "") -> str | None:
    """Why a fan-out or `(plan)` step (`op`, a parsed operator) has no single reference to
    iterate over (`nodes.Step.list_refs`), or None. `what`: the words after "reference"."""
    if len(step.list_refs) == 1:
        return None
    numbered = len(step.index_refs)
    said = f"({op.name}) needs exactly one #n reference{what}, found {numbered}"
    if numbered or not step.list_refs:
        return said + ("" if numbered else " (or, with no #n, one named input such as #items)")
    names = ", ".join(r.text for r in step.list_refs)
    return f"{said}; with no #n it iterates over its one named input, but it names {len(step.list_refs)}: {names}"


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
