"""Plain-JSON views of parsed modules and few-shot files, for `decomp check --json`."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError


def describe(node: Any, warnings: Iterable[DecompError] = ()) -> Any:
    """A JSON-able description of a `Module` or `FewShot` (spans as "file:line:col"); a
    module's also lists the check's `warnings` (each with where, message and what to do)."""
    if isinstance(node, nodes.FewShot):
        return [_example(e) for e in node.examples]
    out = _plain(node)
    if isinstance(node, nodes.Module):
        out["warnings"] = [describe_warning(w) for w in warnings]
    return out


def describe_warning(warning: DecompError) -> dict:
    """A warning (or any diagnostic) as JSON: "at" as "file:line:col", the line and column apart."""
    span = warning.span
    return {"at": str(span) if span else None, "line": span.line if span else None,
            "column": span.column if span else None, "message": warning.message, "expected": warning.expected}


def _example(example: nodes.Example) -> dict:
    return {
        "question": example.question,
        "context": example.context or None,
        "line": example.span.line,
        "steps": [
            {"operator": s.step.operator, "handler": s.step.handler, "query": s.step.query,
             "answer": s.answer.value if s.answer else None}
            for s in example.steps
        ],
        "answer": example.answer.value if example.answer else None,
    }


def _plain(node: Any) -> Any:
    if isinstance(node, nodes.Span):
        return str(node)
    if dataclasses.is_dataclass(node):
        out = {"node": type(node).__name__}
        for f in dataclasses.fields(node):
            if f.name not in ("mains", "metrics"):
                out[f.name] = _plain(getattr(node, f.name))
        return out
    if isinstance(node, (list, tuple)):
        return [_plain(x) for x in node]
    return node
