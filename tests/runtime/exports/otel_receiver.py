"""A real OTLP receiver for the export tests: MLflow's tracking server (3.6 and later accept
OTLP/HTTP at /v1/traces), started on 127.0.0.1 with a SQLite store in the test's folder, its
telemetry and job runners off; spans are read back with MLflow's own client. `recording_relay`
stands in front of it and keeps every byte it was sent."""
from __future__ import annotations

import contextlib
import gzip
import os
import threading
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

#: The header that says which experiment OTLP spans go to (mlflow/tracing/utils/otlp.py).
EXPERIMENT_HEADER = "x-mlflow-experiment-id"
_QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
os.environ.update(_QUIET)  # the client in this process sends no telemetry either


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "OTEL_"))}
    return {**env, **_QUIET, "PYTHONUNBUFFERED": "1", "HOME": str(folder)}


def _wait_healthy(url: str, server: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the MLflow server exited ({server.returncode}) before it answered")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the MLflow server at {url} did not answer within {timeout} s")


def _stop(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=5)


@contextlib.contextmanager
def mlflow_receiver(folder: Path, timeout: float = 90.0):
    """Yields (base URL, MlflowClient): an MLflow server listening on 127.0.0.1."""
    folder.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{_free_port()}"
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", url.rsplit(":", 1)[1],
               "--workers", "1", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
               "--default-artifact-root", (folder / "artifacts").as_uri(), "--no-serve-artifacts"]
    log = open(folder / "mlflow-server.log", "wb")
    server = subprocess.Popen(command, cwd=folder, env=_env(folder), stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        _wait_healthy(url, server, timeout)
        from mlflow import MlflowClient
        client = MlflowClient(tracking_uri=url)
        _warm(url, client)
        yield url, client
    except BaseException:
        log.flush()
        sys.stderr.write((folder / "mlflow-server.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        _stop(server)
        log.close()


def _warm(url: str, client) -> None:
    """One span sent and read back: the server's first OTLP request loads its tracing code (seconds
    on a busy machine), which no test should count against an export's time limit."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    experiment = client.create_experiment("warm-up")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={EXPERIMENT_HEADER: experiment}, timeout=60)))
    provider.get_tracer("warm-up").start_span("warm-up").end()
    provider.shutdown()
    if not spans_of(client, experiment, 1):
        raise RuntimeError("the MLflow server kept no span of the warm-up trace")


def spans_of(client, experiment: str, traces: int, timeout: float = 30.0) -> list[list]:
    """The spans of each trace of `experiment`, once there are `traces` of them."""
    deadline = time.monotonic() + timeout
    while True:
        found = client.search_traces(locations=[experiment])
        if len(found) >= traces or time.monotonic() > deadline:
            return [client.get_trace(t.info.trace_id).data.spans for t in found]
        time.sleep(0.2)


@contextlib.contextmanager
def recording_relay(target: str):
    """Yields (URL, received): a server on 127.0.0.1 that passes each POST on to the same path
    and query at `target` (the MLflow server) and answers with its reply, keeping in `received`
    the bytes it was sent, request line and headers included (a gzip body unpacked)."""
    received: list[bytes] = []

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            head = f"{self.requestline}\r\n{self.headers}".encode("latin-1")
            unpacked = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
            received.append(head + unpacked)
            status, reply = _forward(target + self.path, body, self.headers)
            self.send_response(status)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def _forward(url: str, body: bytes, headers) -> tuple[int, bytes]:
    kept = {k: v for k, v in headers.items() if k.lower() in ("content-type", "content-encoding", EXPERIMENT_HEADER)}
    request = urllib.request.Request(url, data=body, headers=kept, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
