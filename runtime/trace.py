"""The decomposition tree of one run: a node per handler call, children for nested work."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class TraceNode:
    """One call: where it was written, what it sent, what came back, and what ran beneath it."""

    kind: str                      # "row" | "step" | "item" | "call" | "model" | "decomposer-line"
    label: str = ""
    handler: str | None = None
    operator: str | None = None
    location: str | None = None    # file:line of the program line
    query: str | None = None
    prompt: str | None = None
    raw_output: str | None = None
    answer: Any = None
    error: str | None = None
    cache_hit: bool = False
    children: list["TraceNode"] = field(default_factory=list)

    def child(self, kind: str, **fields) -> "TraceNode":
        node = TraceNode(kind, **fields)
        self.children.append(node)
        return node

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return asdict(self)

    def walk(self):
        """This node and all below it, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()
