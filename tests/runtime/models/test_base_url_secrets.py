"""Credentials written into a base URL (user-info, a query-string key) reach the server but never
a model's endpoint name, repr or the secrets it asks the engine to scrub from messages."""
import pytest

from decomp.runtime.models.base import ModelSettings
from decomp.runtime.models.openai_backend import OpenAIModel

URL = "https://alice:pa55word@llm.example/v1?api-key=sk-query-secret"


@pytest.mark.parametrize("transport", ["aiohttp", "openai"])
def test_credentials_in_the_base_url_are_redacted_and_scrubbed(transport, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key")
    model = OpenAIModel("m", ModelSettings(base_url=URL, transport=transport))
    shown = f"{model.endpoint} {model!r} {model._transport!r}"
    for secret in ("alice", "pa55word", "sk-query-secret", "sk-env-key"):
        assert secret not in shown, shown
    assert "llm.example" in model.endpoint
    assert {"sk-env-key", "pa55word", "sk-query-secret"} <= set(model.secrets())
