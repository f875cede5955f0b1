"""The scheduler's slot covers only the time a request is at the server, on the real
`OpenAIModel` against the mock server, on both transports: the slot goes back as the reply's
headers arrive (the openai client's event hooks, the aiohttp transport's own code), before the
client reads and parses the body; and the server never sees more requests at once than the
concurrency allows."""
from __future__ import annotations

import asyncio
import threading

import pytest

from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.models.base import ModelSettings, Request
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.mock_server import MockOpenAIServer, last_line

# `transport` and `clean_env`: tests/conftest.py
pytestmark = [pytest.mark.network, pytest.mark.usefixtures("clean_env")]


def make(base_url: str, transport: str = "auto") -> OpenAIModel:
    return OpenAIModel("m", ModelSettings(base_url=base_url, api="completions", transport=transport))


def test_the_real_class_defers_its_slot(transport):
    assert OpenAIModel.defers_slot is True
    assert make("http://127.0.0.1:9/v1", transport).defers_slot is True


def test_slot_is_given_back_while_the_client_still_parses(monkeypatch, transport):
    with MockOpenAIServer() as server:
        model = make(server.base_url, transport)
        scheduler = Scheduler(concurrency=2)
        held_while_parsing: list[int] = []
        parse = model._parse

        def watching(body):
            held_while_parsing.append(scheduler.in_flight[model.endpoint])
            return parse(body)

        monkeypatch.setattr(model, "_parse", watching)

        async def go():
            try:
                return await scheduler.complete(model, Request("Q: hi\nA: there", max_tokens=4))
            finally:
                await model.aclose()

        done = asyncio.run(go())
    assert done.texts == ("A: there",)
    assert held_while_parsing == [0]  # the slot was back before the body was parsed
    assert scheduler.max_in_flight[model.endpoint] == 1
    assert scheduler.in_flight[model.endpoint] == 0


def test_the_server_sees_at_most_the_concurrency(monkeypatch, transport):
    # every request waits at the server until four are there at once: the limit is reached each
    # time (events, not a latency window), and a fifth in flight would show in the statistics
    together = threading.Barrier(4, timeout=20)

    def answer(prompt, request):
        together.wait()
        return last_line(prompt, request)

    with MockOpenAIServer(responder=answer) as server:
        model = make(server.base_url, transport)
        scheduler = Scheduler(concurrency=4)

        async def go():
            try:
                return await asyncio.gather(*(scheduler.complete(model, Request(f"Q: {i}\nA: {i}", max_tokens=2))
                                              for i in range(24)))
            finally:
                await model.aclose()

        answers = asyncio.run(go())
        stats = server.stats()
    assert [a.texts[0] for a in answers] == [f"A: {i}" for i in range(24)]
    assert stats["requests"] == 24
    assert stats["max_in_flight"] == 4 == scheduler.max_in_flight[model.endpoint]
