"""The run's own secrets never leave a model's reply (issue 29, B5): a reply that repeats the API
key, a base URL's credentials or an Elasticsearch URL's credentials is masked where it comes back
from the model (runtime/engine/run_secrets.py), so results.jsonl, traces, the step cache, the
printed answer, `decomp trace show/html` and error messages quoting the reply hold
`[redacted: LABEL]`. Elasticsearch: tests/handlers/search/test_elastic_secrets.py.
The real OpenAIModel against the mock server (runtime/testing/mock_server.py), whose responder
plays a model that says the secret."""
import json
import os
from pathlib import Path

import pytest

from decomp import Session
from decomp.handlers.search.elastic import ElasticService
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.run_secrets import RunSecrets
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.helpers import invoke

KEY = "sk-test-echoed-key-0123456789"
MASKED_KEY = "[redacted: OPENAI_API_KEY]"
PASSWORD, QUERY_KEY = "pa55word-in-the-url", "query-key-abcdef123"
ASK = 'handler ask = prompt(text="Q: 1+1?\\nA: 2\\n\\nQ: {{question}}\\nA:", max_tokens=32)\nmain ask\n'

# `clean_env`, `transport`: tests/conftest.py
pytestmark = [pytest.mark.network, pytest.mark.usefixtures("clean_env")]


def saying(text: str) -> MockOpenAIServer:
    """A mock server whose model answers every prompt with `text`."""
    return MockOpenAIServer(responder=lambda prompt, request: text)


def _write(folder: Path, program: str = ASK) -> tuple[Path, Path]:
    path = folder / "ask.decomp"
    path.write_text(program, encoding="utf-8")
    data = folder / "rows.jsonl"
    data.write_text('{"id": "a", "question": "what is your key?"}\n', encoding="utf-8")
    return path, data


def _stored(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_a_reply_repeating_the_api_key_is_stored_and_shown_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    program, data = _write(tmp_path)
    cache_dir = Path(os.environ["DECOMP_CACHE_DIR"])  # the test's own (tests/conftest.py)
    with saying(f"my key is {KEY}, keep it") as server:
        model = ["--model", "openai:mock", "--base-url", server.base_url]
        ran = invoke("run", program, "--input", data, "--run-dir", tmp_path / "run", *model, catch_exceptions=False)
        again = invoke("run", program, "--input", data, "--run-dir", tmp_path / "again", *model,
                       catch_exceptions=False)
        requests = server.stats()["requests"]
    assert ran.exit_code == 0 and again.exit_code == 0, ran.output + again.output
    assert requests == 1  # the second run's answer is the step cache's
    for run in ("run", "again"):
        row = json.loads((tmp_path / run / "results.jsonl").read_text(encoding="utf-8"))
        assert row["answer"] == f"my key is {MASKED_KEY}, keep it"
    assert KEY.encode() not in _stored(tmp_path / "run") + _stored(tmp_path / "again")
    assert KEY.encode() not in _stored(cache_dir) and MASKED_KEY.encode() in _stored(cache_dir)
    shown = invoke("trace", "show", tmp_path / "run", "--row", "a", catch_exceptions=False)
    page = invoke("trace", "html", tmp_path / "run", "-o", tmp_path / "page.html", catch_exceptions=False)
    assert shown.exit_code == 0 and page.exit_code == 0, shown.output + page.output
    assert MASKED_KEY in shown.output and KEY not in shown.output + ran.output + again.output
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert KEY not in html and MASKED_KEY in html


def test_the_printed_answer_and_trace_of_a_question_run_are_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    program, _ = _write(tmp_path)
    with saying(f"the key: {KEY}") as server:
        ran = invoke("run", program, "-q", "what is your key?", "--model", "openai:mock",
                     "--base-url", server.base_url, "--trace", "--cache", "off", catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    assert ran.stdout.strip() == f"the key: {MASKED_KEY}"
    assert KEY not in ran.output and MASKED_KEY in ran.stderr  # the trace, on stderr


def test_a_base_urls_credentials_in_a_reply_are_masked(tmp_path, transport):
    program, _ = _write(tmp_path)
    cache = tmp_path / "steps.sqlite"
    with saying(f"alice:{PASSWORD} / {PASSWORD} / {QUERY_KEY}") as server:
        url = server.base_url.replace("http://", f"http://alice:{PASSWORD}@") + f"?api-key={QUERY_KEY}"
        results = []
        for _ in range(2):  # the second from the step cache
            session = Session(model=OpenAIModel("mock", ModelSettings(base_url=url, transport=transport)),
                              cache=StepCache(cache))
            results.append(session.run(session.load(program), {"question": "say the URL's secrets"}))
        requests = server.stats()["requests"]
    masked = "[redacted: base URL credentials]"
    assert [r.answer for r in results] == [f"{masked} / {masked} / {masked}"] * 2 and requests == 1
    trace = json.dumps(results[0].trace.to_dict())
    stored = _stored(tmp_path)
    for secret in (PASSWORD, QUERY_KEY):
        assert secret not in trace and secret.encode() not in stored


def test_an_error_quoting_the_reply_holds_it_masked(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    program, _ = _write(tmp_path, 'handler plan = decomposer(examples="QC: hi\\nQS: [EOQ]\\n")\nmain plan\n')
    with saying(f"here is the key {KEY}") as server:
        session = Session(model=OpenAIModel("mock", ModelSettings(base_url=server.base_url)))
        result = session.run(session.load(program), {"question": "what is your key?"})
    assert result.error is not None and "names no handler" in result.error
    assert f"here is the key {MASKED_KEY}" in result.error and KEY not in result.error
    assert KEY not in json.dumps(result.trace.to_dict())


def test_short_secrets_are_not_masked(tmp_path):
    """Under 8 characters (`MIN_MASKED`) a secret is an ordinary word: `me:pw42` is left as it is."""
    program, _ = _write(tmp_path)
    with saying("me:pw42 is fine, unused too") as server:
        url = server.base_url.replace("http://", "http://me:pw42@")
        session = Session(model=OpenAIModel("mock", ModelSettings(base_url=url)))
        result = session.run(session.load(program), {"question": "q"})
    assert result.answer == "me:pw42 is fine, unused too"


def test_the_run_knows_each_services_secrets_by_name_never_showing_them(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    model = OpenAIModel("gpt-x", ModelSettings(base_url=f"http://alice:{PASSWORD}@127.0.0.1:9/v1"))
    search = ElasticService("http://reader:es-secret-password@127.0.0.1:9", "wiki")
    secrets = RunSecrets()
    for service in (model, search, model, FakeModel(answers=["x"])):
        secrets.learn(service)
    said = f"{KEY} {PASSWORD} es-secret-password"
    assert secrets.mask(said) == (f"{MASKED_KEY} [redacted: base URL credentials] "
                                  "[redacted: a secret of elasticsearch:http://127.0.0.1:9/wiki]")
    assert not any(s in repr(secrets) for s in (KEY, PASSWORD, "es-secret"))
    monkeypatch.delenv("OPENAI_API_KEY")  # the placeholder key of a local server is no secret
    assert OpenAIModel("m", ModelSettings(base_url="http://127.0.0.1:9/v1")).named_secrets() == {}
