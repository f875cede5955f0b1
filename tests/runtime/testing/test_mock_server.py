"""Tests of decomp.runtime.testing.mock_server: the OpenAI-compatible test server's replies,
logprobs, stop/max_tokens, statistics, concurrency count, seeded faults, and subprocess mode.

Plain HTTP (urllib) here, so the server is checked on its own; test_openai_backend.py drives
it with the real openai client."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from decomp.runtime.testing.mock_server import (
    FAULT_KINDS,
    MockOpenAIServer,
    _parser,
    start_subprocess,
    stop_subprocess,
    tokenize,
)


def post(base_url: str, path: str, payload: dict | None = None, key: str = "k", timeout: float = 30.0):
    """(status, headers, body bytes) of one POST; error statuses are returned, not raised."""
    data = json.dumps(payload or {}).encode()
    req = urllib.request.Request(base_url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def root(base_url: str) -> str:
    return base_url.removesuffix("/v1")


def complete(base_url: str, **payload) -> dict:
    status, _, body = post(base_url, "/completions", {"model": "m", **payload})
    assert status == 200, body
    return json.loads(body)


# `server` (one default mock server per module): tests/conftest.py

# --- replies -------------------------------------------------------------------------------------

@pytest.mark.network
def test_binds_to_localhost_on_a_free_port(server):
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.base_url.endswith("/v1")
    assert int(server.base_url.split(":")[2].split("/")[0]) > 0


@pytest.mark.network
def test_completion_answers_the_last_line_with_usage(server):
    reply = complete(server.base_url, prompt="Q: first\nA: one\nsecond line here\n", max_tokens=50)
    assert reply["object"] == "text_completion"
    assert [c["text"] for c in reply["choices"]] == ["second line here"]
    assert reply["choices"][0]["finish_reason"] == "stop"
    # prompt tokens: "Q:", " first", "\nA:", " one", "\nsecond", " line", " here", "\n"
    assert reply["usage"] == {"prompt_tokens": 8, "completion_tokens": 3, "total_tokens": 11}


@pytest.mark.network
def test_n_choices_are_indexed(server):
    reply = complete(server.base_url, prompt="x y", n=3)
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2]
    assert reply["usage"]["completion_tokens"] == 6


@pytest.mark.network
def test_stop_sequences_and_max_tokens_cut_the_text(server):
    reply = complete(server.base_url, prompt="say one two three. four", stop=["."])
    assert reply["choices"][0]["text"] == "say one two three"
    reply = complete(server.base_url, prompt="say one two three", max_tokens=2)
    assert reply["choices"][0]["text"] == "say one"
    assert reply["choices"][0]["finish_reason"] == "length"


@pytest.mark.network
def test_chat_completion_shape(server):
    status, _, body = post(server.base_url, "/chat/completions", {
        "model": "m", "messages": [{"role": "system", "content": "be brief"},
                                   {"role": "user", "content": "Q: hi\nanswer me"}]})
    reply = json.loads(body)
    assert status == 200 and reply["object"] == "chat.completion"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "answer me"}
    assert reply["usage"]["prompt_tokens"] == 6  # "be brief\nQ: hi\nanswer me"


@pytest.mark.network
def test_echo_logprobs_tile_the_text(server):
    reply = complete(server.base_url, prompt="The cat  sat", echo=True, logprobs=1, max_tokens=0)
    choice = reply["choices"][0]
    assert choice["text"] == "The cat  sat"
    lp = choice["logprobs"]
    assert lp["tokens"] == ["The", " cat", "  sat"]
    assert lp["text_offset"] == [0, 3, 7]
    assert lp["token_logprobs"] == [None, pytest.approx(-0.4), pytest.approx(-0.5)]
    # with a generated token after the echo, prompt and answer are tokenized apart
    lp = complete(server.base_url, prompt="a b", echo=True, logprobs=1, max_tokens=1)["choices"][0]["logprobs"]
    assert (lp["tokens"], lp["text_offset"]) == (["a", " b", "a"], [0, 1, 3])


def test_tokenize_covers_every_character():
    text = "  a bb\n\nccc  "
    assert "".join(t for t, _ in tokenize(text)) == text


@pytest.mark.network
def test_custom_responder_sees_prompt_and_request():
    seen = []

    def responder(prompt, request):
        seen.append((prompt, request["temperature"]))
        return f"answer {len(seen)}"

    with MockOpenAIServer(responder=responder) as s:
        reply = complete(s.base_url, prompt="p", temperature=0.7, n=2)
    assert [c["text"] for c in reply["choices"]] == ["answer 1", "answer 2"]
    assert seen == [("p", 0.7), ("p", 0.7)]


@pytest.mark.network
def test_logprobs_can_be_switched_off():
    with MockOpenAIServer(logprobs=False) as s:
        reply = complete(s.base_url, prompt="a b", echo=True, logprobs=1, max_tokens=0)
    assert reply["choices"][0]["logprobs"] is None


@pytest.mark.network
def test_context_length_and_minimum_max_tokens():
    with MockOpenAIServer(max_context=5, min_max_tokens=1) as s:
        status, _, body = post(s.base_url, "/completions", {"model": "m", "prompt": "a b c d", "max_tokens": 4})
        assert status == 400
        assert json.loads(body)["error"]["code"] == "context_length_exceeded"
        status, _, body = post(s.base_url, "/completions", {"model": "m", "prompt": "a", "max_tokens": 0})
        assert status == 400 and "at least 1" in json.loads(body)["error"]["message"]


@pytest.mark.network
def test_required_key():
    with MockOpenAIServer(require_key="right") as s:
        assert post(s.base_url, "/completions", {"model": "m", "prompt": "a"}, key="wrong")[0] == 401
        assert post(s.base_url, "/completions", {"model": "m", "prompt": "a"}, key="right")[0] == 200


@pytest.mark.network
def test_unknown_route_and_bad_json(server):
    assert post(server.base_url, "/embeddings", {})[0] == 404
    req = urllib.request.Request(server.base_url + "/completions", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=30)
    assert caught.value.code == 400


# --- faults --------------------------------------------------------------------------------------

@pytest.mark.network
def test_forced_faults_by_model_name(server):
    status, headers, body = post(server.base_url, "/completions", {"model": "fault-429", "prompt": "a"})
    assert status == 429 and headers["retry-after-ms"] == "50"
    assert post(server.base_url, "/completions", {"model": "fault-500", "prompt": "a"})[0] == 500
    status, headers, body = post(server.base_url, "/completions", {"model": "fault-garbage", "prompt": "a"})
    assert status == 200
    with pytest.raises(ValueError):
        json.loads(body)
    status, _, body = post(server.base_url, "/completions", {"model": "fault-401", "prompt": "a"}, key="sk-echo")
    assert status == 401 and b"sk-echo" in body  # a careless server: clients must not repeat it
    assert post(server.base_url, "/completions", {"model": "fault-404", "prompt": "a"})[0] == 404


def test_unknown_fault_kind_is_refused():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        MockOpenAIServer(faults={"418": 0.5})


@pytest.mark.network
def test_timeout_fault_answers_late():
    with MockOpenAIServer(faults={"timeout": 1.0}, timeout_sleep=0.3) as s:
        start = time.monotonic()
        status, _, _ = post(s.base_url, "/completions", {"model": "m", "prompt": "a"})
        assert status == 200
        assert time.monotonic() - start >= 0.25
        assert s.stats()["faults"] == {"timeout": 1}


@pytest.mark.network
def test_stop_wakes_a_stalled_request():
    s = MockOpenAIServer(faults={"timeout": 1.0}, timeout_sleep=60)
    s.start()
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(_post_or_error(s.base_url)))
    worker.start()
    deadline = time.monotonic() + 30
    while s.stats()["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    s.stop()
    worker.join(timeout=20)
    assert not worker.is_alive()


def _post_or_error(base_url):
    try:
        return post(base_url, "/completions", {"model": "m", "prompt": "a"}, timeout=60)[0]
    except OSError as err:
        return err


def _outcomes(seed: int, count: int = 40) -> tuple[list[str], dict]:
    faults = {"429": 0.2, "500": 0.15, "garbage": 0.1}
    with MockOpenAIServer(faults=faults, seed=seed) as s:
        seen = []
        for _ in range(count):
            status, _, body = post(s.base_url, "/completions", {"model": "m", "prompt": "a"})
            seen.append(str(status) if status != 200 else ("ok" if body.startswith(b'{"id": "mock') else "garbage"))
        return seen, s.stats()


@pytest.mark.network
def test_seeded_faults_are_reproducible_and_counted():
    first, stats = _outcomes(seed=7)
    second, _ = _outcomes(seed=7)
    other, _ = _outcomes(seed=8)
    assert first == second
    assert first != other
    assert {"ok", "429", "500", "garbage"} <= set(first)
    assert stats["faults"] == {kind: first.count(kind) for kind in ("429", "500", "garbage")}
    assert stats["requests"] == 40


# --- statistics and concurrency ------------------------------------------------------------------

@pytest.mark.network
def test_stats_routes(server):
    post(root(server.base_url), "/reset-stats")
    complete(server.base_url, prompt="a")
    complete(server.base_url, prompt="b")
    stats = get_json(root(server.base_url) + "/stats")
    assert stats == {"requests": 2, "in_flight": 0, "max_in_flight": 1, "faults": {}, "prompt_tokens": 2,
                     "cached_tokens": 0}
    assert post(root(server.base_url), "/reset-stats")[0] == 200
    assert server.stats()["requests"] == 0


@pytest.mark.network
def test_max_in_flight_counts_concurrent_requests():
    # Each request is held inside the server until `parties` requests are in it at once (no
    # latency to race against: a request that never gets company breaks the barrier after 20 s).
    held = {"at": threading.Barrier(8, timeout=20)}

    def responder(prompt, request):
        held["at"].wait()
        return "a"

    with MockOpenAIServer(responder=responder) as s:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: complete(s.base_url, prompt="a"), range(8)))
        stats = s.stats()
        assert stats["max_in_flight"] == 8 and stats["in_flight"] == 0 and stats["requests"] == 8

        s.reset_stats()
        held["at"] = threading.Barrier(4, timeout=20)  # four at a time, three times over
        with ThreadPoolExecutor(4) as pool:  # 12 requests, never more than 4 at once
            list(pool.map(lambda _: complete(s.base_url, prompt="a"), range(12)))
        stats = s.stats()
        assert stats["max_in_flight"] == 4 and stats["requests"] == 12


# --- out of process ------------------------------------------------------------------------------

def test_cli_parses_faults():
    args = _parser().parse_args(["--latency", "0.1", "--fault", "429=0.1", "--fault", "garbage=0.05",
                                 "--seed", "1", "--no-logprobs"])
    assert dict(args.fault) == {"429": 0.1, "garbage": 0.05}
    assert args.latency == 0.1 and args.seed == 1 and args.logprobs is False
    assert set(FAULT_KINDS) >= {"429", "500", "timeout", "garbage"}
    with pytest.raises(SystemExit):
        _parser().parse_args(["--fault", "teapot=1"])


@pytest.mark.slow
@pytest.mark.network
def test_subprocess_starts_answers_and_stops():
    proc, base_url = start_subprocess(latency=0.01, faults={"429": 0.0}, seed=1,
                                      responder="decomp.runtime.testing.mock_server:shout")
    try:
        assert base_url.startswith("http://127.0.0.1:")
        reply = complete(base_url, prompt="Q: hi\nsay it loud")
        assert reply["choices"][0]["text"] == "SAY IT LOUD"
        assert get_json(root(base_url) + "/stats")["requests"] == 1
    finally:
        code = stop_subprocess(proc)
    assert code in (0, -15)
    with pytest.raises(OSError):
        post(base_url, "/completions", {"model": "m", "prompt": "a"}, timeout=5)


@pytest.mark.slow
def test_subprocess_that_fails_to_start_reports_why():
    with pytest.raises(RuntimeError, match="exited with code 1(.|\n)*module:function"):
        start_subprocess(responder="no-colon-here", ready_timeout=60)
    with pytest.raises(TypeError, match="unknown option"):
        start_subprocess(colour="red")
