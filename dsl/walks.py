"""Pure walks over program bodies: the steps in text order, their answer numbers, early ends."""
from __future__ import annotations

from typing import Iterator

from decomp.dsl import nodes


def iter_steps(body: tuple) -> Iterator[nodes.Step]:
    """Every step of a body in text order, the steps inside `if` branches included (a stack
    of statement iterators, not recursion: each step is yielded once, at any depth)."""
    stack = [iter(body)]
    while stack:
        stmt = next(stack[-1], None)
        if stmt is None:
            stack.pop()
        elif isinstance(stmt, nodes.If):
            stack += [iter(stmt.otherwise), iter(stmt.then)]
        else:
            yield stmt


def number_steps(body: tuple) -> dict[nodes.Span, int]:
    """Answer numbers of a program's steps: their order in the text, `[EOQ]` lines not counted."""
    numbers: dict[nodes.Span, int] = {}
    for step in iter_steps(body):
        if not step.is_end:
            numbers[step.span] = len(numbers) + 1
    return numbers


def ends_program(stmt: nodes.If) -> bool:
    """Whether an `[EOQ]` sits anywhere inside this `if`."""
    return any(s.is_end for s in iter_steps((stmt,)))
