"""Chat models from the command line, as a user runs them (`decomp run`, no program edit): a
prompt's tools called on a chat-only server, the few-shot file sent as turns, and the
provider's cached prompt tokens in a dataset run's summary and priced by --prices."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from decomp.runtime.cli import main
from decomp.runtime.testing.mock_server import MockOpenAIServer

pytestmark = pytest.mark.network
ENV = {"OPENAI_API_KEY": "unused", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
EXAMPLES = "Answer with the age.\n\nQ: How old is Bob?\nA: 42\n"
PROGRAM = ('handler ages = prompt(file="ages.txt", tools=["double"])\n'
           'handler double = calculator()\nmain ages\n')


def responder(prompt: str, request: dict):
    """Asks the tool once, then answers with what it said."""
    results = [m["content"] for m in request.get("messages") or [] if m.get("role") == "tool"]
    if request.get("tools") and not results:
        return {"content": None, "tool_calls": [{"name": "double", "arguments": {"query": "2 * 21"}}]}
    return results[-1] if results else "7"


@pytest.fixture
def program(tmp_path):
    (tmp_path / "ages.txt").write_text(EXAMPLES)
    path = tmp_path / "ages.decomp"
    path.write_text(PROGRAM)
    return path


def test_a_prompts_tools_run_on_a_chat_only_server_from_the_command_line(program):
    with MockOpenAIServer(apis=("chat",), responder=responder) as server:
        done = CliRunner().invoke(main, ["run", str(program), "-q", "How old is Cy?", "--model", "openai:m",
                                         "--base-url", server.base_url, "--cache", "off"], env=ENV)
        bodies = server.requests
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "42"
    assert "this run uses the chat API" in done.stderr  # the one note line: found, not configured
    first, second = bodies  # a request with tools goes to chat at once: no completions attempt
    assert first["messages"] == [{"role": "system", "content": "Answer with the age."},
                                 {"role": "user", "content": "How old is Bob?"},
                                 {"role": "assistant", "content": "42"},
                                 {"role": "user", "content": "How old is Cy?"}]
    assert first["tools"][0]["function"]["name"] == "double"
    call = second["messages"][-2]["tool_calls"][0]
    assert second["messages"][-1] == {"role": "tool", "content": "42", "tool_call_id": call["id"]}


def test_cached_prompt_tokens_are_summed_and_priced_in_a_dataset_run(tmp_path):
    (tmp_path / "ages.txt").write_text(EXAMPLES * 1)
    program = tmp_path / "plain.decomp"
    program.write_text('handler ages = prompt(file="ages.txt")\nmain ages\n')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"question": f"How old is person {i}?"}) + "\n" for i in range(4)))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"price_in": 1.0, "price_out": 2.0, "price_cached": 0.0}}))
    with MockOpenAIServer(apis=("chat",), prompt_cache=True, cache_min_tokens=8, cache_block=4) as server:
        done = CliRunner().invoke(main, ["run", str(program), "--input", str(data), "--model", "openai:m",
                                         "--base-url", server.base_url, "--api", "chat", "--cache", "off",
                                         "--concurrency", "1", "--prices", str(prices),
                                         "--run-dir", str(tmp_path / "run")], env=ENV)
        served = server.stats()
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["cached_tokens"] == served["cached_tokens"] > 0
    assert summary["prompt_tokens"] == served["prompt_tokens"]
    uncached = summary["prompt_tokens"] - summary["cached_tokens"]
    assert summary["cost"] == pytest.approx((uncached * 1.0 + summary["completion_tokens"] * 2.0) / 1e6)
