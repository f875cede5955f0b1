"""Tests of decomp.runtime.models.openai_backend.OpenAIModel against the local mock server
(127.0.0.1 only; no internet, no real key), each wire test on both transports: `aiohttp` (the
lean default) and `openai` (the official client). Round trips on both APIs, samples, stop,
usage, score(), the mapping of every failure to ModelError or TransientModelError, the API key
never leaking, one shared client, concurrency, registration."""
from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import socket
import subprocess
import sys
import threading
import traceback
import types
import urllib.request

import pytest
from decomp.runtime.models.base import (
    ModelError,
    ModelSettings,
    Request,
    Score,
    TransientModelError,
)
from decomp.runtime.testing.mock_server import MockOpenAIServer
from decomp.runtime.models.openai_backend import (
    OpenAIModel,
    _retry_after,
    openai_model,
)
from decomp.handlers.plugins import load as load_plugins

KEY = "sk-test-CANARY-4f1d9c0e7b2a"
# `transport`, `clean_env` and `server`: tests/conftest.py
pytestmark = pytest.mark.usefixtures("clean_env")


def make(base_url: str, name: str = "m", api: str = "completions", timeout: float = 30.0,
         transport: str = "auto") -> OpenAIModel:
    return OpenAIModel(name, ModelSettings(base_url=base_url, api=api, timeout=timeout, transport=transport))


def run(model: OpenAIModel, *calls):
    """Await each zero-argument coroutine function in one event loop, then close the model."""
    async def go():
        try:
            return [await call() for call in calls]
        finally:
            await model.aclose()
    return asyncio.run(go())


def complete(model: OpenAIModel, request: Request):
    return run(model, lambda: model.complete(request))[0]


def failure(model: OpenAIModel, request: Request | None = None) -> ModelError:
    with pytest.raises(ModelError) as caught:
        complete(model, request or Request("Q: hi\nA:"))
    return caught.value


# --- round trips ---------------------------------------------------------------------------------

@pytest.mark.network
def test_completions_round_trip_with_usage(server, transport):
    model = make(server.base_url, transport=transport)
    out = complete(model, Request("Q: what?\nthe answer is four", max_tokens=20))
    assert out.texts == ("the answer is four",)
    assert (out.prompt_tokens, out.completion_tokens) == (6, 4)


@pytest.mark.network
def test_chat_round_trip(server, transport):
    model = make(server.base_url, api="chat", transport=transport)
    out = complete(model, Request("Q: what?\nchat answer", max_tokens=20))
    assert out.texts == ("chat answer",)
    assert (out.prompt_tokens, out.completion_tokens) == (4, 2)


@pytest.mark.network
def test_n_samples_keep_their_order(transport):
    count = iter(range(100))
    with MockOpenAIServer(responder=lambda prompt, req: f"sample {next(count)}") as s:
        out = complete(make(s.base_url, transport=transport), Request("p", n=3))
        chat = complete(make(s.base_url, api="chat", transport=transport), Request("p", n=2))
    assert out.texts == ("sample 0", "sample 1", "sample 2")
    assert chat.texts == ("sample 3", "sample 4")
    assert out.completion_tokens == 6


@pytest.mark.network
def test_sampling_options_reach_the_server(transport):
    seen = []
    with MockOpenAIServer(responder=lambda prompt, req: seen.append(req) or "ok. more") as s:
        request = Request("p", max_tokens=7, temperature=0.5, stop=(".",), seed=3)
        out = complete(make(s.base_url, transport=transport), request)
        complete(make(s.base_url, api="chat", transport=transport), Request("p", max_tokens=9))
    assert out.text == "ok"
    assert {k: seen[0][k] for k in ("model", "prompt", "max_tokens", "temperature", "stop", "seed", "n")} == {
        "model": "m", "prompt": "p", "max_tokens": 7, "temperature": 0.5, "stop": ["."], "seed": 3, "n": 1}
    assert seen[1]["messages"] == [{"role": "user", "content": "p"}] and seen[1]["max_tokens"] == 9
    assert "stop" not in seen[1] and "seed" not in seen[1]


@pytest.mark.network
def test_stop_sequences_on_both_apis(server, transport):
    request = Request("say first, then second", stop=(",", "then"))
    assert complete(make(server.base_url, transport=transport), request).text == "say first"
    assert complete(make(server.base_url, api="chat", transport=transport), request).text == "say first"


# --- score ---------------------------------------------------------------------------------------

@pytest.mark.network
def test_score_sums_the_continuation_logprobs(server, transport):
    model = make(server.base_url, api="chat", transport=transport)  # scoring always uses the completions API
    score = run(model, lambda: model.score("Q: Is the sky blue?\nA:", " yes it is"))[0]
    # tokens of the continuation: " yes" (4 chars), " it" (3), " is" (3); logprob -0.1 per char
    assert score == Score(pytest.approx(-1.0), 3)


@pytest.mark.network
def test_score_skips_the_first_token_without_logprob(server, transport):
    model = make(server.base_url, transport=transport)
    score = run(model, lambda: model.score("", "hello world"))[0]
    assert score == Score(pytest.approx(-0.6), 1)


@pytest.mark.network
def test_score_retries_once_with_max_tokens_1_when_0_is_refused(transport):
    with MockOpenAIServer(min_max_tokens=1) as s:
        model = make(s.base_url, transport=transport)
        first = run(model, lambda: model.score("a b", " c d"))[0]
        assert s.stats()["requests"] == 2
        second = run(model, lambda: model.score("a b", " c d"))[0]
        assert s.stats()["requests"] == 3  # remembered: no second refusal
    assert first == second == Score(pytest.approx(-0.4), 2)


@pytest.mark.network
def test_score_on_a_server_without_logprobs(transport):
    with MockOpenAIServer(logprobs=False) as s:
        model = make(s.base_url, transport=transport)
        with pytest.raises(ModelError, match="cannot score") as caught:
            run(model, lambda: model.score("a", " b"))
    assert not isinstance(caught.value, TransientModelError)


# --- failures ------------------------------------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("kind, message", [
    ("500", "failed (500"), ("garbage", "not JSON"), ("html", "not JSON"), ("empty", "without choices")])
def test_transient_failures(server, kind, message, transport):
    before = server.stats()["requests"]
    err = failure(make(server.base_url, f"fault-{kind}", transport=transport))
    assert server.stats()["requests"] == before + 1  # one attempt: retries are the scheduler's
    assert isinstance(err, TransientModelError) and err.retry_after is None
    assert message in str(err) and f"openai:fault-{kind}" in str(err)


@pytest.mark.network
def test_rate_limit_carries_retry_after(server, transport):
    before = server.stats()["requests"]
    err = failure(make(server.base_url, "fault-429", transport=transport))
    assert server.stats()["requests"] == before + 1
    assert isinstance(err, TransientModelError)
    assert err.retry_after == pytest.approx(0.05)
    assert "rate limited" in str(err) and "openai:fault-429" in str(err)


@pytest.mark.network
def test_probabilistic_429_and_custom_retry_after(transport):
    with MockOpenAIServer(faults={"429": 1.0}, retry_after_ms=1500) as s:
        err = failure(make(s.base_url, transport=transport))
    assert isinstance(err, TransientModelError) and err.retry_after == pytest.approx(1.5)


def test_retry_after_headers(monkeypatch):
    import decomp.runtime.models.openai_backend as backend

    now = 1_700_000_000.0  # a fake clock: an HTTP date 30 s ahead is exactly 30 s away
    monkeypatch.setattr(backend, "time", types.SimpleNamespace(time=lambda: now))
    assert _retry_after({"retry-after-ms": "250"}) == pytest.approx(0.25)
    assert _retry_after({"retry-after": "2"}) == 2.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    assert _retry_after({"retry-after": later}) == pytest.approx(30.0)
    earlier = email.utils.formatdate(now - 30, usegmt=True)
    assert _retry_after({"retry-after": earlier}) == 0.0
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


@pytest.mark.network
@pytest.mark.parametrize("kind", ["401", "403"])
def test_refused_key_is_final(server, kind, transport):
    err = failure(make(server.base_url, f"fault-{kind}", transport=transport))
    assert type(err) is ModelError
    assert f"the endpoint {server.base_url} refused the API key ({kind}" in str(err)
    assert f"openai:fault-{kind}" in str(err)


@pytest.mark.network
def test_wrong_key_is_refused_without_naming_it(monkeypatch, transport):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with MockOpenAIServer(require_key="sk-the-right-one") as s:
        err = failure(make(s.base_url, transport=transport))
    assert type(err) is ModelError and "refused the API key (401)" in str(err) and KEY not in str(err)


@pytest.mark.network
def test_unknown_model(server, transport):
    err = failure(make(server.base_url, "fault-404", transport=transport))
    assert type(err) is ModelError
    assert "unknown model 'fault-404'" in str(err) and "does not exist" in str(err)


@pytest.mark.network
def test_prompt_too_long(transport):
    with MockOpenAIServer(max_context=8) as s:
        model = make(s.base_url, "small", transport=transport)
        err = failure(model, Request("one two three four five", max_tokens=10))
        fits = make(s.base_url, "small", transport=transport)
        assert complete(fits, Request("one two", max_tokens=3)).text == "one two"
    assert type(err) is ModelError
    assert str(err).startswith("prompt too long for openai:small")


@pytest.mark.network
def test_other_bad_request_is_final_with_the_servers_message(server, transport):
    err = failure(make(server.base_url, "fault-400", transport=transport))
    assert not isinstance(err, TransientModelError)
    assert "rejected the request (400" in str(err) and "Invalid value for 'temperature'" in str(err)


@pytest.mark.network
def test_timeout_is_transient(transport):
    with MockOpenAIServer(faults={"timeout": 1.0}, timeout_sleep=10) as s:
        err = failure(make(s.base_url, timeout=0.3, transport=transport))
    assert isinstance(err, TransientModelError) and "within 0.3s" in str(err)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_refused_connection_is_final(transport):
    """Connection refused cannot heal by retrying at once: a final error (tests/runtime/test_first_hour.py
    has the other unreachable endpoints: no such host name, TLS)."""
    url = f"http://127.0.0.1:{closed_port()}/v1"
    err = failure(make(url, timeout=5, transport=transport))
    assert type(err) is ModelError and str(err) == f"openai:m: cannot reach {url} (connection refused)"


# --- the key never leaks -------------------------------------------------------------------------

@pytest.mark.network
def test_the_key_never_leaks(monkeypatch, server, caplog, transport):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    # the mock echoes the presented key in its 400, 401 and 403 bodies: this test can fail
    req = urllib.request.Request(server.base_url + "/completions", method="POST",
                                 data=json.dumps({"model": "fault-401"}).encode(),
                                 headers={"Authorization": f"Bearer {KEY}"})
    with pytest.raises(urllib.error.HTTPError) as echoed:
        urllib.request.urlopen(req, timeout=30)
    assert KEY in echoed.value.read().decode()

    errors = [failure(make(server.base_url, f"fault-{kind}", transport=transport))
              for kind in ("400", "401", "403", "404", "429", "500", "garbage", "html", "empty")]
    errors.append(failure(make(f"http://127.0.0.1:{closed_port()}/v1", timeout=5, transport=transport)))
    with MockOpenAIServer(require_key="other", max_context=2) as s:
        errors.append(failure(make(s.base_url, transport=transport)))
    with MockOpenAIServer(max_context=2) as s:
        errors.append(failure(make(s.base_url, transport=transport)))
    with MockOpenAIServer(faults={"timeout": 1.0}, timeout_sleep=10) as s:
        errors.append(failure(make(s.base_url, timeout=0.2, transport=transport)))
    model = make(server.base_url, "fault-401", transport=transport)
    with pytest.raises(ModelError) as scored:
        run(model, lambda: model.score("a", " b"))
    errors.append(scored.value)
    assert "***" in str(errors[0])  # the 400's echoed key was blanked out

    for err in errors:
        shown = "".join(traceback.format_exception(err)) + repr(err) + repr(err.args)
        assert KEY not in shown, shown
    model = make(server.base_url, transport=transport)
    complete(model, Request("fine"))
    for text in (model.name, model.endpoint, repr(model), str(model), repr(vars(model))):
        assert KEY not in text

    async def headers_made():  # the transport keeps the headers it made, with the key in them
        await model.complete(Request("fine"))
        return repr(vars(model._transport))

    assert KEY not in asyncio.run(headers_made())
    assert KEY not in caplog.text


def test_no_key_and_no_base_url():
    with pytest.raises(ModelError, match="set OPENAI_API_KEY or pass --base-url"):
        OpenAIModel("gpt-4o-mini", ModelSettings())


# --- settings and registration -------------------------------------------------------------------

def test_api_auto_and_endpoint(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    hosted = OpenAIModel("gpt-4o-mini", ModelSettings())
    assert (hosted.name, hosted.endpoint, hosted.api) == ("openai:gpt-4o-mini", "api.openai.com", "chat")
    local = OpenAIModel("llama", ModelSettings(base_url="http://127.0.0.1:8000/v1/"))
    assert (local.endpoint, local.api) == ("http://127.0.0.1:8000/v1", "completions")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:pw@127.0.0.1:9000/v1")
    from_env = OpenAIModel("llama", ModelSettings(api="chat"))
    assert (from_env.endpoint, from_env.api) == ("http://***@127.0.0.1:9000/v1", "chat")  # redacted, not dropped
    with pytest.raises(ModelError, match="api must be one of"):
        OpenAIModel("x", ModelSettings(base_url="http://127.0.0.1:1/v1", api="responses"))


def test_registered_as_the_openai_scheme():
    assert load_plugins().model_backends["openai"] is openai_model
    model = load_plugins().model_backends["openai"]("served", ModelSettings(base_url="http://127.0.0.1:1/v1"))
    assert isinstance(model, OpenAIModel) and model.name == "openai:served"


@pytest.mark.slow
def test_importing_the_module_does_not_import_openai():
    code = "import sys, decomp.runtime.models.openai_backend; print('openai' in sys.modules, 'aiohttp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.strip() == "False False", out.stderr  # both HTTP stacks load on the first request


@pytest.mark.network
def test_one_lazily_made_client_serves_every_call(server, transport):
    model = make(server.base_url, transport=transport)
    assert model._transport.client is None
    clients = []

    async def twice():
        await model.complete(Request("a"))
        clients.append(model._transport.client)
        await model.complete(Request("b"))
        clients.append(model._transport.client)

    run(model, twice)
    assert clients[0] is clients[1] is not None
    assert model._transport.client is None  # aclose() released it
    assert complete(model, Request("again")).text == "again"  # a new event loop gets a new client


@pytest.mark.network
def test_concurrent_calls_share_the_connection_pool(transport):
    # every request is held at the server until all 8 are there: only concurrent requests get through
    all_in = threading.Barrier(8, timeout=20)

    def answer(prompt, request):
        all_in.wait()
        return prompt.strip().splitlines()[-1]

    with MockOpenAIServer(responder=answer) as s:
        model = make(s.base_url, transport=transport)

        async def eight():
            return await asyncio.gather(*(model.complete(Request(f"q{i}")) for i in range(8)))

        outs = run(model, eight)[0]
        stats = s.stats()
    assert [o.text for o in outs] == [f"q{i}" for i in range(8)]
    assert stats["max_in_flight"] == 8 and stats["requests"] == 8


@pytest.mark.network
def test_a_declared_default_model_keeps_its_options(transport):
    """`model default = "openai:NAME" (base_url=..., transport=...)`: handlers that name no model
    use it, with the declaration's base_url (not the session's) and transport."""
    from decomp import Session
    from decomp.runtime.testing.mock_server import MockOpenAIServer

    with MockOpenAIServer(responder=lambda prompt, body: '"pong"') as server:
        src = (f'model default = "openai:m" (base_url="{server.base_url}", api="completions", '
               f'transport="{transport}")\n'
               'handler ask = prompt(text="Q: ping?\\nA: \\"pong\\"\\n")\n'
               'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
        session = Session(default_model=None)
        result = session.run(session.load("m.decomp", text=src), {"question": "ping?"})
        assert (result.answer, result.error) == ("pong", None)
        assert server.stats()["requests"] == 1
        assert session.model("default").transport == transport
