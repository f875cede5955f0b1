"""What `OpenAIModel` takes from a reply it cannot trust (issue 29), on both transports: token
counts in `usage` that cannot be counts (negative, not numbers, booleans, not finite, absurdly
large) are unknown (None) and never take tokens back from a budget; a body nested 100,000 deep
is a malformed reply in words, never a RecursionError; logprobs that are not numbers likewise."""
from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from decomp import Session
from decomp.runtime.engine.budgets import Budget
from decomp.runtime.models.base import MAX_REPLY_TOKENS, ModelSettings, Request, TransientModelError, token_count
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.mock_server import MockOpenAIServer

# `transport` and `clean_env`: tests/conftest.py
pytestmark = [pytest.mark.usefixtures("clean_env"), pytest.mark.network]

DEEP = 100_000


def make(url: str, transport: str) -> OpenAIModel:
    return OpenAIModel("m", ModelSettings(base_url=url, api="completions", transport=transport, timeout=10))


def complete(model: OpenAIModel, method: str = "complete"):
    """One call of `method` (no scheduler): its answer, or the error it raised."""
    async def go():
        try:
            if method == "score":
                return await model.score("a b", " c")
            return await model.complete(Request("Q: x\nA: fine", max_tokens=5))
        except Exception as err:  # noqa: BLE001 - the test looks at what it is
            return err
        finally:
            await model.aclose()
    return asyncio.run(go())


# ---- usage ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [-2e30, -5, "12", True, False, float("nan"), float("inf"), -float("inf"),
                                   MAX_REPLY_TOKENS + 1, 10**40, 12.5, [3], {"n": 3}, None])
def test_a_count_that_cannot_be_one_is_unknown(transport, value):
    with MockOpenAIServer(usage={"prompt_tokens": value, "completion_tokens": value}) as server:
        done = complete(make(server.base_url, transport))
    assert done.text == "A: fine"
    assert (done.prompt_tokens, done.completion_tokens) == (None, None)


@pytest.mark.parametrize("value, count", [(0, 0), (7, 7), (7.0, 7), (MAX_REPLY_TOKENS, MAX_REPLY_TOKENS)])
def test_a_count_is_kept(transport, value, count):
    with MockOpenAIServer(usage={"prompt_tokens": value}) as server:
        done = complete(make(server.base_url, transport))
    assert (done.prompt_tokens, done.completion_tokens) == (count, 2)  # the mock's own count: "A: fine"


def test_token_count():
    assert [token_count(v) for v in (3, 3.0, 0, -0.0, 10**9)] == [3, 3, 0, 0, 10**9]
    assert [token_count(v) for v in (-1, 10**9 + 1, 2.5, True, "3", None, float("nan"))] == [None] * 7


PROGRAM = '''handler ask = prompt(text="")
program p(question) {
    QS: [ask] Q: one
    QS: [ask] Q: two #1
    QS: [ask] Q: three #2
    QS: [ask] Q: four #3
}
main p
'''


def test_a_negative_count_never_buys_back_a_token_budget(transport):
    """Each reply says it used -10^12 prompt tokens and 10 completion tokens: the row's budget
    of 25 tokens still runs out at the fourth call (10 + 10 + 10 used), and no total is
    negative. (Trusted as they were, the counts would leave the budget forever unspent.) Each
    step needs the one before, so the calls come one after another."""
    with MockOpenAIServer(usage={"prompt_tokens": -10**12, "completion_tokens": 10}) as server:
        session = Session(model=make(server.base_url, transport), budget=Budget(row_tokens=25), cache=None)
        result = session.run(session.load("p.decomp", text=PROGRAM), {"question": "x"})
        requests = server.stats()["requests"]
    assert result.error == "[ask] prompt, p.decomp:6:5: budget exhausted: tokens for this row reached 25"
    assert requests == 3
    assert (session.usage.prompt_tokens, session.usage.completion_tokens, session.usage.calls) == (0, 30, 3)
    model_nodes = [n for n in result.trace.walk() if n.kind == "model"]
    assert [(n.prompt_tokens, n.completion_tokens) for n in model_nodes][:3] == [(None, 10)] * 3


# ---- bodies nested too deep, and other shapes -------------------------------------------------

def _serving(status: int, body: bytes):
    """A server on 127.0.0.1 answering every request with `status` and `body`; its URL."""
    sock = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(rest) < length and (chunk := conn.recv(65536)):
                    rest += chunk
                conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n" % (status, len(body)) + body)

    threading.Thread(target=serve, daemon=True).start()
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


@pytest.mark.parametrize("body", [
    b"[" * DEEP + b"]" * DEEP,
    b'{"choices": [{"text": "fine"}], "x": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    b'{"choices": [' + b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"]}",
])
def test_a_body_nested_100000_deep_is_a_malformed_reply(transport, body):
    sock, url = _serving(200, body)
    try:
        err = complete(make(url, transport))
    finally:
        sock.close()
    assert isinstance(err, TransientModelError), repr(err)
    assert str(err) == f"openai:m: {url} sent a malformed reply nested too deep to read"


def test_an_error_body_nested_100000_deep_is_still_the_status(transport):
    sock, url = _serving(500, b"[" * DEEP + b"]" * DEEP)
    try:
        err = complete(make(url, transport))
    finally:
        sock.close()
    assert isinstance(err, TransientModelError), repr(err)
    assert str(err).startswith(f"openai:m: {url} failed (500: [[[[")


@pytest.mark.parametrize("body, words", [
    (b'{"choices": [{"text": ["x"]}]}', "sent a malformed reply: a choice without text"),
    (b'{"id": 1}', "sent a malformed reply without choices"),
    (b"Bad gateway", "sent a malformed reply that is not JSON: 'Bad gateway'"),
])
def test_other_malformed_replies(transport, body, words):
    sock, url = _serving(200, body)
    try:
        err = complete(make(url, transport))
    finally:
        sock.close()
    assert isinstance(err, TransientModelError) and str(err) == f"openai:m: {url} {words}"


@pytest.mark.parametrize("logprobs, words", [
    ('{"text_offset": [0, 1, 3], "token_logprobs": [null, -1, "x"]}', "a token logprob that is not one ('x')"),
    ('{"text_offset": [0, [1], 3], "token_logprobs": [null, -1, -1]}', "a token offset that is not a number"),
])
def test_logprobs_that_are_not_numbers_are_a_malformed_reply(transport, logprobs, words):
    sock, url = _serving(200, b'{"choices": [{"text": "a b c", "logprobs": %s}]}' % logprobs.encode())
    try:
        err = complete(make(url, transport), "score")
    finally:
        sock.close()
    assert isinstance(err, TransientModelError) and str(err) == f"openai:m: {url} sent a malformed reply: {words}"
