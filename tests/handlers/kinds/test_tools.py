"""Handlers as tools (`decomp.handlers.kinds.tools`): a prompt with `tools=` on a chat model,
against the mock OpenAI server, whose responder asks for tool calls and answers from the tool
messages it gets back. What is checked: the tools' schemas (a typed program's first parameter
vs the string `query`), the tool messages, the trace's call nodes, the round bound, what the
model is told of an unknown tool or arguments that are not JSON, the step cache, and the
errors of tools on a completion model and of `tools=` naming no handler."""
from __future__ import annotations

import re

import pytest

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.mock_server import MockOpenAIServer

PROGRAM = '''handler calc = calculator()
handler lookup = regex(pattern=r"[A-Z]\\w+")
handler ask = prompt(text="Use the tools.\\n\\nQ: {{{{ query }}}}\\nA:", tools=["calc", "lookup", "double"]{extra})
program double(n: int) -> int {{
    QS: [calc] #n * 2
}}
program p(question) {{
    QS: [ask] #question
}}
main p
'''
RESULT = re.compile(r"^tool_result (call_\d+): (.*)$", re.M)


def served(tmp_path, responder, *, extra: str = "", api: str = "chat", cache: StepCache | None = None,
           program: str = PROGRAM, question: str = "What is 6 * 7, doubled?"):
    """Run the program on the mock server's `api`; (result, the bodies the server received)."""
    with MockOpenAIServer(responder=responder) as server:
        head = f'model default = "openai:m" (base_url="{server.base_url}", api="{api}")\n'
        session = Session(cache=cache)
        module = session.load(tmp_path / "main.decomp", text=head + program.format(extra=extra))
        result = session.run(module, {"question": question})
    return result, server.requests


def calls(*found: tuple[str, object]) -> dict:
    """A responder's answer asking for the tool calls `(name, arguments)`."""
    return {"content": None, "tool_calls": [{"name": name, "arguments": arguments} for name, arguments in found]}


def two_rounds(prompt: str, body: dict):
    """Round 1: calc; round 2: double of calc's answer; then the answer, read from the results."""
    results = RESULT.findall(prompt)
    if not results:
        return calls(("calc", {"query": "6 * 7"}))
    if len(results) == 1:
        return calls(("double", {"n": int(results[0][1])}))
    return f"It is {results[1][1]}."


def tool_message(call_id: str, content: str) -> dict:
    return {"role": "tool", "content": content, "tool_call_id": call_id}


def asked(call_id: str, name: str, arguments: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_the_model_calls_tools_and_answers_from_their_results(tmp_path):
    result, sent = served(tmp_path, two_rounds)
    assert result.error is None, result.error
    assert result.answer == "It is 84."
    question = {"role": "user", "content": "Use the tools.\n\nQ: What is 6 * 7, doubled?\nA:"}
    first = {"role": "assistant", "content": None, "tool_calls": [asked("call_1", "calc", '{"query": "6 * 7"}')]}
    second = {"role": "assistant", "content": None, "tool_calls": [asked("call_2", "double", '{"n": 42}')]}
    assert [body["messages"] for body in sent] == [
        [question],
        [question, first, tool_message("call_1", "42")],
        [question, first, tool_message("call_1", "42"), second, tool_message("call_2", "84")],
    ]


def test_the_tools_schemas_come_from_declared_types_else_a_string_query(tmp_path):
    _, sent = served(tmp_path, two_rounds)
    query = {"additionalProperties": False, "required": ["query"], "type": "object"}
    assert sent[0]["tools"] == [
        {"type": "function", "function": {
            "name": "calc", "description": "The calculator handler calc. It answers a value of type float.",
            "parameters": {**query, "properties": {"query": {"type": "string", "description": "what to ask [calc]"}}}}},
        {"type": "function", "function": {
            "name": "lookup", "description": "The regex handler lookup. It answers a value of type str.",
            "parameters": {**query, "properties": {"query": {"type": "string",
                                                             "description": "what to ask [lookup]"}}}}},
        {"type": "function", "function": {
            "name": "double", "description": "The program handler double. It answers a value of type int.",
            "parameters": {"additionalProperties": False, "required": ["n"], "type": "object",
                           "properties": {"n": {"type": "integer"}}}}},
    ]
    assert all(body["tools"] == sent[0]["tools"] for body in sent)


def test_each_tool_call_is_a_call_node_under_the_prompts_call(tmp_path):
    result, _ = served(tmp_path, two_rounds)
    ask = next(n for n in result.trace.walk() if n.kind == "call" and n.handler == "ask")
    assert [(n.kind, n.handler, n.answer) for n in ask.children] == [
        ("model", "ask", None), ("call", "calc", 42), ("model", "ask", None), ("call", "double", 84),
        ("model", "ask", None)]
    models = [n for n in ask.children if n.kind == "model"]
    assert [n.facts["tools"] for n in models] == [["calc", "lookup", "double"]] * 3
    assert models[0].facts["tool_calls"] == [[asked("call_1", "calc", '{"query": "6 * 7"}')]]
    assert "tool_calls" not in models[2].facts
    assert models[1].facts["messages"][-1] == tool_message("call_1", "42")
    double = ask.children[3]
    assert [(n.kind, n.handler) for n in double.walk()][1:] == [("step", "calc"), ("call", "calc")]


def test_several_calls_in_one_round_each_get_their_tool_message(tmp_path):
    def respond(prompt, body):
        if "tool_result" in prompt:
            return " / ".join(text for _, text in RESULT.findall(prompt))
        return calls(("lookup", {"query": "who is Ada here"}), ("calc", {"query": "2 + 2"}))
    result, sent = served(tmp_path, respond)
    assert result.answer == '"Ada" / 4'
    assert sent[1]["messages"][-2:] == [tool_message("call_1", '"Ada"'), tool_message("call_2", "4")]


def test_the_round_bound_ends_the_call_saying_so(tmp_path):
    result, sent = served(tmp_path, lambda prompt, body: calls(("calc", {"query": "1 + 1"})),
                          extra=", max_tool_rounds=2")
    assert len(sent) == 3  # the first request and two rounds of results
    assert "the model still called tools after 2 rounds (raise max_tool_rounds?)" in str(result.error)
    assert "[ask]" in str(result.error)


@pytest.mark.parametrize("name, arguments, told", [
    ("search", {"query": "x"}, "error: there is no tool 'search'; the tools are calc, lookup, double"),
    ("calc", "6 * 7 please", "error: the arguments are not JSON: '6 * 7 please'"),
    ("calc", {"expression": "6 * 7"}, 'error: give the argument \'query\' as a JSON object\'s member, '
                                      'e.g. {"query": ...}'),
    ("double", '["n", 4]', 'error: give the argument \'n\' as a JSON object\'s member, e.g. {"n": ...}'),
])
def test_a_bad_call_is_answered_to_the_model_as_an_error(tmp_path, name, arguments, told):
    def respond(prompt, body):
        results = RESULT.findall(prompt)
        return results[0][1] if results else calls((name, arguments))
    result, sent = served(tmp_path, respond)
    assert result.error is None, result.error
    assert sent[1]["messages"][-1] == tool_message("call_1", told)
    assert result.answer == told


def test_a_handlers_failure_is_answered_to_the_model_and_it_may_try_again(tmp_path):
    def respond(prompt, body):
        results = RESULT.findall(prompt)
        if not results:
            return calls(("calc", {"query": "six times seven"}))
        if len(results) == 1:
            return calls(("calc", {"query": "6 * 7"}))
        return results[-1][1]
    result, sent = served(tmp_path, respond)
    assert result.error is None and result.answer == 42
    assert sent[1]["messages"][-1] == tool_message("call_1", "error: no arithmetic expression in 'six times seven'")
    assert sent[2]["messages"][-1] == tool_message("call_2", "42")


def test_a_failed_outcome_is_answered_to_the_model_as_failed(tmp_path):
    """A typed prompt (on the same server) that never fits its type: a failed outcome, not an error."""
    program = ('handler num = prompt(text="N: {{{{ query }}}}", returns=int)\n'
               'handler ask = prompt(text="Q: {{{{ query }}}}\\nA:", tools=["num"])\n'
               'program p(question) {{\n    QS: [ask] #question\n}}\nmain p\n')

    def respond(prompt, body):
        if prompt.startswith("N:"):
            return "many"
        results = RESULT.findall(prompt)
        return results[0][1] if results else calls(("num", {"query": "how many?"}))
    result, sent = served(tmp_path, respond, program=program)
    assert result.error is None, result.error
    assert [body["messages"][0]["content"] for body in sent] == ["Q: What is 6 * 7, doubled?\nA:", "N: how many?",
                                                                  "Q: What is 6 * 7, doubled?\nA:"]
    assert sent[2]["messages"][-1] == tool_message("call_1", 'failed: "many"')


def test_tool_calls_are_cached_and_replayed_with_their_results(tmp_path):
    cache = StepCache(tmp_path / "steps.sqlite")
    first, sent = served(tmp_path, two_rounds, cache=cache)
    again, sent_again = served(tmp_path, two_rounds, cache=cache)
    assert len(sent) == 3 and sent_again == []
    assert again.answer == first.answer == "It is 84."


def test_tools_on_a_completion_model_fail_with_what_to_pass(tmp_path):
    result, sent = served(tmp_path, two_rounds, api="completions")
    assert sent == []
    assert "openai:m cannot call tools: tools need a chat model (an openai: model on the chat API: --api chat)" \
        in str(result.error)


def test_tools_on_an_auto_model_switch_it_to_chat_and_say_so(tmp_path):
    notes: list[str] = []
    with MockOpenAIServer(responder=two_rounds) as server:
        head = f'model default = "openai:m" (base_url="{server.base_url}", api="auto")\n'
        session = Session(on_note=notes.append)
        result = session.run(session.load(tmp_path / "main.decomp", text=head + PROGRAM.format(extra="")),
                             {"question": "What is 6 * 7, doubled?"})
    assert result.error is None and result.answer == "It is 84."
    assert all("messages" in body for body in server.requests)
    assert len(notes) == 1 and "tools need the chat API" in notes[0] and "--api chat" in notes[0]


def test_tools_naming_no_handler_is_a_check_error_at_the_option(tmp_path):
    program = PROGRAM.replace('"double"]', '"double", "nope"]')
    with pytest.raises(DecompError) as caught:
        Session().load(tmp_path / "main.decomp", text=program.format(extra=""))
    message = str(caught.value)
    assert "tools=: [ask] offers [nope] as a tool, but no handler is called that" in message
    assert "main.decomp:3:" in message


def test_tools_with_several_samples_is_a_check_error(tmp_path):
    with pytest.raises(DecompError, match=r"tools= takes one sample at a time \(n = 1\)"):
        Session().load(tmp_path / "main.decomp", text=PROGRAM.format(extra=", n=2"))
