"""OpenTelemetry export: each row's decomposition tree as one trace, in the GenAI semantic
conventions, sent over OTLP to a collector, Phoenix, Langfuse, MLflow, Jaeger or Tempo.

    export = TraceExport.start("http://127.0.0.1:4318", mask=session.secrets.mask)
    export.row(trace, row_attributes(record))     # a span per node, with the node's own times
    problem = export.close()                      # a bounded flush; what failed, once, or None

The endpoint is `--otlp URL` (`/v1/traces` joined to its path unless there) or the standard
variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT`, their `_HEADERS`
and `_PROTOCOL`). Spans go through the SDK's batch processor, on its own thread: a collector that
is down, slow or refusing never slows the run; at the end the flush waits `FLUSH_S` at most, and
the failures are said once, in decomp's words, the endpoint shown without its credentials
(`redact_url`). A receiver that refuses the connection is found before the run with one TCP
connection (`receiver_problem`, `PROBE_S` at most): said once, with the `decomp trace export`
command that sends the run later, and nothing is exported (no seconds of the SDK's retries).

What a span says is either program structure (kinds, handler names, operators, file:line,
positions, model names, outcomes, token counts) or content (anything a row, a model, a plan or a
user's function wrote: row ids, foreach items, queries, prompts, answers, error messages, which
may quote any of these). Content is sent, span names included, only when
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is true (`CONTENT_ATTRIBUTES`, `span_name`);
every text that is sent goes through the run's secret mask (`decomp.runtime.engine.run_secrets`)
first.

Needs the `otel` extra (opentelemetry-sdk and its OTLP/HTTP exporter; gRPC with
opentelemetry-exporter-otlp-proto-grpc).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import socket
import threading
import warnings
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

from decomp.dsl.errors import DecompError
from decomp.dsl.redact import MASK, redact_url, url_secrets
from decomp.dsl.values import storable_json
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.manifest import parsed_time
from decomp.runtime.version import decomp_version

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
TRACES_PATH = "/v1/traces"
#: Span attributes that hold content (what a row, a model or a user's code wrote), sent only with
#: content capture on; every other attribute is program structure.
CONTENT_ATTRIBUTES = frozenset({"decomp.row.id", "decomp.label", "decomp.query", "decomp.answer",
                                "gen_ai.input.messages", "gen_ai.output.messages", "exception.stacktrace"})
#: The finish reasons the GenAI conventions name (the OpenAI API's and llama.cpp's words); any other
#: a server wrote could say anything, and goes as "other" with content capture off.
FINISH_REASONS = frozenset({"stop", "length", "content_filter", "tool_call", "tool_calls", "function_call", "error"})
PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
#: The longest the end of a run waits for spans still queued to be sent.
FLUSH_S = 10.0
#: One export request may take this long, the exporter's own retries included (the SDK's default).
EXPORT_TIMEOUT_S = 10.0
#: The longest `receiver_problem` waits for the receiver to take a TCP connection.
PROBE_S = 0.5
#: The SDK's endpoints when none is given, by protocol.
DEFAULT_ENDPOINTS = {"http/protobuf": "http://localhost:4318/v1/traces", "grpc": "http://localhost:4317"}
_INSTALL = "pip install 'decomp-lang[otel]'"


def wanted(url: str | None) -> bool:
    """Whether to export: `--otlp` was given (URL, or "" for the environment's), or the
    environment names an endpoint."""
    return url is not None or any(os.environ.get(name) for name in ENDPOINT_ENVS)


def content_wanted() -> bool:
    """Whether the user opted in to prompt and answer text in spans (the GenAI conventions' variable)."""
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


class TraceExport:
    """A tracer provider exporting over OTLP, and the writing of trees as spans."""

    def __init__(self, provider, reporter: "_Reporting", mask: Callable[[str], str], content: bool):
        self.provider, self.reporter, self.mask, self.content = provider, reporter, mask, content
        self.tracer = provider.get_tracer("decomp", decomp_version())
        self.spans = 0

    @classmethod
    def start(cls, url: str | None = None, *, mask: Callable[[str], str] = lambda text: text,
              resource: dict[str, Any] | None = None, content: bool | None = None) -> "TraceExport":
        """An export to `url` ("" or None: the environment's endpoint, `traces_endpoint`).
        Raises `DecompError` when the SDK is not installed, the protocol is unknown or the URL
        cannot be parsed."""
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            raise DecompError(f"--otlp needs the OpenTelemetry SDK: {_INSTALL}") from None
        endpoint = traces_endpoint(url)
        reporter = _Reporting(_exporter(endpoint), endpoint)
        reporter.listen()  # failures are said once, by close()
        attributes = {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "decomp", **(resource or {})}
        attributes = {k: mask(v) if isinstance(v, str) else v for k, v in attributes.items()}
        provider = TracerProvider(resource=Resource.create(attributes))
        provider.add_span_processor(BatchSpanProcessor(reporter, export_timeout_millis=int(EXPORT_TIMEOUT_S * 1000)))
        return cls(provider, reporter, mask, content_wanted() if content is None else content)

    def row(self, root: TraceNode, attributes: dict[str, Any] | None = None, *, fallback: float | None = None) -> None:
        """Send the tree `root` (a row's) as one trace; `attributes` (`row_attributes`) go on its
        root, whose name has the row's index (`decomp.row.index`). Nodes that recorded no start
        time take their first child's, else their parent's (`fallback`, else now, for the root)."""
        from opentelemetry import trace as api

        times = span_times(root, fallback)
        names = span_names(root, (attributes or {}).get("decomp.row.index", 0), content=self.content)
        stack: list[tuple[TraceNode, Any]] = [(root, None)]
        while stack:
            node, parent = stack.pop()
            start, end = times[id(node)]
            extra = attributes if node is root else None
            span = self.tracer.start_span(self.mask(names[id(node)]), attributes=self.attributes(node, extra),
                                          context=api.set_span_in_context(parent) if parent else None,
                                          start_time=_ns(start))
            if node.error is not None:
                self._error(span, node, end)
            stack += [(child, span) for child in reversed(node.children)]
            span.end(end_time=_ns(end))
            self.spans += 1

    def _error(self, span, node: TraceNode, end: float) -> None:
        """The status and `exception` event of a node that ended in an error: its message only
        with content capture on (it may quote a row, an answer or a query), else what failed."""
        from opentelemetry.trace import Status, StatusCode

        message = self.mask(node.error or "") if self.content else withheld_error(node)
        span.set_status(Status(StatusCode.ERROR, message))
        event = {"exception.type": "decomp." + node.kind, "exception.message": message}
        if self.content and node.details:
            event["exception.stacktrace"] = self.mask(node.details)
        span.add_event("exception", event, timestamp=_ns(end))

    def attributes(self, node: TraceNode, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """A node's span attributes: what it is, where it was written, its outcome; for a model
        request the GenAI conventions'; content (`CONTENT_ATTRIBUTES`, from `extra` too) only with
        content capture on. Every text masked."""
        out: dict[str, Any] = {"decomp.node.kind": node.kind, "decomp.outcome": outcome(node)}
        _put(out, "decomp.handler", node.handler)
        _put(out, "decomp.operator", node.operator)
        if node.location:
            path, _, line = node.location.rpartition(":")
            out["code.filepath"] = path or node.location
            if line.isdigit():
                out["code.lineno"] = int(line)
        facts = node.facts or {}
        _put(out, "decomp.handler.kind", facts.get("kind") if node.kind == "call" else None)
        if node.cache_hit:
            out["decomp.cache_hit"] = True
        if node.queued:  # of the span's time, the part it waited for a slot
            out["decomp.queue_seconds"] = round(node.queued, 6)
        if node.kind == "model":
            out.update(_genai(node, facts, self.content))
        if self.content:
            out.update(self._content(node))
        out.update(extra or {})
        return {k: self._masked(v) for k, v in out.items() if self.content or k not in CONTENT_ATTRIBUTES}

    def _masked(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, (list, tuple)):
            return [self.mask(v) if isinstance(v, str) else v for v in value]
        return value

    def _content(self, node: TraceNode) -> dict[str, Any]:
        if node.kind == "model":
            reasons = (node.facts or {}).get("finish_reasons") or []
            output = {"role": "assistant", "parts": [{"type": "text", "content": node.raw_output or ""}]}
            if reasons:
                output["finish_reason"] = reasons[0]
            return {"gen_ai.input.messages": storable_json([{"role": "user", "parts": [
                        {"type": "text", "content": node.prompt or ""}]}]),
                    "gen_ai.output.messages": storable_json([output])}
        found: dict[str, Any] = {}
        _put(found, "decomp.label", node.label or None)
        _put(found, "decomp.query", node.query)
        if node.answer is not None:
            found["decomp.answer"] = node.answer if isinstance(node.answer, str) else storable_json(node.answer)
        return found

    def close(self, timeout: float = FLUSH_S) -> str | None:
        """Flush what is queued (waiting `timeout` seconds at most) and stop; what failed, in
        one sentence, or None."""
        done = threading.Event()

        def stop():
            try:
                self.provider.force_flush(int(timeout * 1000))
                self.provider.shutdown()
            finally:
                done.set()
        threading.Thread(target=stop, name="decomp-otlp-close", daemon=True).start()
        finished = done.wait(timeout + 1.0)
        self.reporter.deafen()
        return self.reporter.problem(self.spans, finished, timeout)


class RunExport:
    """A dataset run's export, in a process of its own (`decomp.runtime.exports.otel_sender`): as a
    row ends this process only passes its index, id and score down a pipe, from a thread, never
    waiting; the sender reads the row's tree from the run directory (as `decomp trace export`
    does), turns it into spans and sends them. So the run pays nothing for the spans, and a
    receiver that is down or slow costs it nothing until the end, where `close` waits for the
    sender's flush `FLUSH_S` at most and warns what failed, once."""

    def __init__(self, process, queue, again: str = "decomp trace export RUN --otlp"):
        self.process, self.queue, self.again = process, queue, again
        self.thread = threading.Thread(target=self._feed, name="decomp-otlp-feed", daemon=True)
        self.thread.start()
        self.broken: str | None = None

    @classmethod
    def open(cls, url: str | None, run_dir, problem: str | None = None) -> "RunExport | None":
        """The export of the run in `run_dir` (`start`), or, when the receiver was found unusable
        before the run (`problem`, from `receiver_problem`), None and one warning that says so and
        how to send the run later: its traces are kept in `run_dir` as always."""
        if problem is None:
            return cls.start(url, run_dir)
        warnings.warn(not_sent(url, problem, run_dir), stacklevel=2)
        return None

    @classmethod
    def start(cls, url: str | None, run_dir) -> "RunExport":
        """Start the sender for the run in `run_dir` (after `check`: what the sender needs is
        there). The endpoint goes to it in its environment."""
        import queue
        import subprocess
        import sys
        env = dict(os.environ)
        if url:  # by the environment, not the command line, where others could read a credential in it
            env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = traces_endpoint(url)
        command = [sys.executable, "-m", "decomp.runtime.exports.otel_sender", str(run_dir)]
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True, encoding="utf-8", env=env)
        again = shlex.join(["decomp", "trace", "export", str(run_dir), "--otlp", *([redact_url(url)] if url else [])])
        return cls(process, queue.SimpleQueue(), again)

    def row(self, record: dict) -> None:
        """Row `record` ended (its tree is stored): queued for the sender."""
        self.queue.put({k: record.get(k) for k in ("index", "id", "score")})

    def _feed(self) -> None:
        while (item := self.queue.get()) is not None:
            try:
                self.process.stdin.write(storable_json(item, default=str) + "\n")
                self.process.stdin.flush()
            except (OSError, ValueError):  # the sender died: the rows are in the run directory
                self.broken = "the OTLP sender stopped early"
                return
        self.process.stdin.close()

    def close(self) -> str | None:
        """Let the sender finish (`FLUSH_S` for its flush, beyond the rows it has yet to send)
        and say what failed, once, as a warning; returns it."""
        import subprocess
        self.queue.put(None)
        self.thread.join(FLUSH_S)
        if not self.thread.is_alive():
            self.process.stdin = None  # closed by the feed: `communicate` must not flush it
        try:
            out, _ = self.process.communicate(timeout=FLUSH_S + 5.0)
            report = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
            problem = report.get("problem") or (self.broken or (None if self.process.returncode == 0 else
                                                "the OTLP sender failed"))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            problem = f"OTLP export: traces still unsent after {FLUSH_S:g} s were dropped; the run itself is complete"
        except ValueError:
            problem = "the OTLP sender said something unreadable"
        if problem:
            said = problem if problem.startswith("OTLP") else f"OTLP export: {problem}; the run itself is complete"
            warnings.warn(f"{said} (send its traces again with: {self.again})", stacklevel=2)
        return problem


def check(url: str | None) -> None:
    """Raise `DecompError` now when an export to `url` could not start (the SDK or its exporter
    missing, an unknown protocol, a URL that cannot be parsed): the checks the sender would make,
    said before a run begins."""
    _exporter(traces_endpoint(url))


def receiver_problem(url: str | None, timeout: float = PROBE_S) -> str | None:
    """Why nothing could be sent to the receiver of `url` ("" or None: the environment's), found
    with one TCP connection to its host and port, `timeout` seconds at most: it refused the
    connection, its host has no address, its network cannot be reached. None when it took the
    connection, or did not answer in time (a slow network: the export goes on, and what it
    could not send is said at the end). The SDK's exporter would instead retry for seconds."""
    return _unreachable(traces_endpoint(url), timeout)


def _unreachable(endpoint: str | None, timeout: float = PROBE_S) -> str | None:
    host, port = _address(endpoint)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except ConnectionRefusedError:
        return "the receiver refused the connection"
    except socket.gaierror:
        return f"its host {host} has no address"
    except TimeoutError:
        return None
    except OSError as err:
        return f"it cannot be reached ({err.strerror or type(err).__name__})"


def _address(endpoint: str | None) -> tuple[str, int]:
    """The host and port an export to `endpoint` connects to (a gRPC endpoint may lack the scheme)."""
    url = endpoint or DEFAULT_ENDPOINTS.get(_protocol(), DEFAULT_ENDPOINTS["http/protobuf"])
    parts = urlsplit(url if "//" in url else "//" + url)
    default = 443 if parts.scheme == "https" else 4317 if _protocol() == "grpc" else 80
    return parts.hostname or "localhost", parts.port or default


def not_sent(url: str | None, problem: str, run_dir=None) -> str:
    """The one line that says a run's traces are not sent, because of `problem` (from
    `receiver_problem`), and how to send them later: `decomp trace export RUN --otlp URL` for a
    dataset run (`run_dir`), whose traces stay in its run directory as always."""
    endpoint = traces_endpoint(url)
    to = f" to {redact_url(endpoint)}" if endpoint else ""
    if run_dir is None:
        return (f"OTLP export{to}: {problem}, so the question's trace is not sent (--trace-out FILE keeps "
                "its tree)")
    command = ["decomp", "trace", "export", str(run_dir), "--otlp", *([redact_url(url)] if url else [])]
    return (f"OTLP export{to}: {problem}, so this run sends no traces; they are kept in {run_dir}: send them "
            f"when a receiver listens with: {shlex.join(command)}")


def row_attributes(record: dict, run_name: str = "") -> dict[str, Any]:
    """The root span's attributes of a row: its id (content: sent only with content capture on),
    position, run, and score when it has one."""
    found: dict[str, Any] = {"decomp.row.id": str(record.get("id", "")), "decomp.row.index": record.get("index", -1)}
    if run_name:
        found["decomp.run"] = run_name
    score = record.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        found["decomp.row.score"] = float(score)
    return found


def export_run(run, url: str | None) -> tuple[int, str | None]:
    """Send a finished run's stored trees (`decomp trace export RUN --otlp`), each row one trace;
    texts are masked for the secrets the environment holds (`environment_mask`). Returns how
    many rows were sent and what failed (or None). A receiver that refuses the connection (or
    cannot be reached, `receiver_problem`) is a `DecompError` at once: nothing is sent."""
    check(url)
    problem = receiver_problem(url)
    if problem is not None:
        endpoint = traces_endpoint(url)
        raise DecompError(f"OTLP export{f' to {redact_url(endpoint)}' if endpoint else ''}: {problem}; nothing "
                          "was sent")
    started = _session_start(run.manifest)
    export = TraceExport.start(url, mask=environment_mask(), resource={"decomp.program": run.program_path or ""})
    count = 0
    try:
        for record in run.records():
            tree = run.trace(record["index"])
            if tree is not None:
                export.row(tree, row_attributes(record, run.path.name), fallback=started)
                count += 1
    finally:
        problem = export.close()
    return count, problem


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)


def environment_mask() -> Callable[[str], str]:
    """A mask of the values of this process's secret-looking environment variables (API keys,
    tokens, passwords, OTLP headers), for texts written before this process knew them."""
    from decomp.dsl.redact import SecretMask
    secrets = {value: name for name, value in os.environ.items() if _SECRET_NAME.search(name) and value}
    return SecretMask(secrets)


def _session_start(manifest: dict) -> float | None:
    sessions = manifest.get("sessions") if isinstance(manifest, dict) else None
    first = sessions[0] if isinstance(sessions, list) and sessions and isinstance(sessions[0], dict) else {}
    return parsed_time(first.get("started"))


# ------------------------------------------------------------------ the tree as spans
def span_names(root: TraceNode, index: int = 0, *, content: bool = False) -> dict[int, str]:
    """The span name of each node of the tree `root` (row `index`), by `id(node)` (`span_name`,
    each node's position counted among its parent's children of its kind, from 1)."""
    names = {id(root): span_name(root, index, content=content)}
    stack = [root]
    while stack:
        node = stack.pop()
        seen: dict[str, int] = {}
        for child in node.children:
            seen[child.kind] = seen.get(child.kind, 0) + 1
            names[id(child)] = span_name(child, seen[child.kind], content=content)
            stack.append(child)
    return names


def span_name(node: TraceNode, position: int = 1, *, content: bool = False) -> str:
    """A span's name: `{gen_ai.operation.name} {gen_ai.request.model}` for a model request,
    `[handler] kind` for a handler call; else the node's kind and `position` (a row's index; a
    foreach item's, step's or turn's place among its kind, from 1), and its handler: `row 3`,
    `item 2`, `step 1 [ask]`. With `content` on, a node's label instead of its position: `row
    ID`, `item TEXT` (the caller masks it)."""
    facts = node.facts or {}
    if node.kind == "model":
        return f"{facts.get('operation') or 'text_completion'} {facts.get('model') or 'model'}"
    if node.kind == "call":
        return f"[{node.handler}] {facts.get('kind') or 'call'}"
    if content and node.kind == "row":
        return f"row {node.label or position}"
    if content and (node.label or node.handler):
        label = (node.label or node.handler or "").replace("\n", " ")
        return f"{node.kind} {label[:80]}"
    return f"{node.kind} {position}" + (f" [{node.handler}]" if node.handler else "")


def withheld_error(node: TraceNode) -> str:
    """An error said by what failed, never its text (which may quote a row, a query or an
    answer): the status and `exception.message` of a span with content capture off."""
    where = f" in [{node.handler}]" if node.handler else ""
    return f"{node.kind} error{where} (its message is sent only with content capture on)"


def outcome(node: TraceNode) -> str:
    """`ok`, `failed` (answered, but not ok), `skipped` (never ran) or `error`."""
    return "error" if node.error is not None else "skipped" if node.skipped else "failed" if node.failed else "ok"


def span_times(root: TraceNode, fallback: float | None = None) -> dict[int, tuple[float, float]]:
    """Each node's (start, end), in seconds since the epoch: its own start and duration when
    recorded; else the start from its children (the first) or its parent, and the end from its
    duration or its children (the last)."""
    import time

    order: list[tuple[TraceNode, TraceNode | None]] = []
    stack: list[tuple[TraceNode, TraceNode | None]] = [(root, None)]
    while stack:  # parents before children
        node, parent = stack.pop()
        order.append((node, parent))
        stack += [(child, node) for child in node.children]
    own: dict[int, tuple[float | None, float | None]] = {}
    for node, _ in reversed(order):  # children before parents
        starts = [own[id(c)][0] for c in node.children if own[id(c)][0] is not None]
        ends = [own[id(c)][1] for c in node.children if own[id(c)][1] is not None]
        start = node.started if node.started is not None else min(starts, default=None)
        end = start + node.seconds if node.started is not None and node.seconds is not None else max(ends, default=None)
        own[id(node)] = (start, end)
    starts: dict[int, float] = {}
    for node, parent in order:  # top down: a start from the parent where none was recorded
        start = own[id(node)][0]
        if start is None:
            start = starts[id(parent)] if parent is not None else fallback if fallback is not None else time.time()
        starts[id(node)] = start
    times: dict[int, tuple[float, float]] = {}
    for node, _ in reversed(order):  # bottom up: an end from the duration, else the last child's
        start, end = starts[id(node)], own[id(node)][1]
        if end is None:
            end = start + node.seconds if node.seconds is not None else \
                max((times[id(c)][1] for c in node.children), default=start)
        times[id(node)] = (start, max(end, start))
    return times


def _genai(node: TraceNode, facts: dict, content: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"gen_ai.operation.name": facts.get("operation") or "text_completion"}
    _put(out, "gen_ai.provider.name", facts.get("provider"))
    _put(out, "gen_ai.request.model", facts.get("model"))
    _put(out, "gen_ai.request.temperature", facts.get("temperature"))
    _put(out, "gen_ai.request.max_tokens", facts.get("max_tokens"))
    if facts.get("finish_reasons"):
        out["gen_ai.response.finish_reasons"] = [r if content or r in FINISH_REASONS else "other"
                                                 for r in facts["finish_reasons"]]
    if not node.cache_hit:
        out["gen_ai.usage.input_tokens"] = node.prompt_tokens
        out["gen_ai.usage.output_tokens"] = node.completion_tokens
    return out


def _put(out: dict, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


# ------------------------------------------------------------------ the exporter
def _protocol() -> str:
    return next((os.environ[n] for n in PROTOCOL_ENVS if os.environ.get(n)), "http/protobuf").strip()


def traces_endpoint(url: str | None) -> str | None:
    """Where spans go: `url` (`--otlp`), else `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as given,
    else `$OTEL_EXPORTER_OTLP_ENDPOINT`; a base URL with `/v1/traces` joined to its path (OTLP/HTTP
    only). None: the SDK's default. `DecompError` for a URL that cannot be parsed."""
    traces, base = (os.environ.get(name) for name in ENDPOINT_ENVS)
    if url or not traces:
        url = url or base
        return _traces_endpoint(url, _protocol()) if url else None
    return traces


def _exporter(endpoint: str | None):
    """The OTLP span exporter for `endpoint` (None: the SDK's default)."""
    protocol = _protocol()
    kwargs = {"timeout": EXPORT_TIMEOUT_S, **({"endpoint": endpoint} if endpoint else {})}
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise DecompError("OTLP over gRPC needs: pip install opentelemetry-exporter-otlp-proto-grpc") from None
        return OTLPSpanExporter(**kwargs)
    if protocol != "http/protobuf":
        raise DecompError(f"unknown OTLP protocol {protocol!r}", expected="http/protobuf or grpc")
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise DecompError(f"--otlp needs the OTLP exporter: {_INSTALL}") from None
    return OTLPSpanExporter(**kwargs)


def _traces_endpoint(url: str, protocol: str) -> str:
    """`url` as the traces endpoint: OTLP/HTTP's `/v1/traces` joined to a collector URL's path,
    its query kept after it (`http://h:4318/otel?k=v` -> `http://h:4318/otel/v1/traces?k=v`)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise DecompError(f"the OTLP endpoint {redact_url(url)} is not a URL",
                          expected="http://HOST:PORT[/PATH]") from None
    path = parts.path.rstrip("/")
    if protocol == "grpc" or path.endswith(TRACES_PATH):
        return url
    return urlunsplit(parts._replace(path=path + TRACES_PATH))


def scrub_url(text: str, url: str | None) -> str:
    """`text` (a message that may quote `url`, whole or as the path and query it asked for) with
    the URL's credentials masked as `redact_url` masks them, and any of them found elsewhere
    (`url_secrets`) as `***`."""
    if not url or not text:
        return text
    quoted = [url]
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        quoted.append(urlunsplit(("", "", parts.path, parts.query, "")))
    for whole in quoted:
        text = text.replace(whole, redact_url(whole) or "")
    for secret in sorted(url_secrets(url), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


#: How the SDK's log lines say why a batch was not sent, and what decomp says instead.
_SDK_WORDS = [
    (re.compile(r"code: (\d{3}), reason: (.*)", re.I), lambda m: f"the receiver answered HTTP {m[1]}: {m[2]}"),
    (re.compile(r"connection refused|ConnectionRefusedError|Failed to establish a new connection", re.I),
     lambda m: "the receiver refused the connection"),
    (re.compile(r"timed? ?out|Timeout", re.I), lambda m: "the receiver did not answer in time"),
    (re.compile(r"Transient error (.*) encountered while exporting", re.I), lambda m: m[1]),
]
#: The most characters of the SDK's own words a warning quotes.
_SDK_CHARS = 200


def sdk_problem(said: str) -> str:
    """Why the SDK could not send a batch, from its log line or error (`said`, already masked):
    in decomp's words when known, else its own, shortened at a word (never cut mid-word)."""
    for pattern, words in _SDK_WORDS:
        found = pattern.search(said)
        if found:
            said = words(found)
            break
    said = said.strip().rstrip(".")
    if len(said) <= _SDK_CHARS:
        return said
    return said[:_SDK_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def _sdk_loggers() -> list[logging.Logger]:
    return [logging.getLogger(name) for name in ("opentelemetry.exporter", "opentelemetry.sdk")]


class _Reporting(logging.Handler):
    """The exporter, counting what it could not send (said once, at the end, never raised); also
    the handler of the SDK's log, whose first error says why (in decomp's words, `sdk_problem`).
    Before each batch one TCP connection checks the receiver: one that has gone away (refused)
    fails the batch at once instead of the SDK's retries for seconds."""

    def __init__(self, inner, endpoint: str | None = None):
        super().__init__(logging.WARNING)
        self.inner, self.endpoint = inner, endpoint
        self.failed_spans = 0
        self.first_problem: str | None = None
        self.logged: str | None = None

    def listen(self) -> None:
        """Take the SDK's log while the export runs (its lines would otherwise go to stderr)."""
        for logger in _sdk_loggers():
            logger.propagate = False
            logger.addHandler(self)

    def deafen(self) -> None:
        """Give the SDK's log back as it was once no export listens to it any more."""
        for logger in _sdk_loggers():
            logger.removeHandler(self)
            if not any(isinstance(handler, _Reporting) for handler in logger.handlers):
                logger.propagate = True

    def emit(self, record: logging.LogRecord) -> None:
        if self.logged is None:  # in decomp's words, masked before it is shortened: never half a credential
            self.logged = sdk_problem(scrub_url(" ".join(record.getMessage().split()), self.endpoint))

    def export(self, spans: Sequence) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult
        gone = _unreachable(self.endpoint)  # one connection: a receiver that died costs no seconds of retries
        if gone is not None:
            self.failed_spans += len(spans)
            self.first_problem = self.first_problem or gone
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception as err:  # the exporter's own bug or a refused connection: counted, never raised
            result = SpanExportResult.FAILURE
            self.first_problem = self.first_problem or sdk_problem(scrub_url(f"{type(err).__name__}: {err}",
                                                                             self.endpoint))
        if result is not SpanExportResult.SUCCESS:
            self.failed_spans += len(spans)
            self.first_problem = self.first_problem or "the receiver refused or did not answer"
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def problem(self, spans: int, finished: bool, timeout: float) -> str | None:
        to = f" to {redact_url(self.endpoint)}" if self.endpoint else ""  # never its credentials
        if self.failed_spans:
            why = self.logged or self.first_problem
            return (f"OTLP export{to}: {self.failed_spans:,} of {spans:,} spans could not be sent "
                    f"({why}); the run itself is complete")
        if not finished:
            return f"OTLP export{to}: spans still queued after {timeout:g} s were dropped; the run itself is complete"
        return None
