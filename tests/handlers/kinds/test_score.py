"""Kind `score`: log-likelihood of the sub-query under a model, through the session's cache."""
import pytest

from decomp import FakeModel, Session
from decomp.runtime.engine.cache import StepCache

SRC = '''handler ll = score(prefix="Steps for {{{{ task }}}}:\\n", per_token={per_token})
program p(question, task) {{
    QS: [ll] #question
}}
main p
'''


@pytest.mark.parametrize("per_token, expected", [("false", -3.0), ("true", -1.5)])
def test_score_sums_or_averages_token_logprobs(per_token, expected):
    seen = []
    model = FakeModel(scorer=lambda prompt, text: seen.append((prompt, text)) or -3.0)
    session = Session(model=model)
    module = session.load("s.decomp", text=SRC.format(per_token=per_token))
    result = session.run(module, {"question": "boil water", "task": "tea"})
    assert result.error is None and result.answer == expected
    assert seen == [("Steps for tea:\n", "boil water")]


def test_scores_are_cached(tmp_path):
    model = FakeModel()
    session = Session(model=model, cache=StepCache(tmp_path / "c.sqlite"))
    module = session.load("s.decomp", text=SRC.format(per_token="false"))
    first = session.run(module, {"question": "a b c d", "task": "x"})
    second = session.run(module, {"question": "a b c d", "task": "x"})
    assert first.answer == second.answer == -2.0
    assert len(model.history) == 1 and second.usage.cache_hits == 1


def test_a_model_without_scores_is_a_clean_row_error():
    from decomp.runtime.models.base import Completion, Model

    class NoScores(Model):
        name = endpoint = "plain"

        async def complete(self, request):
            return Completion(("x",))

    session = Session(model=NoScores())
    result = session.run(session.load("s.decomp", text=SRC.format(per_token="false")), {"question": "a", "task": "t"})
    assert result.answer is None and "cannot score" in result.error
