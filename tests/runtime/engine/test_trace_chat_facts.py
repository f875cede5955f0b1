"""A chat request's trace facts (issue 43): the `messages` sent and the `tool_calls` answered
are objects nested a few levels, and a written trace reads back with them (a run directory's
traces, `decomp trace`, resume), cut as its texts are."""
from __future__ import annotations

import json

import pytest

from decomp.runtime.engine.tracing import FACT_DEPTH, TRACE_TEXT, TraceNode

CALL = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "4", "tool_call_id": "call_0"}]


def chat_tree(messages) -> TraceNode:
    root = TraceNode("row")
    node = root.child("call", handler="ask").child("model", prompt="2 + 2?", raw_output="4")
    node.facts = {"operation": "chat", "messages": messages, "tool_calls": [[CALL]], "finish_reasons": ["stop"]}
    return root


def test_a_written_chat_trace_reads_back_with_its_messages_and_tool_calls():
    written = json.dumps({"nodes": chat_tree(MESSAGES).to_records()})
    model = next(n for n in TraceNode.from_dict(json.loads(written)).walk() if n.kind == "model")
    assert model.facts == {"operation": "chat", "messages": MESSAGES, "tool_calls": [[CALL]],
                           "finish_reasons": ["stop"]}


def test_long_messages_are_cut_as_the_prompt_is():
    long = [{"role": "user", "content": "w" * (TRACE_TEXT + 10)}]
    written = json.loads(json.dumps({"nodes": chat_tree(long).to_records()}))
    model = next(n for n in TraceNode.from_dict(written).walk() if n.kind == "model")
    assert isinstance(model.facts["messages"], str) and model.facts["messages"].endswith("not kept in the trace]")


def test_a_fact_nested_deeper_than_a_chat_request_is_a_damaged_trace():
    deep: list = ["x"]
    for _ in range(FACT_DEPTH):
        deep = [deep]
    record = {"kind": "model", "facts": {"messages": deep}}
    with pytest.raises(ValueError, match=r"'facts' is not an object of plain values \(nested at most 6 levels\)"):
        TraceNode.from_dict(record)
