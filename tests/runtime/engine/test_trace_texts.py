"""A written trace keeps at most `TRACE_TEXT` characters of each text of a node (issue 29 B3):
a row whose calls answer megabytes writes a trace of bounded size, and the cut says how much
was left out; the row's answer itself is whole in its result."""
from __future__ import annotations

import json

from decomp.runtime.engine.tracing import TRACE_TEXT, TraceNode, kept


def test_long_texts_are_cut_and_say_how_much():
    text = "x" * (TRACE_TEXT + 1234)
    cut = kept(text)
    assert cut.startswith("x" * TRACE_TEXT) and cut.endswith(" … [1,234 more characters not kept in the trace]")
    assert kept("short") == "short" and kept(["a", 1]) == ["a", 1] and kept(None) is None


def test_a_large_list_answer_is_kept_as_its_cut_json():
    answer = ["y" * 1000] * (TRACE_TEXT // 1000 + 10)
    cut = kept(answer)
    assert isinstance(cut, str) and cut.startswith('["yyy') and "more characters not kept in the trace" in cut


def test_a_written_trace_is_bounded_whatever_its_answers_hold():
    big = "z" * (8 * 2**20)
    root = TraceNode("row")
    for i in range(20):
        item = root.child("call", handler="big", query=big, answer=big)
        item.child("model", prompt=big, raw_output=big)
    written = json.dumps({"nodes": root.to_records()})
    assert len(written) < 41 * 5 * (TRACE_TEXT + 100)  # every text cut, not 20 x 8 MiB x 4
    back = TraceNode.from_dict(json.loads(written))
    assert back.children[0].answer.endswith(f"{8 * 2**20 - TRACE_TEXT:,} more characters not kept in the trace]")
    assert root.children[0].answer is big  # the live tree is untouched: only what is written is cut
