"""OpenTelemetry export (`decomp run --otlp`, `decomp trace export RUN --otlp`) received by a real
receiver, MLflow's tracking server on 127.0.0.1 (tests/runtime/exports/otel_receiver.py): one trace
per row with the stored tree's shape, GenAI attributes on model requests, errors as status and
exception events, no secret, text only on opt-in; a receiver that is down costs a bounded wait
and one warning. The real `OpenAIModel` against the mock server, with an API key it repeats."""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from decomp.runtime.cli import main
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.exports import otel
from decomp.runtime.storage.rundir import RunDir
from tests.runtime.exports.otel_receiver import EXPERIMENT_HEADER, mlflow_receiver, spans_of

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.usefixtures("clean_env")]

KEY = "sk-otel-secret-key-0123456789"
PROGRAM = '''\
handler split = regex(pattern="(\\\\w+)", all=true)
handler ask   = prompt(text="Q: What comes after {{question}}?\\nA:", max_tokens=16, temperature=0.5)
program after(question) {
  QS: [split] #question
  QS: (foreach) [ask] #1
  QS: [EOQ] #2
}
main after
'''
ROWS = '{"id": "one", "question": "a b"}\n{"id": "two", "question": "c"}\n{"id": "bad", "nothing": 1}\n'


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    with mlflow_receiver(tmp_path_factory.mktemp("mlflow")) as found:
        yield found


MOCK_SERVER = {"responder": lambda prompt, request: f"next, says {KEY}"}  # the `server` fixture (tests/conftest.py)


def _files(folder: Path) -> tuple[Path, Path]:
    (folder / "after.decomp").write_text(PROGRAM, encoding="utf-8")
    (folder / "rows.jsonl").write_text(ROWS, encoding="utf-8")
    return folder / "after.decomp", folder / "rows.jsonl"


def _run(folder: Path, server, monkeypatch, *extra, experiment: str | None = None, content: bool = False):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    if experiment is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"{EXPERIMENT_HEADER}={experiment}")
    monkeypatch.setenv(otel.CONTENT_ENV, "true" if content else "false")
    program, rows = _files(folder)
    return CliRunner().invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(folder / "run"),
                                     "--model", "openai:mock", "--base-url", server.base_url, "--cache", "off",
                                     *extra], catch_exceptions=False)


def _shape_of_spans(spans) -> list:
    children: dict = {}
    for span in spans:
        children.setdefault(span.parent_id, []).append(span)
    return [_canon(root, children) for root in children[None]]


def _canon(span, children) -> tuple:
    return (span.name, tuple(sorted(_canon(c, children) for c in children.get(span.span_id, []))))


def _shape_of_tree(root: TraceNode, index: int, content: bool = False) -> tuple:
    names = otel.span_names(root, index, content=content)

    def shape(node):
        return (names[id(node)], tuple(sorted(shape(c) for c in node.children)))
    return shape(root)


def _everything(spans) -> str:
    return json.dumps([{"name": s.name, "attributes": s.attributes, "status": str(s.status.description),
                        "events": [(e.name, e.attributes) for e in s.events]} for s in spans], default=str)


def test_a_run_sends_one_trace_per_row_with_the_stored_trees_shape(tmp_path, receiver, server, monkeypatch):
    url, client = receiver
    experiment = client.create_experiment("run")
    done = _run(tmp_path, server, monkeypatch, "--otlp", url, experiment=experiment)
    assert done.exit_code == 3, done.output  # the row "bad" has no question
    assert "warning" not in done.stderr
    traces = spans_of(client, experiment, 3)
    assert len(traces) == 3
    run = RunDir.open(tmp_path / "run")
    stored = sorted(_shape_of_tree(tree, index) for index, tree in run.traces())
    assert sorted(shape for spans in traces for shape in _shape_of_spans(spans)) == stored

    spans = [span for trace in traces for span in trace]
    roots = {s.name: s for s in spans if s.parent_id is None}  # named by index: an id is row text
    assert set(roots) == {"row 0", "row 1", "row 2"}
    assert not any("decomp.row.id" in s.attributes for s in spans)
    assert roots["row 0"].attributes["decomp.row.index"] == 0
    assert roots["row 0"].attributes["decomp.run"] == "run" and roots["row 0"].attributes["decomp.outcome"] == "ok"
    assert {s.name for s in spans if s.attributes.get("decomp.node.kind") == "item"} == {"item 1", "item 2"}
    model_spans = [s for s in spans if s.attributes.get("decomp.node.kind") == "model"]
    assert len(model_spans) == 3  # a, b, c
    request = model_spans[0].attributes
    assert model_spans[0].name == "text_completion mock"
    assert request["gen_ai.operation.name"] == "text_completion" and request["gen_ai.provider.name"] == "openai"
    assert request["gen_ai.request.model"] == "mock" and request["gen_ai.request.max_tokens"] == 16
    assert request["gen_ai.request.temperature"] == 0.5
    assert request["gen_ai.response.finish_reasons"] == ["stop"]
    assert request["gen_ai.usage.input_tokens"] > 0 and request["gen_ai.usage.output_tokens"] > 0
    call = next(s for s in spans if s.name == "[ask] prompt")
    assert call.attributes["code.filepath"].endswith("after.decomp") and call.attributes["code.lineno"] == 5
    assert call.attributes["decomp.handler"] == "ask" and call.attributes["decomp.handler.kind"] == "prompt"
    bad = roots["row 2"]
    assert str(bad.status.status_code).endswith("ERROR")
    withheld = "row error (its message is sent only with content capture on)"
    assert bad.status.description == withheld
    assert [(e.attributes["exception.type"], e.attributes["exception.message"]) for e in bad.events
            if e.name == "exception"] == [("decomp.row", withheld)]
    for span in spans:  # each span within its parent's time
        parent = next((p for p in spans if p.span_id == span.parent_id), None)
        if parent is not None:
            assert parent.start_time_ns <= span.start_time_ns and span.end_time_ns <= parent.end_time_ns + 1_000
    text = _everything(spans)
    assert KEY not in text
    assert "What comes after" not in text and "gen_ai.input.messages" not in text  # no content unless asked


def test_content_is_sent_only_on_opt_in_and_masked(tmp_path, receiver, server, monkeypatch):
    url, client = receiver
    experiment = client.create_experiment("content")
    done = _run(tmp_path, server, monkeypatch, "--otlp", url, experiment=experiment, content=True)
    assert done.exit_code == 3, done.output
    spans = [span for trace in spans_of(client, experiment, 3) for span in trace]
    request = next(s for s in spans if s.attributes.get("decomp.node.kind") == "model").attributes
    sent = request["gen_ai.input.messages"]  # MLflow reads a JSON text attribute back parsed
    assert sent[0]["role"] == "user" and "What comes after" in sent[0]["parts"][0]["content"]
    answer = request["gen_ai.output.messages"][0]
    assert answer["parts"][0]["content"] == "next, says [redacted: OPENAI_API_KEY]"
    assert answer["finish_reason"] == "stop"
    roots = {s.attributes["decomp.row.id"]: s for s in spans if s.parent_id is None}
    assert {name: s.name for name, s in roots.items()} == {"one": "row one", "two": "row two", "bad": "row bad"}
    assert {s.name for s in spans if s.attributes.get("decomp.node.kind") == "item"} == {"item a", "item b", "item c"}
    assert any("question" in e.attributes["exception.message"] for e in roots["bad"].events)
    assert KEY not in _everything(spans)


def test_trace_export_sends_a_finished_runs_trees(tmp_path, receiver, server, monkeypatch):
    url, client = receiver
    done = _run(tmp_path, server, monkeypatch)  # no export while it ran
    assert done.exit_code == 3, done.output
    experiment = client.create_experiment("later")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"{EXPERIMENT_HEADER}={experiment}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)  # the standard variable, no URL given
    sent = CliRunner().invoke(main, ["trace", "export", str(tmp_path / "run"), "--otlp"], catch_exceptions=False)
    assert sent.exit_code == 0, sent.output
    assert "3 row(s) sent as traces" in sent.stderr
    traces = spans_of(client, experiment, 3)
    stored = sorted(_shape_of_tree(tree, index) for index, tree in RunDir.open(tmp_path / "run").traces())
    assert sorted(shape for spans in traces for shape in _shape_of_spans(spans)) == stored
    assert KEY not in _everything([s for trace in traces for s in trace])


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


PASSWORD, QUERY_KEY = "pa55-otlp-word", "sk-query-otlp-0123"
CREDENTIALS = f"http://alice:{PASSWORD}@127.0.0.1:{{port}}/?token=T&key={QUERY_KEY}"
SHOWN = "http://***@127.0.0.1:{port}/v1/traces?token=***&key=***"


def test_a_receiver_that_is_down_costs_a_bounded_wait_and_one_warning(tmp_path, server, monkeypatch):
    port = _closed_port()
    started = time.monotonic()
    done = _run(tmp_path, server, monkeypatch, "--otlp", CREDENTIALS.format(port=port))
    took = time.monotonic() - started
    assert done.exit_code == 3, done.output
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: OTLP export")]
    assert took < otel.FLUSH_S  # found before the run (tests/runtime/exports/test_otel_refused.py times it)
    assert len(RunDir.open(tmp_path / "run").records()) == 3
    # said once, whole, the endpoint and the command to send the run later without the URL's credentials
    shown = SHOWN.format(port=port)
    given = CREDENTIALS.format(port=port).replace(f"alice:{PASSWORD}", "***").replace("=T&", "=***&") \
        .replace(QUERY_KEY, "***")
    assert warnings == [f"warning: OTLP export to {shown}: the receiver refused the connection, so this run sends "
                        f"no traces; they are kept in {tmp_path / 'run'}: send them when a receiver listens with: "
                        f"decomp trace export {tmp_path / 'run'} --otlp '{given}'"]
    for secret in (PASSWORD, QUERY_KEY, "token=T", "alice"):
        assert secret not in done.output and secret not in done.stderr


def test_a_question_run_to_a_receiver_that_is_down_shows_no_credential(tmp_path, server, monkeypatch):
    port = _closed_port()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    program, _ = _files(tmp_path)
    done = CliRunner().invoke(main, ["run", str(program), "-q", "a b", "--model", "openai:mock", "--base-url",
                                     server.base_url, "--cache", "off", "--otlp", CREDENTIALS.format(port=port)],
                              catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert f"warning: OTLP export to {SHOWN.format(port=port)}: " in done.stderr
    for secret in (PASSWORD, QUERY_KEY, "token=T", "alice"):
        assert secret not in done.output and secret not in done.stderr


def test_the_traces_path_is_joined_to_the_urls_path_before_its_query(tmp_path, receiver, server, monkeypatch):
    url, client = receiver
    experiment = client.create_experiment("joined")
    with_query = url.replace("http://", f"http://alice:{PASSWORD}@") + f"/?token=T&key={QUERY_KEY}"
    done = _run(tmp_path, server, monkeypatch, "--otlp", with_query, experiment=experiment)
    assert done.exit_code == 3, done.output
    assert "warning" not in done.stderr  # MLflow answered at /v1/traces: the query went after the path
    assert len(spans_of(client, experiment, 3)) == 3


@pytest.mark.parametrize(("given", "sent"), [
    ("http://h:4399/?token=T", "http://h:4399/v1/traces?token=T"),
    ("http://u:p@h:4399?token=T&x=1", "http://u:p@h:4399/v1/traces?token=T&x=1"),
    ("https://h/api/public/otel", "https://h/api/public/otel/v1/traces"),
    ("https://h/api/public/otel/", "https://h/api/public/otel/v1/traces"),
    ("http://h:4318/v1/traces?k=v", "http://h:4318/v1/traces?k=v"),
])
def test_traces_endpoint(given, sent, monkeypatch):
    assert otel.traces_endpoint(given) == sent
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", given)  # the standard base variable: joined alike
    assert otel.traces_endpoint(None) == sent
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:1/x?y=z")  # the signal's own: as given
    assert otel.traces_endpoint(None) == "http://t:1/x?y=z" and otel.traces_endpoint(given) == sent
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert otel.traces_endpoint(given) == given


def test_messages_quoting_the_endpoint_show_it_without_credentials():
    url = f"http://alice:{PASSWORD}@h:4399/v1/traces?token=T&key={QUERY_KEY}"
    said = (f"Invalid URL {url!r}; Max retries exceeded with url: /v1/traces?token=T&key={QUERY_KEY} "
            f"(auth alice:{PASSWORD})")
    assert otel.scrub_url(said, url) == ("Invalid URL 'http://***@h:4399/v1/traces?token=***&key=***'; Max retries "
                                         "exceeded with url: /v1/traces?token=***&key=*** (auth ***)")


def test_an_otlp_url_that_cannot_be_parsed_is_refused_before_the_run(tmp_path, monkeypatch):
    program, rows = _files(tmp_path)
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(tmp_path / "r"),
                                       "--otlp", f"http://alice:{PASSWORD}@[::1/?token=T"])
    assert result.exit_code == 1 and "is not a URL" in result.stderr and "Traceback" not in result.output
    assert PASSWORD not in result.output and PASSWORD not in result.stderr
    assert not (tmp_path / "r").exists()


def test_usage_errors_and_an_unknown_protocol(tmp_path, monkeypatch):
    folder = tmp_path / "nothing"
    result = CliRunner().invoke(main, ["trace", "export", str(folder)])
    assert result.exit_code == 2 and "give --jsonl [-o FILE] or --otlp [URL]" in result.output
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    program, rows = _files(tmp_path)
    result = CliRunner().invoke(main, ["run", str(program), "--input", str(rows), "--run-dir", str(tmp_path / "r"),
                                       "--otlp", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "unknown OTLP protocol 'carrier-pigeon'" in result.stderr
    assert not (tmp_path / "r").exists()  # refused before any run directory is made


def test_times_of_nodes_that_recorded_none_come_from_their_children_or_parent():
    root = TraceNode("row", label="r", started=100.0, seconds=5.0)
    step = root.child("step", label="QS: [a] x")
    step.child("call", handler="a", started=101.0, seconds=1.0)
    step.child("call", handler="b", started=102.5, seconds=0.5)
    lone = root.child("if")
    times = otel.span_times(root)
    assert times[id(step)] == (101.0, 103.0)
    assert times[id(lone)] == (100.0, 100.0)
    assert times[id(root)] == (100.0, 105.0)
    old = TraceNode("row", label="old")  # a trace written before nodes had start times
    call = old.child("call", handler="a", seconds=2.0)
    times = otel.span_times(old, fallback=50.0)
    assert times[id(call)] == (50.0, 52.0) and times[id(old)] == (50.0, 52.0)


def test_a_question_run_sends_its_one_row(tmp_path, receiver, server, monkeypatch):
    url, client = receiver
    experiment = client.create_experiment("question")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"{EXPERIMENT_HEADER}={experiment}")
    program, _ = _files(tmp_path)
    done = CliRunner().invoke(main, ["run", str(program), "-q", "a b", "--model", "openai:mock", "--base-url",
                                     server.base_url, "--cache", "off", "--otlp", url], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    spans = spans_of(client, experiment, 1)[0]
    assert sum(s.attributes.get("decomp.node.kind") == "model" for s in spans) == 2
    assert next(s for s in spans if s.parent_id is None).name == "row 0"
    assert KEY not in _everything(spans)


def test_an_export_gives_the_sdks_log_back_when_it_closes():
    """The SDK's loggers are the process's: an export takes their lines while it runs and gives
    them back on close, so exports one after another (a notebook) pile up no handlers."""
    import logging

    names = ("opentelemetry.exporter", "opentelemetry.sdk")
    before = {name: list(logging.getLogger(name).handlers) for name in names}
    exports = [otel.TraceExport.start("http://127.0.0.1:9/") for _ in range(3)]
    assert all(len(logging.getLogger(name).handlers) == len(before[name]) + 3 for name in names)
    for export in exports:
        export.close(timeout=0.5)
    for name in names:
        assert logging.getLogger(name).handlers == before[name]
        assert logging.getLogger(name).propagate
