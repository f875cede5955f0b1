"""Constrained decoding on OpenAI-compatible endpoints (runtime/models/openai_backend.py): the
request fields each `constrain=` mode sends on each API for a JSON Schema and for a regex, as
the mock server received them, on both transports; none without a constraint or under "none";
api.openai.com's completions endpoint left alone; a bad mode refused when the model is made; a
server that refuses a constraint field answered with a worded, final error."""
from __future__ import annotations

import asyncio
import json

import pytest
from decomp.runtime.models.base import Constraint, ModelError, ModelSettings, Request, TransientModelError
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.mock_server import MockOpenAIServer

KEY = "sk-test-CANARY-77aa0e1f3c"
# `transport`, `clean_env` and `server`: tests/conftest.py
pytestmark = pytest.mark.usefixtures("clean_env")

SCHEMA_TEXT = '{"items":{"type":"string"},"type":"array"}'
SCHEMA = {"items": {"type": "string"}, "type": "array"}
REGEX = "(yes|no)"
BY_SCHEMA = Constraint(schema=SCHEMA_TEXT, name="answer")
BY_REGEX = Constraint(regex=REGEX, name="answer")

RESPONSE_FORMAT = {"response_format": {"type": "json_schema", "json_schema": {
    "name": "answer", "schema": SCHEMA, "strict": True}}}
VLLM_SCHEMA = {"guided_json": SCHEMA, "structured_outputs": {"json": SCHEMA}}
VLLM_REGEX = {"guided_regex": REGEX, "structured_outputs": {"regex": REGEX}}
LLAMA_SCHEMA = {"json_schema": SCHEMA}
FIELDS = ("response_format", "structured_outputs", "guided_json", "guided_regex", "json_schema", "grammar")

#: (constrain, api, constraint) -> the constraint fields a server other than api.openai.com receives
EXPECTED = {
    ("auto", "chat", "schema"): RESPONSE_FORMAT,
    ("auto", "chat", "regex"): {},
    ("auto", "completions", "schema"): {**VLLM_SCHEMA, **LLAMA_SCHEMA},
    ("auto", "completions", "regex"): VLLM_REGEX,
    ("response_format", "chat", "schema"): RESPONSE_FORMAT,
    ("response_format", "chat", "regex"): {},
    ("response_format", "completions", "schema"): RESPONSE_FORMAT,
    ("response_format", "completions", "regex"): {},
    ("guided", "chat", "schema"): VLLM_SCHEMA,
    ("guided", "chat", "regex"): VLLM_REGEX,
    ("guided", "completions", "schema"): VLLM_SCHEMA,
    ("guided", "completions", "regex"): VLLM_REGEX,
    ("llama", "chat", "schema"): LLAMA_SCHEMA,
    ("llama", "chat", "regex"): {},
    ("llama", "completions", "schema"): LLAMA_SCHEMA,
    ("llama", "completions", "regex"): {},
    **{("none", api, kind): {} for api in ("chat", "completions") for kind in ("schema", "regex")},
}


def make(base_url: str, api: str, constrain: str | None, transport: str = "auto", name: str = "m") -> OpenAIModel:
    options = () if constrain is None else (("constrain", constrain),)
    return OpenAIModel(name, ModelSettings(base_url=base_url, api=api, transport=transport, options=options))


def complete(model: OpenAIModel, request: Request):
    async def go():
        try:
            return await model.complete(request)
        finally:
            await model.aclose()
    return asyncio.run(go())


def sent(server: MockOpenAIServer) -> dict:
    """The constraint fields of the last request the server received."""
    body = server.requests[-1]
    return {field: body[field] for field in FIELDS if field in body}


# --- the fields, by mode x API x constraint ------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("constrain", ["auto", "response_format", "guided", "llama", "none"])
def test_each_mode_sends_its_fields(server, transport, constrain):
    for api in ("chat", "completions"):
        for kind, constraint in (("schema", BY_SCHEMA), ("regex", BY_REGEX)):
            model = make(server.base_url, api, constrain, transport)
            out = complete(model, Request("Q: x\nyes", constraint=constraint))
            assert out.text == "yes"  # the responder's text, as without a constraint
            assert sent(server) == EXPECTED[constrain, api, kind], (constrain, api, kind)
            assert server.requests[-1]["model"] == "m"


@pytest.mark.network
def test_auto_is_the_default_and_nothing_goes_without_a_constraint(server, transport):
    for api in ("chat", "completions"):
        complete(make(server.base_url, api, None, transport), Request("Q: x\nyes", constraint=BY_SCHEMA))
        assert sent(server) == EXPECTED["auto", api, "schema"]
        for constrain in ("auto", "response_format", "guided", "llama"):
            complete(make(server.base_url, api, constrain, transport), Request("Q: x\nyes"))
            assert sent(server) == {}, (api, constrain)


@pytest.mark.network
def test_api_openai_com_completions_get_nothing_under_auto(server, transport, monkeypatch):
    """api.openai.com's completions endpoint has no constraint fields: "auto" sends none there,
    and `response_format` on its chat API. Reached through the mock server as an HTTP proxy."""
    monkeypatch.setenv("HTTP_PROXY", server.base_url.removesuffix("/v1"))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    hosted = "http://api.openai.com/v1"
    complete(make(hosted, "completions", "auto", transport), Request("Q: x\nyes", constraint=BY_SCHEMA))
    assert sent(server) == {} and server.requests[-1]["prompt"] == "Q: x\nyes"
    complete(make(hosted, "chat", "auto", transport), Request("Q: x\nyes", constraint=BY_SCHEMA))
    assert sent(server) == RESPONSE_FORMAT
    complete(make(hosted, "completions", "guided", transport), Request("Q: x\nyes", constraint=BY_REGEX))
    assert sent(server) == VLLM_REGEX  # a named mode is sent wherever it is asked for


@pytest.mark.network
def test_the_schema_name_is_one_openai_takes(server):
    constraint = Constraint(schema=SCHEMA_TEXT, name="step 3: the list/" + "x" * 80)
    complete(make(server.base_url, "chat", "auto"), Request("yes", constraint=constraint))
    name = server.requests[-1]["response_format"]["json_schema"]["name"]
    assert name == ("step_3__the_list_" + "x" * 80)[:64]


def test_a_schema_that_is_not_json_is_a_worded_error():
    model = make("http://127.0.0.1:9/v1", "chat", "auto")
    with pytest.raises(ModelError, match="constraint 'answer' has a schema that is not JSON"):
        complete(model, Request("x", constraint=Constraint(schema="{not json")))


# --- the option ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["Guided", "grammar", "vllm", "", 1, None])
def test_an_unknown_mode_is_refused_when_the_model_is_made(value):
    with pytest.raises(ModelError) as caught:
        OpenAIModel("m", ModelSettings(base_url="http://127.0.0.1:9/v1", options=(("constrain", value),)))
    message = str(caught.value)
    assert message.startswith("openai:m: constrain must be one of auto, response_format, guided, llama, none, not ")
    assert repr(value) in message
    assert ("local model" in message) == (value == "grammar")


def test_the_mode_is_kept_and_the_repr_unchanged():
    model = make("http://127.0.0.1:9/v1", "chat", "llama")
    assert model.constrain == "llama"
    assert repr(model) == ("OpenAIModel(name='openai:m', endpoint='http://127.0.0.1:9/v1', api='chat', "
                           "transport='aiohttp')")


@pytest.mark.network
def test_a_declared_models_constrain_option_reaches_the_requests(server):
    from decomp import Session

    src = (f'model m = "openai:served" (base_url="{server.base_url}", api="completions", constrain="guided")\n'
           'model bad = "openai:served" (base_url="http://127.0.0.1:9/v1", constrain="grammar")\n'
           'handler ask = prompt(text="Q: ping?\\nA: pong\\n", model="m")\n'
           'program p(question) {\n    QS: [ask] #question\n}\nmain p\n')
    session = Session(default_model=None)
    session.load("m.decomp", text=src)
    model = session.model("m")
    assert model.constrain == "guided"
    complete(model, Request("yes", constraint=BY_REGEX))
    assert sent(server) == VLLM_REGEX
    with pytest.raises(ModelError, match="constrain must be one of .*not 'grammar' \\(a mode of the local model\\)"):
        session.model("bad")  # a mode of some backend: checked, then refused by this one when made


def test_a_declared_mode_no_backend_knows_is_a_positioned_check_error():
    from decomp import Session
    from decomp.dsl.errors import DecompError

    decl = 'model m = "openai:served" (base_url="http://127.0.0.1:9/v1", constrain="strict")\n'
    src = decl + 'handler ask = prompt(text="Q: a\\nA: b\\n", model="m")\nprogram p(q) {\n    QS: [ask] #q\n}\nmain p\n'
    with pytest.raises(DecompError) as caught:
        Session(default_model=None).load("m.decomp", text=src)
    column = decl.index('"strict"') + 1
    assert str(caught.value) == (f"m.decomp:1:{column}: option 'constrain' of a model must be one of "
                                        "auto, grammar, response_format, guided, llama, none, not 'strict'")
    assert column == 72


# --- a server that refuses a constraint field -------------------------------------------------------

@pytest.mark.network
@pytest.mark.parametrize("constrain, api, constraint, field", [
    ("auto", "chat", BY_SCHEMA, "response_format"),
    ("auto", "completions", BY_SCHEMA, "guided_json"),
    ("guided", "completions", BY_REGEX, "guided_regex"),
    ("llama", "chat", BY_SCHEMA, "json_schema"),
])
def test_a_refused_field_is_a_final_worded_error(transport, monkeypatch, constrain, api, constraint, field):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with MockOpenAIServer(reject_fields=(field,)) as server:
        model = make(server.base_url, api, constrain, transport)
        with pytest.raises(ModelError) as caught:
            complete(model, Request("yes", constraint=constraint))
        assert len(server.requests) == 1  # one attempt: nothing retried or looped
        endpoint = server.base_url
    error = caught.value
    assert not isinstance(error, TransientModelError)
    assert str(error) == (f"openai:m: {endpoint} refused the constraint field {field} "
                          f"(400: Unrecognized request argument supplied: {field}); set constrain=\"none\" on "
                          f"the model to decode without it, e.g. model m = \"openai:m\" (constrain=\"none\")")
    assert KEY not in str(error)


@pytest.mark.network
def test_openai_schema_complaint_names_the_field_not_the_prompt_length(transport):
    """OpenAI's refusal of a schema says "context=()": it is the constraint field's error, not
    "prompt too long"."""
    message = ("Invalid schema for response_format 'answer': In context=(), 'additionalProperties' is "
               "required to be supplied and to be false.")
    with MockOpenAIServer(reject_fields=("response_format",), reject_message=message) as server:
        with pytest.raises(ModelError) as caught:
            complete(make(server.base_url, "chat", "auto", transport), Request("yes", constraint=BY_SCHEMA))
    assert "refused the constraint field response_format" in str(caught.value)
    assert "prompt too long" not in str(caught.value) and 'constrain="none"' in str(caught.value)


@pytest.mark.network
def test_a_refusal_that_names_no_sent_field_stays_a_plain_bad_request(transport):
    """A 400 about a field the request did not carry, or without a constraint, is not blamed on one."""
    with MockOpenAIServer(reject_fields=("seed",), reject_message="Unrecognized request argument supplied: {field}"
                          " (not json_schema)") as server:
        request = Request("yes", seed=3, constraint=BY_SCHEMA)
        with pytest.raises(ModelError) as caught:
            complete(make(server.base_url, "chat", "auto", transport), request)
    assert "rejected the request (400: Unrecognized request argument supplied: seed" in str(caught.value)
    assert "constrain" not in str(caught.value)


@pytest.mark.network
def test_under_none_a_rejecting_server_answers(transport):
    fields = ("response_format", "guided_json", "guided_regex", "structured_outputs", "json_schema")
    with MockOpenAIServer(reject_fields=fields) as server:
        for api in ("chat", "completions"):
            out = complete(make(server.base_url, api, "none", transport), Request("Q\nyes", constraint=BY_SCHEMA))
            assert out.text == "yes"
        assert [json.dumps(sorted(body)) for body in server.requests] == [
            json.dumps(["max_tokens", "messages", "model", "n", "temperature"]),
            json.dumps(["max_tokens", "model", "n", "prompt", "temperature"])]


def test_the_constrain_mode_is_part_of_the_cache_identity(monkeypatch):
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.models.openai_backend import OpenAIModel

    def made(mode):
        return OpenAIModel("m", ModelSettings(base_url="http://127.0.0.1:9/v1", options=(("constrain", mode),)))

    assert made("auto").cache_identity() == "openai:m"
    assert made("none").cache_identity() != made("auto").cache_identity() != made("guided").cache_identity()
