"""Deadlines of `OpenAIModel` on both transports (issue 29): `timeout` bounds each read,
`attempt_deadline` each request in all, `call_deadline` one call's attempts together (retries
and backoff included, held by the scheduler). Against servers started here on 127.0.0.1 that
trickle a reply a byte at a time, send headers and hang, close mid-body, end a chunked body
without its last chunk, or reset the connection (decomp.runtime.testing.misbehaving): every
call ends within its deadline (plus a generous margin for a loaded machine), is retried per
the scheduler's policy, gives back every slot, and fails with words that say what happened,
which deadline ran out and how to raise it."""
from __future__ import annotations

import asyncio
import time

import pytest

from decomp.dsl.errors import CheckError
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import (
    DEFAULT_ATTEMPT_DEADLINE,
    DEFAULT_CALL_DEADLINE,
    ModelError,
    ModelSettings,
    Request,
    TransientModelError,
)
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.misbehaving import MisbehavingServer
from decomp.runtime.testing.mock_server import MockOpenAIServer

# `transport` and `clean_env`: tests/conftest.py
pytestmark = [pytest.mark.usefixtures("clean_env"), pytest.mark.network]

MARGIN = 4.0  # seconds a loaded machine may add to a deadline (the first openai import, threads)


def make(url: str, transport: str, **settings) -> OpenAIModel:
    return OpenAIModel("m", ModelSettings(base_url=url, api="completions", transport=transport, **settings))


def scheduled(model: OpenAIModel, scheduler: Scheduler, calls: int = 1) -> tuple[list, float]:
    """`calls` completions through `scheduler` at once: each answer (or error) and the seconds
    all of them took."""
    async def go():
        try:
            return await asyncio.gather(*(scheduler.complete(model, Request(f"Q{i}", max_tokens=3))
                                          for i in range(calls)), return_exceptions=True)
        finally:
            await model.aclose()

    started = time.monotonic()
    out = asyncio.run(go())
    return out, time.monotonic() - started


def direct(model: OpenAIModel) -> tuple[object, float]:
    """One `model.complete` with no scheduler (one attempt): its answer or error, and seconds."""
    async def go():
        try:
            return await model.complete(Request("Q", max_tokens=3))
        except ModelError as err:
            return err
        finally:
            await model.aclose()

    started = time.monotonic()
    out = asyncio.run(go())
    return out, time.monotonic() - started


# ---- one attempt: the attempt deadline and the per-read timeout ---------------------------------

def test_a_trickling_reply_ends_at_the_attempt_deadline(transport):
    """Each read is quick (a byte every 0.2 s, within the 5 s timeout), so only the attempt
    deadline can end it."""
    with MisbehavingServer("trickle", interval=0.2) as server:
        err, took = direct(make(server.url + "/v1", transport, timeout=5, attempt_deadline=1.5))
    assert isinstance(err, TransientModelError), err
    assert str(err) == (f"openai:m: no complete reply from {server.url}/v1 within the attempt deadline of 1.5s "
                        "(raise it with the model's attempt_deadline= option or --attempt-deadline SECONDS)")
    assert 1.4 < took < 1.5 + MARGIN


def test_headers_then_hang_ends_at_the_read_timeout(transport):
    with MisbehavingServer("hang") as server:
        err, took = direct(make(server.url + "/v1", transport, timeout=1, attempt_deadline=30))
    assert isinstance(err, TransientModelError), err
    assert str(err) == (f"openai:m: no answer from {server.url}/v1 within 1s (the timeout of each read; "
                        "raise it with the model's timeout= option)")
    assert took < 1 + MARGIN


def test_headers_then_hang_ends_at_the_attempt_deadline_when_it_is_sooner(transport):
    with MisbehavingServer("hang") as server:
        err, took = direct(make(server.url + "/v1", transport, timeout=30, attempt_deadline=1))
    assert "within the attempt deadline of 1s" in str(err)
    assert took < 1 + MARGIN


@pytest.mark.parametrize("behaviour, words", [
    ("close", "closed the connection before its reply was complete (Not enough data to satisfy content "
              "length header (received 10 of 100000 bytes))"),
    ("chunked-close", "closed the connection before its reply was complete (Not enough data to satisfy "
                      "transfer length header)"),
    ("reset", "([Errno 104] Connection reset by peer)"),
])
def test_a_connection_cut_short_fails_the_attempt_at_once_in_words(transport, behaviour, words):
    with MisbehavingServer(behaviour) as server:
        err, took = direct(make(server.url + "/v1", transport, timeout=10, attempt_deadline=10))
    assert isinstance(err, TransientModelError), err
    assert str(err).startswith("openai:m: ") and str(err).endswith(words) and server.url in str(err)
    assert took < MARGIN


# ---- a call: retried per policy, all attempts within the call deadline --------------------------

@pytest.mark.parametrize("behaviour, settings, last", [
    ("trickle", {"timeout": 5, "attempt_deadline": 1.0}, "within the attempt deadline of 1s"),
    ("hang", {"timeout": 1, "attempt_deadline": 30}, "within 1s (the timeout of each read"),
    ("close", {}, "closed the connection before its reply was complete"),
    ("chunked-close", {}, "closed the connection before its reply was complete"),
    ("reset", {}, "Connection reset by peer"),
])
def test_every_misbehaviour_is_retried_and_ends_within_the_call_deadline(transport, behaviour, settings, last):
    """Three calls at once, retried (as often as it takes: the retries never run out first)
    until the 3.5 s call deadline: each ends then with the last attempt's error, every slot
    given back."""
    with MisbehavingServer(behaviour, interval=0.2) as server:
        model = make(server.url + "/v1", transport, call_deadline=3.5, **settings)
        scheduler = Scheduler(4, retries=1000, backoff=0.3, max_backoff=0.6, seed=1)
        errors, took = scheduled(model, scheduler, calls=3)
        requests = server.requests
    assert took < 3.5 + MARGIN
    assert scheduler.retried >= 3 and requests >= 6  # at least one retry each
    assert scheduler.in_flight[model.endpoint] == 0
    for err in errors:
        assert type(err) is ModelError, err
        assert str(err).startswith("openai:m: no answer within the call deadline of 3.5s (")
        assert "raise it with the model's call_deadline= option or --call-deadline SECONDS); last error: " in str(err)
        assert last in str(err)


def test_without_a_call_deadline_the_retries_run_out_first(transport):
    """call_deadline=None: the policy's own end (retries + 1 attempts) is the end."""
    with MisbehavingServer("trickle", interval=0.1) as server:
        model = make(server.url + "/v1", transport, attempt_deadline=0.5, call_deadline=None)
        errors, took = scheduled(model, Scheduler(retries=2, backoff=0.01, max_backoff=0.01))
    assert str(errors[0]).startswith("openai:m: gave up after 3 attempts; last error: no complete reply from ")
    assert took < 3 * 0.5 + MARGIN


def test_a_backoff_past_the_call_deadline_is_not_waited_out(transport):
    """A server asking to come back in 60 s: the retry would start past the 5 s deadline, so
    the call ends now, not at the deadline."""
    with MockOpenAIServer(faults={"429": 1.0}, retry_after_ms=60_000) as server:
        model = make(server.base_url, transport, call_deadline=5)
        errors, took = scheduled(model, Scheduler(retries=6))
    assert str(errors[0]).startswith("openai:m: no answer within the call deadline of 5s (1 attempt; ")
    assert "last error: rate limited by " in str(errors[0])
    assert took < 2 + MARGIN


def test_waiting_for_a_slot_is_not_late(transport):
    """One slot, three calls of 1 s each: the last waits 2 s for its turn, yet neither its
    attempt deadline nor its call deadline (1.6 s each) has started while it waits."""
    with MockOpenAIServer(latency=1.0) as server:
        model = make(server.base_url, transport, attempt_deadline=1.6, call_deadline=1.6)
        answers, took = scheduled(model, Scheduler(1), calls=3)
    assert [a.text for a in answers] == ["Q0", "Q1", "Q2"], answers
    assert took > 2.9


def test_a_healthy_server_is_unaffected(transport):
    with MockOpenAIServer() as server:
        model = make(server.base_url, transport, attempt_deadline=5, call_deadline=5)
        answers, _ = scheduled(model, Scheduler(8), calls=20)
    assert [a.text for a in answers] == [f"Q{i}" for i in range(20)]


# ---- the options --------------------------------------------------------------------------------

def test_defaults():
    model = OpenAIModel("m", ModelSettings(base_url="http://127.0.0.1:9/v1"))
    assert (model.attempt_deadline, model.call_deadline) == (DEFAULT_ATTEMPT_DEADLINE, DEFAULT_CALL_DEADLINE)
    assert (DEFAULT_ATTEMPT_DEADLINE, DEFAULT_CALL_DEADLINE) == (120.0, 300.0)


@pytest.mark.parametrize("option", ["attempt_deadline", "call_deadline"])
@pytest.mark.parametrize("value", [0, -1, float("inf"), float("nan"), "10", True])
def test_a_deadline_that_is_no_number_of_seconds_is_refused(option, value):
    with pytest.raises(ModelError, match=rf"openai:m: {option} must be a number of seconds > 0, not "):
        OpenAIModel("m", ModelSettings(base_url="http://127.0.0.1:9/v1", **{option: value}))


def test_a_declaration_sets_the_deadlines_and_the_check_refuses_bad_ones(tmp_path):
    good = tmp_path / "good.decomp"
    good.write_text('model default = "openai:m" (base_url="http://127.0.0.1:9/v1", attempt_deadline=7, '
                    'call_deadline=20.5)\nhandler ask = prompt(text="")\nmain ask\n')
    session = Session(cache=None)
    loaded = session.load(good)
    model = session.resolve_model(None, loaded.default_model)
    assert (model.attempt_deadline, model.call_deadline) == (7.0, 20.5)
    bad = tmp_path / "bad.decomp"
    bad.write_text('model default = "openai:m" (call_deadline=-3)\nhandler ask = prompt(text="")\nmain ask\n')
    with pytest.raises(CheckError) as caught:
        Session(cache=None).load(bad)
    assert caught.value.message == "option 'call_deadline' of a model must be a number of seconds > 0, not -3"
    assert (caught.value.span.line, caught.value.span.column) == (1, 43)
