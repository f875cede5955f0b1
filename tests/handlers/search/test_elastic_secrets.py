"""An Elasticsearch URL's credentials are secrets of the run (issue 29, B5): once a row has
searched the index, a model reply repeating the URL's password is masked like the API key
(runtime/engine/run_secrets.py). The retrieve kind on osmem-server (search_fixtures), then the real
OpenAIModel against the mock server, whose model says the password."""
import json

import pytest

from decomp import Session
from decomp.handlers.search.corpus import read_corpus
from decomp.handlers.search.elastic import build_elastic
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.models.openai_backend import OpenAIModel
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.handlers.search.search_fixtures import corpus, index_name, opensearch_url  # noqa: F401

pytestmark = [pytest.mark.network, pytest.mark.usefixtures("clean_env")]

PASSWORD = "es-secret-password-42"


def test_a_reply_repeating_the_search_servers_password_is_masked(opensearch_url, index_name, corpus,
                                                                  tmp_path, monkeypatch):
    build_elastic(read_corpus(corpus), opensearch_url, index_name, server="opensearch")
    url = opensearch_url.replace("http://", f"http://reader:{PASSWORD}@")
    monkeypatch.setenv("TEST_ES_URL", url)
    program = tmp_path / "rag.decomp"
    program.write_text(f'''
handler retrieve = retrieve(backend="elasticsearch", url="$TEST_ES_URL", index_name="{index_name}",
                            server="opensearch", k=1)
handler read = prompt(text="Context: {{{{question}}}}\\nA:", max_tokens=32)
program rag(question) {{
    QS: [retrieve] #question
    QS: [read] #1
}}
main rag
''', encoding="utf-8")
    with MockOpenAIServer(responder=lambda prompt, request: f"the password is {PASSWORD}") as server:
        session = Session(model=OpenAIModel("mock", ModelSettings(base_url=server.base_url)),
                          cache=StepCache(tmp_path / "steps.sqlite"))
        result = session.run(session.load(program), {"question": "Who founded Brisk?"})
    assert result.error is None, result.error
    name = opensearch_url.rstrip("/") + "/" + index_name
    assert result.answer == f"the password is [redacted: a secret of elasticsearch:{name}]"
    assert PASSWORD not in json.dumps(result.trace.to_dict())
    assert PASSWORD.encode() not in b"".join(p.read_bytes() for p in tmp_path.glob("steps.sqlite*"))
