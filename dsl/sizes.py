"""How much text an answer holds, and the error for one over the answer size limit.

    answer_size(["abc", {"k": 1}])   # 3 + 1 + 8: strings by length, other scalars 8 each

The engine sizes every handler answer against `--max-answer-size` (`RowContext.after_answer`);
a kind that gets its answer from elsewhere (a worker process) may size it there first, so that an
answer over the limit never crosses into the run's process (`decomp.handlers.kinds.python`).
"""
from __future__ import annotations

import sys
from typing import Any

from decomp.dsl.errors import BudgetExceeded
from decomp.dsl.values import Failed

#: What `answer_size` counts for a value that is not text (a number, a boolean, None, ...).
_SCALAR = 8


def answer_size(value: Any) -> int:
    """The characters of text `value` holds: its strings (dict keys too) by length, anything else
    `_SCALAR` each; a list or dict met twice (shared) counts twice, as its JSON would, computed
    once (time linear in the distinct values, no recursion). `CYCLIC` for a value within itself."""
    if isinstance(value, str):
        return len(value)
    sizes: dict[int, int] = {}
    opened: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    keep: list[Any] = []  # the containers sized, so that no id() is reused meanwhile
    while stack:
        item, expanded = stack.pop()
        key = id(item)
        if not expanded and key in sizes:
            continue
        children = _children(item)
        if children is None:
            sizes[key] = _SCALAR
        elif not expanded:
            if key in opened:
                return CYCLIC
            opened.add(key)
            keep.append(item)
            stack.append((item, True))
            stack.extend((child, False) for child in children if not isinstance(child, str))
        else:
            opened.discard(key)
            sizes[key] = sum(len(c) if isinstance(c, str) else sizes[id(c)] for c in children)
    return sizes[id(value)]


#: What `answer_size` says of a list or dict that holds itself.
CYCLIC = sys.maxsize


def _children(value: Any) -> list[Any] | None:
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, dict):
        return [part for pair in value.items() for part in pair]
    if isinstance(value, Failed):
        return [value.value]
    return None


def over_answer_limit(handler: str, size: int, limit_mb: float) -> BudgetExceeded:
    """The row's error for an answer of handler `handler` holding `size` characters of text, over
    the limit of `limit_mb` MiB."""
    return BudgetExceeded(f"limit exceeded: the answer of [{handler}] holds {size / 2**20:,.1f} MiB of text, "
                          f"over the limit of {limit_mb:g} MiB (raise it with --max-answer-size MB)")
