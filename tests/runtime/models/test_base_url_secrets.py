"""Credentials written into a base URL (user-info, a query-string key) reach the server but never
a model's endpoint name, repr or the secrets it asks the engine to scrub from messages: a query
string goes on every request, after the API's path; user-info goes as HTTP Basic auth when no
OPENAI_API_KEY is set, and is dropped when one is (its Bearer wins). Each test on both
transports. (MockOpenAIServer does not record the path it was asked for, and answers 404 to a
path with a query string: these tests run a small recording server of their own.)"""
import asyncio
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from decomp.runtime.models.base import ModelSettings, Request
from decomp.runtime.models.openai_backend import OpenAIModel

URL = "https://alice:pa55word@llm.example/v1?api-key=sk-query-secret"
REPLY = json.dumps({"choices": [{"index": 0, "text": "fine", "message": {"role": "assistant",
                                                                        "content": "fine"}}]}).encode()


# `transport` and `clean_env`: tests/conftest.py
pytestmark = pytest.mark.usefixtures("clean_env")


@pytest.fixture
def recorder():
    """A server on 127.0.0.1 that records each request's line and headers (names in lower case)
    and answers it with one completion; its URL is `recorder.url` (no path)."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append({"line": f"{self.command} {self.path}",
                         "headers": {k.lower(): v for k, v in self.headers.items()}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(REPLY)))
            self.end_headers()
            self.wfile.write(REPLY)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.seen = seen
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def ask(base_url: str, transport: str, api: str = "completions") -> OpenAIModel:
    """One completion from a model of `base_url` (closed after); the model."""
    model = OpenAIModel("m", ModelSettings(base_url=base_url, api=api, timeout=10, transport=transport))

    async def go():
        try:
            assert (await model.complete(Request("hi", max_tokens=3))).text == "fine"
        finally:
            await model.aclose()

    asyncio.run(go())
    return model


@pytest.mark.parametrize("transport", ["aiohttp", "openai"])
def test_credentials_in_the_base_url_are_redacted_and_scrubbed(transport, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
    model = OpenAIModel("m", ModelSettings(base_url=URL, transport=transport))
    shown = f"{model.endpoint} {model!r} {model._transport!r}"
    for secret in ("alice", "pa55word", "sk-query-secret", "sk-env-key"):
        assert secret not in shown, shown
    assert "llm.example" in model.endpoint
    assert {"sk-env-key", "pa55word", "sk-query-secret"} <= set(model.secrets())


@pytest.mark.network
def test_a_query_string_key_reaches_the_server_after_the_path(recorder, transport):
    for api in ("completions", "chat"):
        ask(recorder.url + "/v1?api-key=sk-query-secret&x=1", transport, api)
    assert [r["line"] for r in recorder.seen] == ["POST /v1/completions?api-key=sk-query-secret&x=1",
                                                  "POST /v1/chat/completions?api-key=sk-query-secret&x=1"]
    ask(recorder.url + "/v1/?api-key=sk-query-secret", transport)  # a slash before the query
    assert recorder.seen[-1]["line"] == "POST /v1/completions?api-key=sk-query-secret"


@pytest.mark.network
def test_user_info_goes_as_basic_auth_when_no_key_is_set(recorder, transport):
    ask(recorder.url.replace("://", "://al%40ice:pa%3A55word@") + "/v1?api-key=sk-query-secret", transport)
    request = recorder.seen[0]
    assert request["line"] == "POST /v1/completions?api-key=sk-query-secret"
    assert request["headers"]["authorization"] == "Basic " + base64.b64encode(b"al@ice:pa:55word").decode()


@pytest.mark.network
def test_a_key_set_wins_over_user_info(recorder, transport, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
    ask(recorder.url.replace("://", "://alice:pa55word@") + "/v1", transport)
    request = recorder.seen[0]
    assert request["line"] == "POST /v1/completions"
    assert request["headers"]["authorization"] == "Bearer sk-env-key"
    assert "pa55word" not in json.dumps(request["headers"])


@pytest.mark.network
def test_no_attribute_of_the_transport_holds_the_key_or_the_basic_header(recorder, transport, monkeypatch):
    """After a request (its headers made and cached), neither the key nor user-info's Basic
    header shows in a vars() dump of the model or of its transport."""
    basic = base64.b64encode(b"alice:pa55word").decode()
    user_info = ask(recorder.url.replace("://", "://alice:pa55word@") + "/v1", transport)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
    keyed = ask(recorder.url + "/v1", transport)
    assert [r["headers"]["authorization"] for r in recorder.seen] == [f"Basic {basic}", "Bearer sk-env-key"]

    async def headers_made(model):  # a request whose headers stay cached: no aclose
        await model.complete(Request("again", max_tokens=3))
        return repr(vars(model._transport)) + repr(vars(model))

    for model, secret in ((user_info, basic), (keyed, "sk-env-key")):
        dumped = asyncio.run(headers_made(model))
        assert secret not in dumped, dumped
