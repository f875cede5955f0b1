"""Python handlers of the symbolic list-reversal program (reverse_symbolic.decomp)."""
from __future__ import annotations

import re


def items(query: str, values: list) -> list:
    """The items of a sequence: a list as it is, or the quoted "a, b, c" of a question."""
    if values and isinstance(values[0], list):
        return values[0]
    found = re.search(r'"([^"]*)"', query)
    text = found.group(1) if found else query
    return [item.strip() for item in text.split(",") if item.strip()]


def first_half(values: list) -> list:
    seq = values[0]
    return seq[: len(seq) // 2]


def second_half(values: list) -> list:
    seq = values[0]
    return seq[len(seq) // 2:]


def reverse_short(values: list) -> list:
    """The base case: a short list reversed directly."""
    return list(reversed(values[0]))


def concat(values: list) -> list:
    """values = [first, second]: the two lists one after the other."""
    first, second = values
    return first + second


def join_items(values: list) -> str:
    return ", ".join(values[0])
