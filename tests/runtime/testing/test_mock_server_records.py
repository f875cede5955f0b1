"""The mock server's record of what it received (`server.requests`) and its refusal of named
request members (`reject_fields`), over plain HTTP (urllib), in process and out."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from decomp.runtime.testing.mock_server import MockOpenAIServer, _parser, start_subprocess, stop_subprocess

SCHEMA = {"type": "array", "items": {"type": "string"}}


def post(base_url: str, path: str, payload: dict | None = None) -> tuple[int, None, bytes]:
    """(status, None, body bytes) of one POST; error statuses are returned, not raised."""
    req = urllib.request.Request(base_url + path, data=json.dumps(payload or {}).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, None, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, None, err.read()


def root(base_url: str) -> str:
    return base_url.removesuffix("/v1")


@pytest.mark.network
def test_every_request_body_is_recorded_in_order():
    with MockOpenAIServer(responder=lambda prompt, req: "[]") as server:
        first = {"model": "m", "prompt": "a", "guided_json": SCHEMA}
        second = {"model": "m", "messages": [{"role": "user", "content": "b"}],
                  "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}}
        assert post(server.base_url, "/completions", first)[0] == 200
        assert post(server.base_url, "/chat/completions", second)[0] == 200
        assert post(server.base_url, "/completions", {"model": "fault-500", "prompt": "c"})[0] == 500
        assert server.requests == [first, second, {"model": "fault-500", "prompt": "c"}]
        server.requests.clear()  # a copy: the record is the server's
        assert len(server.requests) == 3
        assert post(root(server.base_url), "/reset-stats")[0] == 200
        assert server.requests == []


@pytest.mark.network
def test_the_record_keeps_the_last_requests_only():
    with MockOpenAIServer(record=2) as kept, MockOpenAIServer(record=0) as none:
        for prompt in ("a", "b", "c"):
            post(kept.base_url, "/completions", {"model": "m", "prompt": prompt})
            post(none.base_url, "/completions", {"model": "m", "prompt": prompt})
        assert [body["prompt"] for body in kept.requests] == ["b", "c"]
        assert none.requests == [] and none.stats()["requests"] == 3


@pytest.mark.network
def test_constraint_fields_are_answered_by_the_responder():
    seen = []
    with MockOpenAIServer(responder=lambda prompt, req: seen.append(req) or '["a"]') as server:
        status, _, body = post(server.base_url, "/completions", {"model": "m", "prompt": "p", "json_schema": SCHEMA})
    assert status == 200 and json.loads(body)["choices"][0]["text"] == '["a"]'
    assert seen[0]["json_schema"] == SCHEMA


@pytest.mark.network
def test_a_rejected_field_is_a_400_in_openais_words():
    with MockOpenAIServer(reject_fields=("guided_json", "json_schema")) as server:
        status, _, body = post(server.base_url, "/completions", {"model": "m", "prompt": "p", "json_schema": {}})
        assert status == 400
        assert json.loads(body)["error"] == {"message": "Unrecognized request argument supplied: json_schema",
                                             "type": "invalid_request_error", "param": None, "code": None}
        assert post(server.base_url, "/completions", {"model": "m", "prompt": "p"})[0] == 200
        assert len(server.requests) == 2
    with MockOpenAIServer(reject_fields=("response_format",), reject_message="no {field} here") as server:
        _, _, body = post(server.base_url, "/chat/completions", {"model": "m", "messages": [], "response_format": {}})
    assert json.loads(body)["error"]["message"] == "no response_format here"


def test_cli_parses_rejected_fields():
    args = _parser().parse_args(["--reject-field", "guided_json", "--reject-field", "response_format"])
    assert args.reject_fields == ["guided_json", "response_format"]
    assert _parser().parse_args([]).reject_fields == []


@pytest.mark.slow
@pytest.mark.network
def test_a_subprocess_rejects_the_fields_it_is_given():
    proc, base_url = start_subprocess(reject_fields=["guided_regex"])
    try:
        assert post(base_url, "/completions", {"model": "m", "prompt": "p", "guided_regex": "a"})[0] == 400
        assert post(base_url, "/completions", {"model": "m", "prompt": "p"})[0] == 200
    finally:
        stop_subprocess(proc)
