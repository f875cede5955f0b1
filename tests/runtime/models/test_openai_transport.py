"""The two transports of `OpenAIModel` (runtime/models/openai_transport.py): `aiohttp`, the lean
default, and `openai`, the official client. Each test runs on both, so the lean one is held to
what the openai-client path does: the same bytes and headers on the wire, the same pooled
connection, proxies from the environment, the same failures and words for dropped connections,
replies that are not HTTP and TLS to a plain server, and the same answers under injected faults
through the scheduler's retries. test_openai_backend.py and test_openai_slots.py run the rest
(round trips, score, every fault of the mock server, the key never leaking, slot release) on
both too."""
from __future__ import annotations

import asyncio
import base64
import gc
import json
import socket
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.models.base import ModelError, ModelSettings, Request, TransientModelError
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.mock_server import MockOpenAIServer

KEY = "sk-test-CANARY-77e0c3a1"
REPLY = {"id": "x", "object": "text_completion", "usage": {"prompt_tokens": 1, "completion_tokens": 1},
         "choices": [{"index": 0, "text": "fine", "message": {"role": "assistant", "content": "fine"}}]}


# `transport` and `clean_env`: tests/conftest.py
pytestmark = pytest.mark.usefixtures("clean_env")


def make(base_url: str, transport: str = "auto", api: str = "completions", timeout: float = 10.0) -> OpenAIModel:
    return OpenAIModel("m", ModelSettings(base_url=base_url, api=api, timeout=timeout, transport=transport))


def ask(model: OpenAIModel, *prompts: str) -> list:
    """Each prompt's completion (or the error it raised), one after another, then close."""
    async def go():
        out = []
        try:
            for prompt in prompts:
                try:
                    out.append(await model.complete(Request(prompt, max_tokens=5)))
                except ModelError as err:
                    out.append(err)
        finally:
            await model.aclose()
        return out
    return asyncio.run(go())


class Capture(ThreadingHTTPServer):
    """Records every request (request line, headers, body) and the connections it accepted;
    answers each with one completion."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _CaptureHandler)
        self.requests: list[dict] = []
        self.connections = 0
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class _CaptureHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Capture

    def setup(self):
        super().setup()
        self.server.connections += 1

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.requests.append({"line": f"{self.command} {self.path}", "headers": dict(self.headers.items()),
                                     "body": body})
        reply = json.dumps(REPLY).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


def raw_server(reply: bytes, heads: list | None = None) -> tuple[socket.socket, str]:
    """A socket that reads each request's head (into `heads`), sends `reply` (nothing: just
    closes) and closes."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                        data += chunk
                    if heads is not None:
                        heads.append(data.decode(errors="replace"))
                    conn.sendall(reply)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


# --- choosing the transport ----------------------------------------------------------------------

def test_aiohttp_is_the_default_and_openai_can_be_chosen():
    url = "http://127.0.0.1:9/v1"
    assert make(url).transport == "aiohttp"
    assert make(url, "aiohttp").transport == "aiohttp"
    assert make(url, "openai").transport == "openai"
    assert "transport='openai'" in repr(make(url, "openai"))
    with pytest.raises(ModelError, match=r"openai:m: transport must be one of auto, aiohttp, openai, not 'curl'"):
        make(url, "curl")


# --- the wire ------------------------------------------------------------------------------------

@pytest.mark.network
def test_both_transports_send_the_same_bytes_and_headers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-2")
    sent = {}
    for transport in ("aiohttp", "openai"):
        with Capture() as server:
            for api in ("completions", "chat"):
                model = make(server.url + "/v1", transport, api=api)
                out = ask(model, 'Q: "naïve" café?\nA:')[0]
                assert out.text == "fine" and (out.prompt_tokens, out.completion_tokens) == (1, 1)
            sent[transport] = server.requests
    for lean, client in zip(sent["aiohttp"], sent["openai"]):
        assert lean["line"] == client["line"]
        assert lean["body"] == client["body"]  # the same JSON, byte for byte (compact, UTF-8)
        for request in (lean, client):
            headers = {k.lower(): v for k, v in request["headers"].items()}
            assert headers["authorization"] == f"Bearer {KEY}"
            assert headers["content-type"] == "application/json"
            assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj-2")
    assert [r["line"] for r in sent["aiohttp"]] == ["POST /v1/completions", "POST /v1/chat/completions"]
    assert json.loads(sent["aiohttp"][1]["body"]) == {
        "model": "m", "n": 1, "temperature": 0.0, "messages": [{"role": "user", "content": 'Q: "naïve" café?\nA:'}],
        "max_tokens": 5}


@pytest.mark.network
def test_one_connection_serves_calls_in_turn(transport):
    with Capture() as server:
        outs = ask(make(server.url + "/v1", transport), *(f"q{i}" for i in range(10)))
        assert [o.text for o in outs] == ["fine"] * 10
        assert len(server.requests) == 10 and server.connections == 1


@pytest.mark.network
def test_the_session_is_closed_with_the_model(transport):
    with Capture() as server:
        model = make(server.url + "/v1", transport)

        async def go():
            await model.complete(Request("a"))
            client = model._transport.client
            await model.aclose()
            return client

        client = asyncio.run(go())
    closed = client.is_closed() if transport == "openai" else client.closed
    assert closed and model._transport.client is None


@pytest.mark.network
@pytest.mark.parametrize("first_loop_ends", ["asyncio.run", "closed by hand", "left idle"])
def test_the_client_of_an_earlier_event_loop_is_closed(transport, first_loop_ends):
    """A model used on one event loop and then on another (two `asyncio.run`s, as
    `Session.run_sync` does): the first loop's client is closed (at that loop's end, or, when
    the loop was closed without shutting down its async generators or left idle, once the
    model is used again), aclose() on a third loop closes the second's, and nothing is left
    to warn about unclosed sessions, connectors or sockets."""
    with Capture() as server:
        model = make(server.url + "/v1", transport)
        clients = []

        async def use():
            assert (await model.complete(Request("a"))).text == "fine"
            clients.append(model._transport.client)

        def is_closed(client) -> bool:
            return client.is_closed() if transport == "openai" else client.closed

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = asyncio.new_event_loop()
            try:
                if first_loop_ends == "asyncio.run":
                    first.close()
                    asyncio.run(use())
                else:
                    first.run_until_complete(use())
                    if first_loop_ends == "closed by hand":
                        first.close()  # no shutdown_asyncgens: the client outlives its loop
                asyncio.run(use())
                closed_by_then = is_closed(clients[0])
                asyncio.run(model.aclose())
            finally:
                first.close()
            closed = [is_closed(client) for client in clients]
            del clients[:]
            gc.collect()
        assert closed_by_then and closed == [True, True] and model._transport.client is None
        unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert not unclosed, unclosed
        assert len(server.requests) == 2


@pytest.mark.network
def test_a_proxy_from_the_environment_is_used(monkeypatch, transport):
    with Capture() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        outs = ask(make("http://api.example.invalid/v1", transport), "via the proxy")
        assert outs[0].text == "fine"
        assert proxy.requests[0]["line"] == "POST http://api.example.invalid/v1/completions"
        assert "Proxy-Authorization" not in proxy.requests[0]["headers"]


@pytest.mark.network
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the openai client's proxy_auth
def test_a_proxy_password_goes_in_its_header(monkeypatch, transport):
    with Capture() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("http://", "http://ann:p%40ss@"))
        assert ask(make("http://api.example.invalid/v1", transport), "via the proxy")[0].text == "fine"
        headers = proxy.requests[0]["headers"]
        assert headers["Proxy-Authorization"] == "Basic " + base64.b64encode(b"ann:p@ss").decode()
        assert proxy.requests[0]["line"] == "POST http://api.example.invalid/v1/completions"


@pytest.mark.network
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the openai client's proxy_auth
def test_the_key_never_goes_to_an_https_proxy(monkeypatch, transport):
    """An https endpoint is reached through the proxy's CONNECT: that request carries the
    proxy's own credentials and nothing of the endpoint's (no API key)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    heads: list[str] = []
    sock, url = raw_server(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", heads)
    try:
        monkeypatch.setenv("HTTPS_PROXY", url.replace("/v1", "").replace("http://", "http://ann:pw@"))
        err = ask(make("https://api.example.invalid/v1", transport), "x")[0]
    finally:
        sock.close()
    assert heads and heads[0].startswith("CONNECT api.example.invalid:443 ")
    assert "Proxy-Authorization: Basic " + base64.b64encode(b"ann:pw").decode() in heads[0]
    assert KEY not in heads[0] and "Bearer" not in heads[0]
    assert isinstance(err, TransientModelError) and KEY not in str(err)


@pytest.mark.network
def test_no_proxy_exempts_a_host(monkeypatch, transport):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with Capture() as server:
        assert ask(make(server.url + "/v1", transport), "direct")[0].text == "fine"
        assert server.requests[0]["line"] == "POST /v1/completions"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- failures ------------------------------------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("reply, words", [
    (b"", "(Server disconnected)"),  # the connection closed without a reply
    (b"hello there\r\n\r\n", "sent a malformed reply"),  # not HTTP
])
def test_broken_replies_are_transient_with_the_same_words(transport, reply, words):
    sock, url = raw_server(reply)
    try:
        err = ask(make(url, transport, timeout=5), "x")[0]
    finally:
        sock.close()
    assert isinstance(err, TransientModelError)
    assert str(err).startswith(f"openai:m: ") and str(err).endswith(words) and url in str(err)


@pytest.mark.parametrize("url, endpoint, why", [
    ("localhost:9/v1", "localhost:9/v1", "it must begin with http:// or https://"),
    ("ftp://127.0.0.1:9/v1", "ftp://127.0.0.1:9/v1", "it must begin with http:// or https://"),
    ("http://127.0.0.1:99999/v1", "<a URL that cannot be parsed>", "its port must be a number from 1 to 65535"),
    ("http://127.0.0.1:0/v1", "http://127.0.0.1:0/v1", "its port must be a number from 1 to 65535"),
    ("http://u:s3cret@127.0.0.1:port/v1?api-key=QSECRET", "<a URL that cannot be parsed>",
     "its port must be a number from 1 to 65535"),
    ("http://u:s3cret@:80/v1?api-key=QSECRET", "http://***@:80/v1?api-key=***", "it names no host"),
    ("http://[::1/v1", "<a URL that cannot be parsed>", "it cannot be parsed"),
])
def test_a_base_url_that_cannot_be_requested_is_final(monkeypatch, transport, url, endpoint, why):
    """The same words on both transports, no secret of the URL or the key in them, and no retry
    (nor an internal error)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = make(url, transport, timeout=2)
    scheduler = Scheduler(2, retries=3, backoff=0.01, max_backoff=0.01)

    async def go():
        try:
            return await scheduler.complete(model, Request("x", max_tokens=3))
        finally:
            await model.aclose()

    with pytest.raises(ModelError) as caught:
        asyncio.run(go())
    err = caught.value
    assert type(err) is ModelError and scheduler.retried == 0
    assert str(err) == f"openai:m: cannot use the base URL {endpoint}: {why}"
    for secret in (KEY, "s3cret", "QSECRET"):
        assert secret not in str(err)


@pytest.mark.network
def test_tls_to_a_plain_http_server_is_final(transport):
    with MockOpenAIServer() as server:
        url = server.base_url.replace("http://", "https://")
        err = ask(make(url, transport), "x")[0]
        assert server.stats()["requests"] == 0
    assert type(err) is ModelError
    assert str(err).startswith(f"openai:m: cannot reach {url} (TLS handshake failed: ")


@pytest.mark.network
def test_injected_faults_are_retried_to_the_right_answers(transport):
    """60 requests through the scheduler against a server failing about a third of them (429
    with Retry-After, 500, bodies that are not JSON, HTML, no choices, timeouts): every answer
    right, never more than the concurrency in flight, every slot given back (a timed-out request
    still holds its server thread, so the server may count one more)."""
    faults = {"429": 0.08, "500": 0.08, "garbage": 0.05, "html": 0.04, "empty": 0.04, "timeout": 0.03}
    with MockOpenAIServer(faults=faults, seed=5, timeout_sleep=2.0, retry_after_ms=10) as server:
        model = make(server.base_url, transport, timeout=0.3)
        scheduler = Scheduler(6, retries=12, backoff=0.01, max_backoff=0.05, seed=3)

        async def go():
            try:
                return await asyncio.gather(*(scheduler.complete(model, Request(f"Q: {i}\nA: {i}", max_tokens=3))
                                              for i in range(60)))
            finally:
                await model.aclose()

        answers = asyncio.run(go())
        stats = server.stats()
    assert [a.text for a in answers] == [f"A: {i}" for i in range(60)]
    assert sum(stats["faults"].values()) >= 10 and len(stats["faults"]) >= 4, stats
    assert scheduler.retried == stats["requests"] - 60
    assert scheduler.max_in_flight[model.endpoint] <= 6 and scheduler.in_flight[model.endpoint] == 0
