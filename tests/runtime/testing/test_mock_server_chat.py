"""The mock server as a chat model's server: tool calls in replies and tool turns in requests,
an OpenAI-like prefix cache (`prompt_cache`, `cached_tokens`), reasoning token counts, and the
command-line flags of all three; over HTTP (urllib, and the real openai client for the shape)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest
from decomp.runtime.testing.mock_server import MockOpenAIServer, _parser, start_subprocess, stop_subprocess

WEATHER = {"type": "function", "function": {"name": "weather", "description": "today's weather",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}}}}}


def post(base_url: str, path: str, payload: dict) -> tuple[int, dict]:
    """(status, JSON body) of one POST; error statuses are returned, not raised."""
    req = urllib.request.Request(base_url + path, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def chat(base_url: str, messages: list[dict], **payload) -> dict:
    status, body = post(base_url, "/chat/completions", {"model": "m", "messages": messages, **payload})
    assert status == 200, body
    return body


def complete(base_url: str, prompt: str) -> dict:
    status, body = post(base_url, "/completions", {"model": "m", "prompt": prompt, "max_tokens": 1})
    assert status == 200, body
    return body


def words(count: int, start: int = 0) -> str:
    """`count` whitespace tokens: "w0 w1 ..." (the mock's tokenizer splits on whitespace)."""
    return " ".join(f"w{i}" for i in range(start, start + count))


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


# --- tool calls ----------------------------------------------------------------------------------

def calls_weather(prompt: str, request: dict) -> dict:
    return {"content": None, "tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}},
                                            {"name": "weather", "arguments": '{"city": "Rome"}'}]}


@pytest.mark.network
def test_tool_call_reply_is_shaped_as_openais():
    with MockOpenAIServer(responder=calls_weather) as server:
        reply = chat(server.base_url, user("weather?"), tools=[WEATHER])
        again = chat(server.base_url, user("weather?"), tools=[WEATHER])
    choice = reply["choices"][0]
    assert choice == {"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}},
        ]}}
    assert [call["id"] for call in again["choices"][0]["message"]["tool_calls"]] == ["call_3", "call_4"]
    # completion tokens: "tool_call weather {"city": "Paris"}" is 4 tokens a call
    assert reply["usage"]["completion_tokens"] == 8


@pytest.mark.network
def test_the_openai_client_reads_the_tool_calls():
    with MockOpenAIServer(responder=calls_weather) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
        reply = client.chat.completions.create(model="m", messages=user("weather?"), tools=[WEATHER])
        client.close()
    message = reply.choices[0].message
    assert reply.choices[0].finish_reason == "tool_calls" and message.content is None
    assert [(c.id, c.type, c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("call_1", "function", "weather", {"city": "Paris"}), ("call_2", "function", "weather", {"city": "Rome"})]


@pytest.mark.network
def test_content_beside_tool_calls_and_a_dict_without_calls():
    answers = iter([{"content": "let me look", "tool_calls": [{"name": "weather", "arguments": {}}]},
                    {"content": "sunny", "tool_calls": []}])
    with MockOpenAIServer(responder=lambda prompt, request: next(answers)) as server:
        first = chat(server.base_url, user("weather?"))["choices"][0]
        second = chat(server.base_url, user("weather?"))["choices"][0]
    assert first["finish_reason"] == "tool_calls" and first["message"]["content"] == "let me look"
    assert first["message"]["tool_calls"][0]["function"] == {"name": "weather", "arguments": "{}"}
    assert second == {"index": 0, "finish_reason": "stop", "logprobs": None,
                      "message": {"role": "assistant", "content": "sunny"}}


@pytest.mark.network
def test_a_tool_result_conversation_is_visible_to_the_responder():
    seen = []

    def responder(prompt: str, request: dict) -> str:
        seen.append((prompt, request["messages"]))
        return "It is sunny in Paris."

    messages = [
        {"role": "system", "content": "You answer with tools."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 21C"},
    ]
    with MockOpenAIServer(responder=responder) as server:
        reply = chat(server.base_url, messages, tools=[WEATHER])
    assert seen == [("You answer with tools.\nWeather in Paris?\n"
                     'tool_call weather {"city": "Paris"}\ntool_result call_7: sunny, 21C', messages)]
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "It is sunny in Paris."}


@pytest.mark.network
def test_a_dict_answer_to_completions_is_a_500_that_says_why():
    with MockOpenAIServer(responder=calls_weather) as server:
        status, body = post(server.base_url, "/completions", {"model": "m", "prompt": "weather?"})
    assert status == 500
    assert "tools are chat-only" in body["error"]["message"]


@pytest.mark.network
@pytest.mark.parametrize(("answer", "words_said"), [
    ({"content": None, "tool_calls": [{"arguments": {}}]}, "needs a name"),
    ({"content": None, "tool_calls": [{"name": "f", "arguments": 3}]}, "arguments (a dict or JSON text)"),
    ({"content": None, "tool_calls": {"name": "f"}}, "must be a list"),
    ({"text": "hi"}, "`content` (text or None) and `tool_calls` only"),
])
def test_a_malformed_dict_answer_is_a_500_that_says_why(answer, words_said):
    with MockOpenAIServer(responder=lambda prompt, request: answer) as server:
        status, body = post(server.base_url, "/chat/completions", {"model": "m", "messages": user("hi")})
    assert status == 500 and words_said in body["error"]["message"]


# --- prompt cache --------------------------------------------------------------------------------

def cached(reply: dict) -> int:
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


@pytest.mark.network
def test_prefix_cache_counts_whole_blocks_of_prefixes_seen_before():
    with MockOpenAIServer(prompt_cache=True, cache_min_tokens=8, cache_block=4) as server:
        first = complete(server.base_url, words(22))
        repeat = complete(server.base_url, words(22))
        branch = complete(server.base_url, words(11) + " other " + words(10, start=50))
        short = complete(server.base_url, words(6) + " other")
        earlier = complete(server.base_url, words(13) + " x")  # shares 13 tokens with the first, not the last
        stats = server.stats()
    assert (first["usage"]["prompt_tokens"], cached(first)) == (22, 0)  # a first sighting is uncached
    assert cached(repeat) == 20  # 22 shared, rounded down to a multiple of 4
    assert cached(branch) == 8  # 11 shared -> 8
    assert cached(short) == 0  # 6 shared -> 4, under the minimum of 8
    assert cached(earlier) == 12
    assert stats["prompt_tokens"] == 22 + 22 + 22 + 7 + 14 and stats["cached_tokens"] == 20 + 8 + 12


@pytest.mark.network
def test_prefix_cache_defaults_are_openais_1024_and_128():
    with MockOpenAIServer(prompt_cache=True) as server:
        long_first, long_again = (complete(server.base_url, words(1100)) for _ in range(2))
        short_first, short_again = (complete(server.base_url, words(1000, start=5000)) for _ in range(2))
    assert (cached(long_first), cached(long_again)) == (0, 1024)
    assert (cached(short_first), cached(short_again)) == (0, 0)  # 1000 -> 896, under 1024


@pytest.mark.network
def test_without_the_option_usage_has_no_details_and_stats_count_prompt_tokens_only():
    with MockOpenAIServer() as server:
        replies = [complete(server.base_url, words(300)) for _ in range(2)]
        stats = server.stats()
    assert all("prompt_tokens_details" not in r["usage"] for r in replies)
    assert (stats["prompt_tokens"], stats["cached_tokens"]) == (600, 0)


@pytest.mark.network
def test_chat_prompts_are_counted_and_cached_as_a_chat_template_lays_them_out():
    start = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    longer = start + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    with MockOpenAIServer(prompt_cache=True, cache_min_tokens=1, cache_block=1) as server:
        first = chat(server.base_url, start)
        grown = chat(server.base_url, longer)
        with_tools = chat(server.base_url, start, tools=[WEATHER])
    # "<|system|>", "\nbe", " brief", "\n<|user|>", "\nhi", " there", "\n"
    assert (first["usage"]["prompt_tokens"], cached(first)) == (7, 0)
    # ... " there", "\n<|assistant|>", "\nok", "\n<|user|>", "\nmore", "\n": the first 6 are shared
    assert (grown["usage"]["prompt_tokens"], cached(grown)) == (11, 6)
    # the tools' JSON comes first, so nothing after it is shared
    tools_json = json.dumps([WEATHER], sort_keys=True)
    assert with_tools["usage"]["prompt_tokens"] == 1 + len(tools_json.split()) + 7  # "<|tools|>", JSON, the rest
    assert cached(with_tools) == 0


@pytest.mark.network
def test_prefix_cache_holds_thousands_of_prompts():
    with MockOpenAIServer(prompt_cache=True, cache_min_tokens=128, cache_block=64) as server:
        shared = words(1500)
        for row in range(2000):
            status, _, body = server.answer("/v1/completions", json.dumps(
                {"model": "m", "prompt": f"{shared} row{row} {words(200, start=row)}", "max_tokens": 1}).encode(), None)
            assert status == 200
        last = json.loads(body)
    assert cached(last) == 1472  # 1500 shared, rounded down to 64s
    assert server.stats()["cached_tokens"] == 1999 * 1472


# --- reasoning tokens ----------------------------------------------------------------------------

@pytest.mark.network
def test_reasoning_tokens_are_reported_and_counted_as_completion_tokens():
    with MockOpenAIServer(reasoning_tokens=5) as server:
        usage = chat(server.base_url, user("Q: hi\nanswer me"))["usage"]
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}
    assert usage["completion_tokens"] == 2 + 5 and usage["total_tokens"] == usage["prompt_tokens"] + 7


def test_bad_cache_settings_are_refused():
    with pytest.raises(ValueError, match="cache_block must be at least 1"):
        MockOpenAIServer(prompt_cache=True, cache_block=0)
    with pytest.raises(SystemExit):
        _parser().parse_args(["--cache-block", "0"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["--cache-min-tokens", "many"])


# --- out of process ------------------------------------------------------------------------------

def test_the_flags_parse():
    args = _parser().parse_args(["--prompt-cache", "--cache-min-tokens", "4", "--cache-block", "2",
                                 "--reasoning-tokens", "3"])
    assert (args.prompt_cache, args.cache_min_tokens, args.cache_block, args.reasoning_tokens) == (True, 4, 2, 3)
    defaults = _parser().parse_args([])
    assert (defaults.prompt_cache, defaults.cache_min_tokens, defaults.cache_block) == (False, 1024, 128)


@pytest.mark.slow
@pytest.mark.network
def test_subprocess_flags_work():
    proc, base_url = start_subprocess(prompt_cache=True, cache_min_tokens=4, cache_block=2, reasoning_tokens=3)
    try:
        first, second = (complete(base_url, words(9)) for _ in range(2))
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=30) as resp:
            stats = json.loads(resp.read())
    finally:
        stop_subprocess(proc)
    assert (cached(first), cached(second)) == (0, 8)
    assert second["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
    assert (stats["prompt_tokens"], stats["cached_tokens"]) == (18, 8)
