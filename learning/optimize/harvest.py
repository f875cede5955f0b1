"""Demonstrations harvested from the traces of rows the metric accepted, in each target's form.

Every call of a target in a trace can become one demonstration, written as the target's own
examples are:

* a Q:/A: prompt: the rendered prompt less the few-shot text (so `Q: ...` and the `context`
  input when the handler shows one), then the answer as JSON, or the model's own text when
  `answer_regex` reads the answer out of it;
* a QC:/QS: prompt: `QC: query`, `QS: ` the model's line, `A: answer`, `QS: [EOQ]`;
* a decomposer: `QC: query`, each step it took as `QS: line` and `A: answer`, `QS: [EOQ]`.

Nested decomposers and the prompts inside programs are calls of the trace like any other. A
call made for one item of a `foreach` step is one of many alike: a row gives at most
`foreach_demos` of those per handler. Calls that failed, or whose outcome failed, give none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from decomp.dsl.values import json_text
from decomp.runtime.engine.tracing import TraceNode
from decomp.learning.optimize.targets import Target


@dataclass(frozen=True)
class Demo:
    """One demonstration for `handler`: `text` is the example as its file would hold it."""

    handler: str
    text: str
    query: str
    row: str            # the id of the row it came from
    source: str = "bootstrapped"   # or "labelled" (built from the row's gold answer)

    def to_dict(self) -> dict[str, str]:
        return {"handler": self.handler, "row": self.row, "source": self.source, "query": self.query}


def harvest(trace: TraceNode, row: str, targets: dict[str, Target], foreach_demos: int = 1,
            main: str | None = None, question: Any = None, gold: Any = None) -> list[Demo]:
    """The demonstrations of one accepted row's trace, in trace order, each text once per
    handler. The row node itself is the call of `main` (a run's entry handler) on `question`;
    `gold`, the row's answer, is the `A:` line of a QC:/QS: prompt asked the row's question."""
    demos: list[Demo] = []
    seen: set[tuple[str, str]] = set()
    from_items: dict[str, int] = {}
    for node, in_item, name, query in _calls(trace, main, question):
        target = targets.get(name or "")
        if target is None or node.error is not None or node.failed:
            continue
        if in_item and from_items.get(target.name, 0) >= foreach_demos:
            continue
        shown = _gold_answer(gold) if gold is not None and query == _as_query(question) else _NONE
        text = demo_text(target, node, query, shown)
        if text is None or (target.name, text) in seen or _blank_line(text):
            continue
        seen.add((target.name, text))
        if in_item:
            from_items[target.name] = from_items.get(target.name, 0) + 1
        demos.append(Demo(target.name, text, query, row))
    return demos


def _blank_line(text: str) -> bool:
    """A text with an empty line would read as two examples in a few-shot file: not kept."""
    return any(not line.strip() for line in text.split("\n"))


def _calls(trace: TraceNode, main: str | None, question: Any) -> Iterator[tuple[TraceNode, bool, str | None, str]]:
    """Each call, depth first in order: its node, whether it answers one item of a fan-out, its
    handler and its query. A row's node is the call of its entry handler `main`."""
    if trace.kind == "row" and main is not None:
        yield trace, False, main, _as_query(question)
    stack = [(trace, False)]
    while stack:
        node, in_item = stack.pop()
        if node.kind == "call":
            yield node, in_item, node.handler, node.query or ""
        stack.extend((child, node.kind == "item") for child in reversed(node.children))


def _as_query(question: Any) -> str:
    """A row's question as the entry handler's query (text as it is; anything else as JSON)."""
    return question if isinstance(question, str) else json_text(question)


_NONE = object()


def demo_text(target: Target, node: TraceNode, query: str, answer: Any = _NONE) -> str | None:
    """The demonstration one call of `target` on `query` gives (None: the trace lacks what it
    needs); a QC:/QS: prompt's `A:` line shows `answer` when given, else the call's answer."""
    if target.form == "decomposer":
        steps = [child for child in node.children if child.kind == "step"]
        lines = [f"QC: {query}"]
        for step in steps:
            lines += [f"QS: {step.label}", f"A: {json_text(step.answer)}"]
        return "\n".join([*lines, "QS: [EOQ]"])
    models = [child for child in node.children if child.kind == "model"]
    if len(models) != 1 or models[0].prompt is None or models[0].raw_output is None:
        return None
    prompt, said = models[0].prompt, models[0].raw_output.strip()
    shown = prompt[len(target.head):] if prompt.startswith(target.head) else _plain_query(target, query)
    if target.form == "qc":
        return f"{shown} {said}\nA: {json_text(node.answer if answer is _NONE else answer)}\nQS: [EOQ]"
    return f"{shown} {said if target.raw else json_text(node.answer)}"


def _plain_query(target: Target, query: str) -> str:
    return f"QC: {query}\nQS:" if target.form == "qc" else f"Q: {query}\nA:"


def labelled(target: Target, row: str, question: Any, gold: Any) -> Demo | None:
    """A demonstration built from a row's gold answer for the handler the program's main is,
    when its form allows: a Q:/A: prompt whose answer is the JSON written (not read out by an
    `answer_regex`) and that shows no context."""
    if target.form != "qa" or target.raw or target.context or not isinstance(question, str) or gold is None:
        return None
    return Demo(target.name, f"Q: {question}\nA: {json_text(_gold_answer(gold))}", question, row, "labelled")


def _gold_answer(gold: Any) -> Any:
    """One answer of a row's gold: the first alternative of DROP-style gold, else the gold."""
    answer = gold[0] if isinstance(gold, list) and gold and isinstance(gold[0], (list, tuple)) else gold
    return list(answer) if isinstance(answer, tuple) else answer
