"""What `decomp check` warns about in a Jinja template: output that can grow without bound.

    for line, message in growth_warnings(source): ...

A render is stopped at `MAX_TEXT` characters or its time limit (`decomp.handlers.sandbox.templates`),
so such a template fails its rows instead of answering them; the checker says so before any
run, where it can tell from the template alone:

  * a namespace attribute set inside a `{% for %}` loop from itself twice or more
    (`{% set s.v = s.v ~ s.v %}`, `[s.v, s.v]`), or once through `*`, `**`, `|string`,
    `|tojson` or `|pprint` (`s.v * 2`, `s.v|tojson`): it doubles, or worse, every iteration;
  * a macro that calls itself twice or more: its calls double at every level.

A plain `{% set x = ... %}` inside a loop is not warned about: Jinja starts every iteration
from the value before the loop, so nothing accumulates.
"""
from __future__ import annotations

from typing import Iterator

from jinja2 import nodes
from jinja2.exceptions import TemplateError

from decomp.handlers.sandbox.templates import JINJA

#: Where one use of a value makes it grow at every iteration.
_GROWING_FILTERS = frozenset({"string", "tojson", "pprint"})


def growth_warnings(source: str) -> list[tuple[int, str]]:
    """(line of the template, message) for each place its output can grow without bound; none
    for a template that does not parse (that is the check's error)."""
    try:
        tree = JINJA.parse(source)
    except (TemplateError, RecursionError):
        return []
    found: dict[int, tuple[int, str]] = {}
    for loop in tree.find_all(nodes.For):
        for assign in _namespace_assignments(loop):
            message = _self_growth(assign)
            if message is not None:
                found.setdefault(id(assign), (assign.lineno, message))
    for macro in tree.find_all(nodes.Macro):
        calls = sum(1 for call in macro.find_all(nodes.Call)
                    if isinstance(call.node, nodes.Name) and call.node.name == macro.name)
        if calls >= 2:
            found[id(macro)] = (macro.lineno, f"output can grow without bound: macro `{macro.name}` calls itself "
                                              f"{_times(calls)}, so its calls double at every level")
    return sorted(found.values())


def _namespace_assignments(loop: nodes.For) -> Iterator[nodes.Assign | nodes.AssignBlock]:
    for node in (*loop.find_all(nodes.Assign), *loop.find_all(nodes.AssignBlock)):
        if isinstance(node.target, nodes.NSRef):
            yield node


def _self_growth(assign: nodes.Assign | nodes.AssignBlock) -> str | None:
    target = assign.target
    value = assign.node if isinstance(assign, nodes.Assign) else nodes.Output(assign.body)
    uses = list(_uses(value, target.name, target.attr, None))
    name = f"`{target.name}.{target.attr}`"
    if len(uses) >= 2:
        return f"output can grow without bound: {name} is built from itself {_times(len(uses))} in a loop"
    through = next((via for via in uses if via is not None), None)
    if through is not None:
        return f"output can grow without bound: {name} is built from itself through {through} in a loop"
    return None


def _uses(node: nodes.Node, name: str, attr: str, via: str | None) -> Iterator[str | None]:
    """Each use of `name.attr` under `node`, with the outermost growing operation it is under."""
    if isinstance(node, nodes.Getattr) and node.attr == attr and isinstance(node.node, nodes.Name) \
            and node.node.name == name:
        yield via
        return
    if via is None:
        if isinstance(node, (nodes.Mul, nodes.Pow)):
            via = f"`{node.operator}`"
        elif isinstance(node, nodes.Filter) and node.name in _GROWING_FILTERS:
            via = f"`|{node.name}`"
    for child in node.iter_child_nodes():
        yield from _uses(child, name, attr, via)


def _times(count: int) -> str:
    return "twice" if count == 2 else f"{count} times"
