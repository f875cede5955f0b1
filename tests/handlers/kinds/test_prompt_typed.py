"""Tests of typed prompts: the constraint sent, repair of chat-style replies, the failed
outcome with its reason, retries with the error shown, and the majority vote."""
from __future__ import annotations

import json

import decomp.handlers.kinds  # noqa: F401
from decomp.dsl.errors import DecompError
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.engine.session import Session

import pytest

QA = 'Q: What are the words in "a b"?\nA: ["a", "b"]\n'


def run(tmp_path, decl: str, model: FakeModel, question: str = 'What are the words in "x y"?'):
    (tmp_path / "qa.txt").write_text(QA, encoding="utf-8")
    src = f"{decl}\nprogram p(question) {{\n    QS: [h] #question\n}}\nmain p\n"
    session = Session(model=model)
    return session.run(session.load(tmp_path / "main.decomp", text=src), {"question": question})


def test_a_typed_answer_is_decoded_under_the_types_schema(tmp_path):
    model = FakeModel(answers=['["x", "y"]'])
    result = run(tmp_path, 'handler h = prompt(file="qa.txt", returns=list[str])', model)
    assert result.answer == ["x", "y"] and not result.failed
    constraint = model.history[0].constraint
    assert json.loads(constraint.schema) == {"type": "array", "items": {"type": "string"}}


def test_choices_are_constrained_as_written_in_examples(tmp_path):
    model = FakeModel(answers=["Yes"])
    result = run(tmp_path, 'handler h = prompt(text="", returns=one_of("yes", "no"))', model)
    assert result.answer == "yes"
    assert model.history[0].constraint.regex == "(?:yes|no)|\"(?:yes|no)\""


def test_an_untyped_prompt_sends_no_constraint(tmp_path):
    model = FakeModel(answers=['["x"]'])
    run(tmp_path, 'handler h = prompt(file="qa.txt")', model)
    assert model.history[0].constraint is None


def test_a_fenced_reply_is_repaired(tmp_path):
    model = FakeModel(answers=['Sure! Here it is:\n```json\n["x", "y"]\n```'])
    result = run(tmp_path, 'handler h = prompt(file="qa.txt", returns=list[str], stop=[])', model)
    assert result.answer == ["x", "y"]


def test_an_answer_that_does_not_fit_is_a_failed_outcome_with_its_reason(tmp_path):
    model = FakeModel(answers=["I do not know"])
    result = run(tmp_path, 'handler h = prompt(file="qa.txt", returns=list[str])', model)
    assert result.error is None and result.failed and result.answer == "I do not know"
    call = next(n for n in result.trace.walk() if n.kind == "call")
    assert call.facts["reason"] == "the answer 'I do not know' is not list[str]"


def test_retries_ask_again_with_the_error_shown(tmp_path):
    model = FakeModel(answers=["no idea", '["x", "y"]'])
    result = run(tmp_path, 'handler h = prompt(file="qa.txt", returns=list[str], retries=2)', model)
    assert result.answer == ["x", "y"] and len(model.history) == 2
    again = model.prompts[1]
    assert again.startswith(model.prompts[0] + " no idea\n(Not accepted: the answer 'no idea' is not list[str].")
    assert again.endswith("\nA:")


def test_retries_run_out_as_a_failed_outcome(tmp_path):
    model = FakeModel(answers=["a", "b"])
    result = run(tmp_path, 'handler h = prompt(file="qa.txt", returns=list[str], retries=1)', model)
    assert result.failed and result.answer == "b" and len(model.history) == 2


def test_majority_vote_among_the_answers_that_fit(tmp_path):
    model = FakeModel(answers=['["a"]', "junk", '["b"]', '["b"]', '["a"]'])
    decl = 'handler h = prompt(file="qa.txt", returns=list[str], n=5, vote="majority", temperature=0.7)'
    result = run(tmp_path, decl, model)
    assert result.answer == ["a"]  # a tie of two: the one sampled first


def test_majority_vote_takes_the_most_frequent(tmp_path):
    model = FakeModel(answers=['["a"]', '["b"]', '["b"]'])
    decl = 'handler h = prompt(file="qa.txt", returns=list[str], n=3, vote="majority", temperature=0.7)'
    assert run(tmp_path, decl, model).answer == ["b"]


@pytest.mark.parametrize("decl, words", [
    ('handler h = prompt(text="", vote="majority")', "vote needs n > 1"),
    ('handler h = prompt(text="", retries=2)', "retries needs a declared type"),
    ('handler h = prompt(text="", returns=str, n=3)', "need a vote"),
])
def test_typing_options_are_checked(tmp_path, decl, words):
    with pytest.raises(DecompError, match=words):
        Session(model=FakeModel()).load(tmp_path / "x.decomp", text=decl + "\n")


def test_the_constraint_is_part_of_the_sample_cache_key(tmp_path):
    from decomp.runtime.models.base import Request
    from decomp.dsl.answer_types import Constraint

    model = FakeModel()
    key = Session._sample_key
    plain = key(model, Request("p"), 0)
    assert key(model, Request("p", constraint=Constraint(regex="a|b")), 0) != plain
    assert key(model, Request("p", constraint=Constraint(regex="a|b")), 0) != \
        key(model, Request("p", constraint=Constraint(regex="a|c")), 0)
