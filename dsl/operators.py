"""DecomP's operators, with the official implementation's semantics.

An operator name is a base and sub-operations joined by "_": `project_values_flat_unique` is
`project` followed by `values`, `flat`, `unique`. Bases: `select`, `project`, `projectValues`,
`projectKeys`, `filter`, `filterValues`, `filterKeys`. Sub-operations: `flat` (recursive
flatten), `unique` (drop repeats by JSON text, first kept), `keys`, `values`.
Short names: `foreach` = `project_values`, `foreach_merge` = `project_values_flat_unique`.
Ours: `plan` (ADaPT) runs the handler on the steps of a planner's text in its Execution Order.
Every operator but `select` iterates over the one `#n` of its step, or, in a step with no `#n`,
over its one named input (`decomp.dsl.nodes.Step.list_refs`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from decomp.dsl.errors import DecompError

SYNONYMS = {
    "foreach": "project_values",
    "foreach_merge": "project_values_flat_unique",
    "foreach_flat": "project_values_flat",
}
BASES = ("select", "project", "projectValues", "projectKeys", "filter", "filterValues", "filterKeys", "plan")
SUB_OPERATIONS = ("flat", "unique", "keys", "values")
KNOWN = tuple(SYNONYMS) + ("select", "project", "project_values", "project_values_flat",
                           "project_values_flat_unique", "filter", "plan")


@dataclass(frozen=True)
class Operator:
    name: str
    base: str
    subops: tuple[str, ...]

    @property
    def fans_out(self) -> bool:
        """True for operators that run the handler once per item of a list answer."""
        return self.base != "select"

    @property
    def is_plan(self) -> bool:
        """`(plan) [h] #n`: run `[h]` on the steps of the plan `#n` in its AND/OR order."""
        return self.base == "plan"

    @property
    def inserts_json(self) -> bool:
        """`projectValues` and friends insert the pair's part as JSON text; the others raw."""
        return self.base not in ("select", "project", "filter")


class OperatorError(DecompError, ValueError):
    """An unknown operator name, or a value an operator cannot work on."""


@lru_cache(maxsize=256)
def parse_operator(name: str | None) -> Operator:
    """`Operator` for a name as written in `(name)`; None means select (memoised: operators are few)."""
    written = name or "select"
    full = SYNONYMS.get(written, written)
    base, *subops = full.split("_")
    if base not in BASES or any(s not in SUB_OPERATIONS for s in subops) or (base == "plan" and subops):
        raise OperatorError(f"unknown operator '({written})'")
    return Operator(written, base, tuple(subops))


def items_of(op: Operator, value: Any) -> list:
    """The list a fan-out operator iterates over; for `project` operators (not `filter`, as in
    the official code) a single string counts as a one-item list."""
    if isinstance(value, list):
        return value
    if isinstance(value, str) and op.base.startswith("project"):
        return [value]
    raise OperatorError(f"({op.name}) cannot iterate over {json.dumps(value, ensure_ascii=False)}: not a list")


def item_for_query(op: Operator, item: Any) -> Any:
    """The part of an item that goes into its query (`projectValues` uses the pair's value)."""
    if op.base in ("projectValues", "filterValues", "projectKeys", "filterKeys"):
        if not (isinstance(item, list) and len(item) == 2):
            raise OperatorError(f"({op.name}) needs [key, value] pairs, got {json.dumps(item)}")
        return item[1] if op.base.endswith("Values") else item[0]
    return item


def combine(op: Operator, items: list, answers: list) -> Any:
    """The step's answer from the per-item answers, then the sub-operations in order."""
    if op.base == "select":
        result: Any = answers[0]
    elif op.base == "project":
        result = [[item, answer] for item, answer in zip(items, answers)]
    elif op.base == "projectValues":
        result = [[item[0], answer] for item, answer in zip(items, answers)]
    elif op.base == "projectKeys":
        result = [[answer, item[1]] for item, answer in zip(items, answers)]
    else:
        result = [item for item, answer in zip(items, answers) if is_true(answer)]
    for sub in op.subops:
        result = _SUBOPS[sub](result)
    return result


def is_true(answer: Any) -> bool:
    """A filter's verdict: true, "yes", "1" or "true" (any case) keep the item; as in the
    official code, only booleans and strings are verdicts."""
    if isinstance(answer, bool):
        return answer
    if isinstance(answer, str):
        return answer.strip().lower() in ("yes", "1", "true")
    raise OperatorError(f"cannot read {json.dumps(answer)} as yes or no")


def flatten(value: Any) -> list:
    if not isinstance(value, list):
        return [value]
    return [leaf for item in value for leaf in (flatten(item) if isinstance(item, list) else [item])]


def unique(value: Any) -> list:
    if not isinstance(value, list):
        raise OperatorError(f"unique needs a list, got {json.dumps(value)}")
    seen, out = set(), []
    for item in value:
        key = json.dumps(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _pairs_part(index: int):
    def pick(value: Any) -> list:
        if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
            raise OperatorError(f"keys/values need a list of [key, value] pairs, got {json.dumps(value)}")
        return [pair[index] for pair in value]
    return pick


_SUBOPS = {"flat": flatten, "unique": unique, "keys": _pairs_part(0), "values": _pairs_part(1)}


_BASE_WORDS = {
    "select": "runs the handler once, on the query with each #n replaced by its answer",
    "project": "runs the handler once per item of #n's list (a string counts as one item); the answer is "
               "the list of [item, answer] pairs",
    "projectValues": "runs the handler once per [key, value] pair of #n, on the value (as JSON); the answer is "
                     "the list of [key, answer] pairs",
    "projectKeys": "runs the handler once per [key, value] pair of #n, on the key (as JSON); the answer is "
                   "the list of [answer, value] pairs",
    "filter": "runs the handler once per item of #n's list; keeps the items it answers true for",
    "filterValues": "runs the handler on the value of each [key, value] pair of #n; keeps the pairs it answers "
                    "true for",
    "filterKeys": "runs the handler on the key of each [key, value] pair of #n; keeps the pairs it answers "
                  "true for",
    "plan": "runs the handler on each step of the plan #n (ADaPT), in its Execution Order (AND: all must "
            "succeed, OR: the first success)",
}
_SUB_WORDS = {"flat": "flattened (nested lists, recursively)", "unique": "without repeats (the first kept)",
              "keys": "only the first part of each pair", "values": "only the second part of each pair"}


def describe(name: str | None) -> str:
    """What an operator does, in one sentence (raises `OperatorError` for an unknown name)."""
    op = parse_operator(name)
    full = SYNONYMS.get(op.name, op.name)
    words = f"`({op.name})`" + (f" = `({full})`" if full != op.name else "") + ": " + _BASE_WORDS[op.base]
    subs = [_SUB_WORDS[s] for s in op.subops]
    named = "" if op.base == "select" else " In a step with no #n, #n is its one named input (#items)."
    return words + ("; then " + ", ".join(subs) if subs else "") + "." + named
