"""Chat on OpenAI-compatible endpoints (runtime/models/openai_backend.py): conversations sent as
given, `conversation=false`, api="auto" finding a chat-only server once and saying so, refusals
that point to the other API worded with what to pass, usage details read (cached and reasoning
tokens, nonsense counts as unknown), tools refused on the completions API, and a chat model's
step cache keys holding the conversation while completion keys stay as they were."""
from __future__ import annotations

import asyncio

import pytest
from decomp.handlers.conversation import Message, Tool
from decomp.runtime.engine.cache import cache_key
from decomp.runtime.engine.session import Session
from decomp.runtime.models.base import ModelError, ModelSettings, Request
from decomp.runtime.models.openai_backend import OpenAIModel, _points_elsewhere
from decomp.runtime.testing.mock_server import MockOpenAIServer

pytestmark = [pytest.mark.usefixtures("clean_env"), pytest.mark.network]

TURNS = (Message("system", "Be brief."), Message("user", "How old is Bob?"), Message("assistant", "42"),
         Message("user", "How old is Ann?"))


def make(base_url: str, api: str = "auto", transport: str = "auto", **options) -> OpenAIModel:
    return OpenAIModel("m", ModelSettings(base_url=base_url, api=api, transport=transport,
                                          options=tuple(options.items())))


def run(model: OpenAIModel, *requests: Request):
    async def go():
        try:
            return [await model.complete(r) for r in requests]
        finally:
            await model.aclose()
    return asyncio.run(go())


def test_a_conversation_goes_as_its_messages(server, transport):
    model = make(server.base_url, "chat", transport)
    run(model, Request("the text", messages=TURNS))
    assert server.requests[-1]["messages"] == [m.wire() for m in TURNS]
    run(model, Request("the text"))  # no conversation: the text as one user message, as before
    assert server.requests[-1]["messages"] == [{"role": "user", "content": "the text"}]


def test_conversation_false_sends_the_text_as_one_message(server):
    model = make(server.base_url, "chat", conversation=False)
    run(model, Request("the text", messages=TURNS))
    assert server.requests[-1]["messages"] == [{"role": "user", "content": "the text"}]
    assert not model.chat and model.cache_identity() == "openai:m"  # keyed by its text, as before
    with pytest.raises(ModelError, match="conversation must be true or false"):
        make(server.base_url, "chat", conversation="no")


def test_lone_surrogates_in_messages_are_sendable(server):
    run(make(server.base_url, "chat"), Request("x", messages=(Message("user", "a\ud800b"),)))
    assert server.requests[-1]["messages"][0]["content"] == "a\ufffdb"


@pytest.mark.parametrize("transport_name", ["aiohttp", "openai"])
def test_auto_finds_a_chat_only_server_once_and_says_so(transport_name):
    with MockOpenAIServer(apis=("chat",), responder=lambda prompt, req: "17") as server:
        model = make(server.base_url, transport=transport_name)
        said = []
        model.on_api = lambda api, line: said.append((api, line))
        first, second = run(model, Request("Q: x\nA:", messages=TURNS), Request("Q: y\nA:", messages=TURNS))
        assert first.texts == second.texts == ("17",)
        paths = ["messages" in body for body in server.requests]
        assert paths == [False, True, True]  # one completions request, then chat only
        assert model.api == "chat" and model.chat
        assert len(said) == 1 and said[0][0] == "chat"
        assert "refused the completions API (404)" in said[0][1] and "--api chat" in said[0][1]


def test_auto_keeps_an_unknown_model_an_unknown_model():
    with MockOpenAIServer() as server:
        model = OpenAIModel("fault-404", ModelSettings(base_url=server.base_url))
        with pytest.raises(ModelError, match="unknown model 'fault-404'") as caught:
            run(model, Request("x"))
        assert "--api" not in str(caught.value)
        assert len(server.requests) == 1 and model.api == "completions"


def test_a_given_api_refused_in_words_pointing_elsewhere_says_what_to_pass():
    with MockOpenAIServer(apis=("chat",)) as server:
        with pytest.raises(ModelError, match=r'pass --api chat \(or api="chat" on the model\)'):
            run(make(server.base_url, "completions"), Request("x"))
        assert len(server.requests) == 1  # no second try: the user chose the API
    with MockOpenAIServer(apis=("completions",)) as server:
        with pytest.raises(ModelError, match="pass --api completions"):
            run(make(server.base_url, "chat"), Request("x"))


def test_auto_after_an_answer_never_switches():
    with MockOpenAIServer() as server:
        model = make(server.base_url)
        run(model, Request("x"))
        server.apis = ("chat",)  # the server changes its mind: the settled API's error stands
        with pytest.raises(ModelError, match="pass --api chat"):
            run(model, Request("y"))
        assert model.api == "completions"


@pytest.mark.parametrize("status, detail, api, expected", [
    (404, "This is a chat model and thus not supported in the v1/completions endpoint. Did you mean to use "
          "v1/chat/completions?", "completions", True),
    (404, "This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you mean "
          "to use v1/completions?", "chat", True),
    (404, "This is not a chat model and thus not supported in the v1/chat/completions endpoint.", "completions",
     False),
    (400, "As of transformers v4.44, default chat template is no longer allowed", "chat", True),
    (404, "Not Found", "completions", True),
    (405, "Method Not Allowed", "chat", True),
    (404, "The model `x` does not exist.", "completions", False),
    (401, "chat model", "completions", False),
    (400, "Invalid value for 'temperature'", "chat", False),
])
def test_which_refusals_point_to_the_other_api(status, detail, api, expected):
    assert _points_elsewhere(status, detail, api) is expected


def test_usage_details_are_read_and_nonsense_is_unknown():
    usage = {"prompt_tokens_details": {"cached_tokens": 12}, "completion_tokens_details": {"reasoning_tokens": 3}}
    with MockOpenAIServer(usage=usage) as server:
        done, = run(make(server.base_url, "chat"), Request("x"))
    assert (done.cached_tokens, done.reasoning_tokens) == (12, 3)
    bad = {"prompt_tokens_details": {"cached_tokens": -4}, "completion_tokens_details": "many"}
    with MockOpenAIServer(usage=bad) as server:
        done, = run(make(server.base_url, "chat"), Request("x"))
    assert (done.cached_tokens, done.reasoning_tokens) == (None, None)
    with MockOpenAIServer() as server:
        done, = run(make(server.base_url, "completions"), Request("x"))
    assert (done.cached_tokens, done.reasoning_tokens) == (None, None)


ADD = Tool("add", "Adds.", '{"properties":{"query":{"type":"string"}},"required":["query"],"type":"object"}')


def test_tools_need_the_chat_api(server):
    with pytest.raises(ModelError, match="tools need the chat API"):
        run(make(server.base_url, "completions"), Request("x", tools=(ADD,)))
    assert not server.requests or "tools" not in server.requests[-1]


def test_a_tool_request_settles_auto_on_chat():
    with MockOpenAIServer() as server:
        model = make(server.base_url)
        said = []
        model.on_api = lambda api, line: said.append(line)
        run(model, Request("x", tools=(ADD,)))
        assert model.api == "chat" and server.requests[-1]["tools"][0]["function"]["name"] == "add"
        assert len(said) == 1 and "tools need the chat API" in said[0]


def test_chat_keys_hold_the_conversation_and_completion_keys_stay(server):
    chat, text = make(server.base_url, "chat"), make(server.base_url, "completions")
    request = Request("Q: x\nA:", stop=("\n",), messages=TURNS)
    old_shape = {"op": "complete", "model": "openai:m", "sampling": {"max_tokens": 256, "temperature": 0.0,
                                                                      "stop": ["\n"], "seed": None},
                 "sample": 0, "prompt": "Q: x\nA:"}
    assert Session._sample_key(text, request, 0) == cache_key(old_shape)  # completions: as before this work
    plain = Request("Q: x\nA:", stop=("\n",))
    assert Session._sample_key(chat, plain, 0) == cache_key(old_shape)  # one user message: as before too
    conversation = {k: v for k, v in old_shape.items() if k != "prompt"}
    conversation["messages"] = [m.wire() for m in TURNS]
    assert Session._sample_key(chat, request, 0) == cache_key(conversation)
    other = Request("Q: x\nA:", stop=("\n",), messages=TURNS[:-1] + (Message("user", "How old is Cy?"),))
    assert Session._sample_key(chat, other, 0) != Session._sample_key(chat, request, 0)
    tooled = Request("Q: x\nA:", stop=("\n",), messages=TURNS, tools=(ADD,))
    assert Session._sample_key(chat, tooled, 0) == cache_key({**conversation, "tools": [ADD.wire()]})
