"""No row text leaves with content capture off, in span names too (issue 41): a row whose id is the
API key, a foreach item, a query, an answer and an error message each holding the key and an
ordinary marker from the row; through a relay that keeps every byte the real receiver (MLflow,
tests/runtime/exports/otel_receiver.py) is sent, neither is found there nor in what MLflow stored.
With capture on the row text goes, the key only masked."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.dsl.redact import SecretMask
from decomp.runtime.cli import main
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.exports import otel
from tests.runtime.exports.otel_receiver import EXPERIMENT_HEADER, mlflow_receiver, recording_relay, spans_of

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

KEY = "sk-names-secret-key-9876543210"
MARKER = "plumquartz"  # ordinary row text: no mask knows it
MASKED = "[redacted: OPENAI_API_KEY]"
PROGRAM = r'''handler split  = regex(pattern="(\\S+)", all=true)
handler ask    = prompt(text="Say {{question}}", max_tokens=16)
handler digits = regex(pattern="(\\d{40})")
program leak(question) {
  QS: [split] #question
  QS: (foreach) [ask] #1
  QS: [digits] #question then #2
}
main leak
'''


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    with mlflow_receiver(tmp_path_factory.mktemp("mlflow")) as found:
        yield found


MOCK_SERVER = {"responder": lambda prompt, request: f"echo {prompt}"}  # the `server` fixture (tests/conftest.py)


def _run(folder, receiver, server, monkeypatch, content: bool):
    """`decomp run --otlp` of one row through the relay; (bytes received, MLflow's traces as JSON)."""
    url, client = receiver
    experiment = client.create_experiment(f"leak-{content}")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"{EXPERIMENT_HEADER}={experiment}")
    monkeypatch.setenv(otel.CONTENT_ENV, "true" if content else "false")
    (folder / "leak.decomp").write_text(PROGRAM, encoding="utf-8")
    (folder / "rows.jsonl").write_text(json.dumps({"id": KEY, "question": f"{MARKER} {KEY}"}) + "\n",
                                       encoding="utf-8")
    with recording_relay(url) as (relay, received):
        done = CliRunner().invoke(main, ["run", str(folder / "leak.decomp"), "--input", str(folder / "rows.jsonl"),
                                         "--run-dir", str(folder / "run"), "--model", "openai:mock", "--base-url",
                                         server.base_url, "--cache", "off", "--otlp", relay], catch_exceptions=False)
        assert done.exit_code == 3, done.output  # the row ends in [digits]'s error, which quotes its query
        assert KEY not in done.output and "warning" not in done.stderr
        traces = spans_of(client, experiment, 1)
    stored = [client.get_trace(t.info.trace_id).to_json() for t in client.search_traces(locations=[experiment])]
    return b"".join(received), "\n".join(stored), [span for trace in traces for span in trace]


def test_with_content_capture_off_no_row_text_is_sent_in_any_byte(tmp_path, receiver, server, monkeypatch):
    sent, stored, spans = _run(tmp_path, receiver, server, monkeypatch, content=False)
    for found in (sent, stored.encode()):
        assert KEY.encode() not in found and MARKER.encode() not in found
        assert b"redacted" not in found  # nothing from a row goes, not even masked
    assert sorted(s.name for s in spans) == sorted(
        ["row 0", "step 1 [split]", "[split] regex", "step 2 [ask]", "step 3 [digits]", "[digits] regex"]
        + ["item 1", "item 2"] + ["[ask] prompt", "text_completion mock"] * 2)
    failed = next(s for s in spans if s.name == "[digits] regex")
    assert failed.status.description == "call error in [digits] (its message is sent only with content capture on)"
    assert failed.attributes["code.lineno"] == 7 and failed.attributes["decomp.outcome"] == "error"


def test_with_content_capture_on_row_text_is_sent_and_the_key_only_masked(tmp_path, receiver, server, monkeypatch):
    sent, stored, spans = _run(tmp_path, receiver, server, monkeypatch, content=True)
    for found in (sent, stored.encode()):
        assert KEY.encode() not in found
        assert MARKER.encode() in found and MASKED.encode() in found
    root = next(s for s in spans if s.parent_id is None)
    assert root.name == f"row {MASKED}" and root.attributes["decomp.row.id"] == MASKED
    assert {s.name for s in spans if s.attributes["decomp.node.kind"] == "item"} == {f"item {MARKER}", f"item {MASKED}"}
    failed = next(s for s in spans if s.name == "[digits] regex")
    assert MARKER in failed.status.description and MASKED in failed.status.description


def _every_kind() -> TraceNode:
    """A row's tree with a node of every kind, each text field holding the key and the marker."""
    text = f"{MARKER} {KEY}"
    fields = dict(label=text, query=text, prompt=text, raw_output=text, answer={"a": text}, error=text, details=text)
    root = TraceNode("row", **{**fields, "label": KEY}, started=10.0, seconds=1.0)
    step = root.child("step", handler="h", operator="foreach", location="p.decomp:3", **fields)
    item = step.child("item", **fields)
    item.child("call", handler="h", location="p.decomp:3", facts={"kind": "prompt"}, **fields)
    item.child("model", handler="h", facts={"model": "m", "provider": "openai", "operation": "text_completion",
                                            "finish_reasons": [text]}, **fields)
    plan = step.child("plan", **fields)
    plan.child("and", **fields).child("item", **fields)
    step.child("iteration", **fields)
    step.child("retrieval", handler="h", **fields)
    root.child("if", location="p.decomp:9", **fields)
    root.child("decomposer-line", handler="h", location="<[d] step 1>:1", **fields)
    return root


@pytest.mark.parametrize("content", [False, True])
def test_every_kind_of_node_and_field_is_classified(content, receiver, monkeypatch):
    url, client = receiver
    experiment = client.create_experiment(f"kinds-{content}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"{EXPERIMENT_HEADER}={experiment}")
    with recording_relay(url) as (relay, received):
        export = otel.TraceExport.start(relay, mask=SecretMask({KEY: "OPENAI_API_KEY"}), content=content,
                                        resource={"decomp.program": "p.decomp"})
        export.row(_every_kind(), otel.row_attributes({"id": KEY, "index": 5, "score": 0.5}, "run"))
        assert export.close() is None
        spans = spans_of(client, experiment, 1)[0]
    sent = b"".join(received)
    assert KEY.encode() not in sent
    assert (MARKER.encode() in sent) is content and (MASKED.encode() in sent) is content
    names = sorted(s.name for s in spans)
    if not content:
        assert names == sorted(["row 5", "step 1 [h]", "item 1", "[h] prompt", "text_completion m", "plan 1", "and 1",
                                "item 1", "iteration 1", "retrieval 1 [h]", "if 1", "decomposer-line 1 [h]"])
        assert all("decomp.row.id" not in s.attributes and "decomp.label" not in s.attributes for s in spans)
        model = next(s for s in spans if s.name == "text_completion m")
        assert model.attributes["gen_ai.response.finish_reasons"] == ["other"]  # a server's own word: not sent


def test_span_names_without_content_are_structure_only():
    root = _every_kind()
    names = otel.span_names(root, 7)
    assert names[id(root)] == "row 7"
    assert sorted(names.values()) == sorted(["row 7", "step 1 [h]", "item 1", "[h] prompt", "text_completion m",
                                             "plan 1", "and 1", "item 1", "iteration 1", "retrieval 1 [h]", "if 1",
                                             "decomposer-line 1 [h]"])
    second = root.children[0].child("item", label=KEY)
    assert otel.span_names(root, 7)[id(second)] == "item 2"
    assert otel.span_names(root, 7, content=True)[id(second)] == f"item {KEY}"  # the export masks it
    assert otel.span_name(TraceNode("row", label=""), 4, content=True) == "row 4"
