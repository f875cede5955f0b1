"""The decomposition tree of one run: a node per handler call, children for nested work.

A tree is as deep as the program's recursion (each nested call adds a step and a call node), so
nothing here recurses: walking, converting to and from dicts and writing JSON use explicit
stacks, and a tree of any depth the session allows is written, read back and shown.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator

from decomp.dsl.values import json_kind
from decomp.runtime.engine import deepjson
from decomp.dsl.sizes import answer_size


@dataclass(slots=True, repr=False)
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
    seconds: float | None = None   # wall time of the call (model node: of the request), queue included
    queued: float | None = None    # of `seconds`, the time it waited for a slot (see `service`)
    started: float | None = None   # when it started, in seconds since the epoch (wall clock)
    #: What else is known, as flat JSON: a call's handler kind ("kind"); a model request's
    #: "model", "provider", "operation", "temperature", "max_tokens", "finish_reasons".
    facts: dict | None = None
    children: list["TraceNode"] = field(default_factory=list)

    def __repr__(self) -> str:  # its own fields and how many children (a tree may be thousands deep)
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _ORDER
                          if getattr(self, name) not in (None, "", False, 0) or name == "kind")
        return f"TraceNode({shown}, children={len(self.children)})"

    def child(self, kind: str, **fields) -> "TraceNode":
        node = TraceNode(kind, **fields)
        self.children.append(node)
        return node

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def service(self) -> float | None:
        """The seconds the call ran: `seconds` less the time it `queued` for a slot (a worker,
        the scheduler's concurrency limit, a rate limit, a busy model). A handler call's queue
        time is its own waits and those of its model and service requests; the handlers it
        called are part of its service time (their nodes have their own figures)."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - (self.queued or 0.0))

    def to_dict(self) -> dict:
        """Plain JSON: every field, with `ok` added; children as dicts (nested as the tree is)."""
        root = _plain(self)
        stack = [(self, root)]
        while stack:
            node, out = stack.pop()
            for child in node.children:
                plain = _plain(child)
                out["children"].append(plain)
                stack.append((child, plain))
        return root

    @classmethod
    def from_dict(cls, data: dict) -> "TraceNode":
        """The node `to_dict` (nested) or `to_records` (`{"nodes": [...]}`) gave (unknown keys
        ignored). `ValueError`, saying what is wrong, for anything else: not an object, a field
        of the wrong type, an answer nested more than `MAX_ANSWER_DEPTH` levels deep."""
        if not isinstance(data, dict):
            raise ValueError(f"a trace is a JSON object, not {json_kind(data)}")
        if "nodes" in data and "kind" not in data:
            return cls.from_records(data["nodes"])
        root = cls._one(data)
        stack = [(root, data)]
        while stack:
            node, plain = stack.pop()
            children = plain.get("children")
            if children is not None and not isinstance(children, list):
                raise ValueError(f"a trace node's 'children' is {json_kind(children)}, not a list")
            for item in children or ():
                child = cls._one(item)
                node.children.append(child)
                stack.append((child, item))
        return root

    def to_records(self) -> list[dict]:
        """The tree as a flat list, parents before children (depth first, in order): each node's
        fields as `to_dict` writes them, less `children`, plus `parent` (the index of its
        parent in the list; None for this node). Its JSON is never deeper than a node's."""
        records: list[dict] = []
        stack: list[tuple[TraceNode, int | None]] = [(self, None)]
        while stack:
            node, parent = stack.pop()
            record = _plain(node)
            del record["children"]
            record["parent"] = parent
            records.append(record)
            index = len(records) - 1
            stack.extend((child, index) for child in reversed(node.children))
        return records

    @classmethod
    def from_records(cls, records: list[dict]) -> "TraceNode":
        """The tree `to_records` gave (`ValueError` for anything else, as `from_dict`)."""
        if not isinstance(records, list):
            raise ValueError(f"a trace's 'nodes' is {json_kind(records)}, not a list")
        nodes: list[TraceNode] = []
        for record in records:
            node = cls._one(record)
            parent = record.get("parent")
            if nodes and parent is None:
                raise ValueError("a trace record after the first has no parent")
            if parent is not None:
                if not isinstance(parent, int) or not 0 <= parent < len(nodes):
                    raise ValueError(f"a trace record names parent {parent!r}, not an earlier record")
                nodes[parent].children.append(node)
            nodes.append(node)
        if not nodes:
            raise ValueError("no trace records")
        return nodes[0]

    def to_json(self, indent: int | None = None) -> str:
        """The tree as nested JSON text (`to_dict`), storable whatever it holds (see
        `decomp.dsl.values.storable_json`) and however deep it is."""
        return deepjson.dumps(self.to_dict(), indent=indent)

    @classmethod
    def _one(cls, data: dict) -> "TraceNode":
        """One node of a stored trace, each field checked to be of its type."""
        if not isinstance(data, dict):
            raise ValueError(f"a trace node is a JSON object, not {json_kind(data)}")
        values = {k: v for k, v in data.items() if k in _FIELDS and k != "children"}
        if "kind" not in values:
            raise ValueError("a trace node has no 'kind'")
        for name, value in values.items():
            problem = _type_problem(name, value)
            if problem:
                raise ValueError(f"a trace node's {name!r} {problem}")
        return cls(**values)

    def walk(self) -> Iterator["TraceNode"]:
        """This node and all below it, depth first (each node before its children, in order)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def failure_details(self, error: str | None = None) -> str | None:
        """The details (a Python handler's traceback of the user's code) of the first failed
        node below that has any, or None. With `error`: of a node that failed with that very
        message, so a step's traceback is never shown under another step's error."""
        return next((node.details for node in self.walk() if node.error is not None and node.details
                     and (error is None or node.error == error)), None)


_FIELDS = frozenset(f.name for f in fields(TraceNode))

#: How deeply a stored node's answer may nest (deeper: a damaged trace).
MAX_ANSWER_DEPTH = deepjson.MAX_VALUE_DEPTH
_TEXT = frozenset({"label", "handler", "operator", "location", "query", "prompt", "raw_output", "error", "details"})
_FLAGS = frozenset({"failed", "skipped", "cache_hit"})
_COUNTS = frozenset({"prompt_tokens", "completion_tokens"})


def _type_problem(name: str, value: Any) -> str | None:
    """What is wrong with `value` as the node field `name` (None: nothing)."""
    if name == "kind":
        return None if isinstance(value, str) else f"is {json_kind(value)}, not a string"
    if name in _TEXT:
        return None if value is None or isinstance(value, str) else f"is {json_kind(value)}, not a string"
    if name in _FLAGS:
        return None if isinstance(value, bool) else f"is {json_kind(value)}, not a boolean"
    if name in _COUNTS:
        return None if isinstance(value, int) and not isinstance(value, bool) else f"is {json_kind(value)}, not a count"
    if name in ("seconds", "started", "queued"):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if value is None or number else f"is {json_kind(value)}, not a number"
    if name == "facts":
        return None if value is None or (isinstance(value, dict) and all(
            isinstance(k, str) and _fact(v) for k, v in value.items())) else \
            f"is not an object of plain values (nested at most {FACT_DEPTH} levels)"
    if name == "answer" and deepjson.depth(value, MAX_ANSWER_DEPTH) > MAX_ANSWER_DEPTH:
        return f"is nested more than {MAX_ANSWER_DEPTH} levels deep"
    return None


#: How deeply a fact's value may nest: a chat request's messages with their tool calls take 5.
FACT_DEPTH = 6


def _fact(value: Any) -> bool:
    """A fact's value: a string, number, boolean or null, or a list or object of them nested at
    most `FACT_DEPTH` levels (a chat request's `messages`, the `tool_calls` of its reply)."""
    if isinstance(value, (list, dict)):
        return deepjson.depth(value, FACT_DEPTH) <= FACT_DEPTH
    return value is None or isinstance(value, (str, int, float, bool))


#: The most characters of one text of a node (its query, prompt, output, answer, details) a
#: written trace keeps; the rest is cut, and the cut says how much (the full answer of a row is
#: in results.jsonl). So a row whose calls answer megabytes writes a trace of a bounded size.
TRACE_TEXT = 64 * 1024
_TEXTS = ("query", "prompt", "raw_output", "answer", "details")


def kept(value: Any) -> Any:
    """`value` as a trace keeps it: a text over `TRACE_TEXT` characters cut, with the count of
    those left out; a list or dict holding more text than that, its JSON so cut."""
    if isinstance(value, str):
        if len(value) <= TRACE_TEXT:
            return value
        return value[:TRACE_TEXT] + f" … [{len(value) - TRACE_TEXT:,} more characters not kept in the trace]"
    if isinstance(value, (list, dict)) and answer_size(value) > TRACE_TEXT:
        return kept(deepjson.dumps(value))
    return value


def _plain(node: TraceNode) -> dict:
    """The node's own fields (its texts as `kept`), `ok`, and an empty `children` list (filled by
    the caller)."""
    out = {name: getattr(node, name) for name in _ORDER}
    for name in _TEXTS:
        out[name] = kept(out[name])
    if out["facts"]:  # a chat request's messages are as long as its prompt: cut alike
        out["facts"] = {name: kept(value) for name, value in out["facts"].items()}
    out["ok"] = node.error is None
    out["children"] = []
    return out


_ORDER = tuple(name for name in (f.name for f in fields(TraceNode)) if name != "children")
