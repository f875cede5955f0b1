"""The decomposition tree of one run: a node per handler call, children for nested work."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(slots=True)
class TraceNode:
    """One call: where it was written, what it sent, what came back, and what ran beneath it."""

    kind: str                      # "row" | "step" | "item" | "call" | "model" | "decomposer-line" | "if"
    #                                "plan" | "and" | "or" (a plan's groups) | "iteration" (an executor's turn)
    label: str = ""
    handler: str | None = None
    operator: str | None = None
    location: str | None = None    # file:line of the program line
    query: str | None = None
    prompt: str | None = None
    raw_output: str | None = None
    answer: Any = None
    error: str | None = None
    details: str | None = None     # more on the error: a Python handler's traceback of the user's code
    failed: bool = False           # the outcome: answered, but failed (ok(#n) is false)
    skipped: bool = False          # a plan step that never ran (its AND/OR group was decided)
    cache_hit: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float | None = None   # wall time of the call (model node: of the request)
    children: list["TraceNode"] = field(default_factory=list)

    def child(self, kind: str, **fields) -> "TraceNode":
        node = TraceNode(kind, **fields)
        self.children.append(node)
        return node

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        """Plain JSON: every field, with `ok` added; children as dicts."""
        return _plain(self)

    @classmethod
    def from_dict(cls, data: dict) -> "TraceNode":
        """The node `to_dict` gave (unknown keys ignored)."""
        fields = {k: v for k, v in data.items() if k in _FIELDS and k != "children"}
        return cls(**fields, children=[cls.from_dict(c) for c in data.get("children") or ()])

    def walk(self):
        """This node and all below it, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()

    def failure_details(self) -> str | None:
        """The details (a Python handler's traceback of the user's code) of the first failed
        node below that has any, or None."""
        return next((node.details for node in self.walk() if node.error is not None and node.details), None)


_FIELDS = frozenset(f.name for f in fields(TraceNode))


def _plain(node: TraceNode) -> dict:
    out = {name: getattr(node, name) for name in _ORDER}
    out["ok"] = node.error is None
    out["children"] = [_plain(c) for c in node.children]
    return out


_ORDER = tuple(name for name in (f.name for f in fields(TraceNode)) if name != "children")
