"""Tests of the patterns of decomp.runtime.testing.fake.FakeModel: regular expressions over the
last question, templates with groups, decomposer steps, and where patterns come in the lookup."""
from __future__ import annotations

import asyncio

import pytest

from decomp.runtime.models.base import ModelError, Request
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.testing.fake_file import Pattern

FEWSHOT = 'Q: What are the words in "a b"?\nA: ["a", "b"]\n\nQ: {q}\nA:'
DECOMP = 'QC: example "x y"\nQS: [x] y\nA: 1\nQS: [EOQ]\n\nQC: {q}\n{history}QS:'
WORDS = {"match": r'words in "(?P<w>[^"]*)"', "answer": r'["\g<w>"]'}
STEPS = {"match": r'^Do (\w+) to "([^"]*)"', "steps": [r'[split] What are the words in "\2"?',
                                                      r"(foreach) [\1] #1", "[EOQ]"]}


def text(model: FakeModel, prompt: str) -> str:
    return asyncio.run(model.complete(Request(prompt))).text


def test_answer_template_expands_named_groups_of_the_last_question():
    model = FakeModel(patterns=[WORDS])
    assert text(model, FEWSHOT.format(q='What are the words in "x y z"?')) == '["x y z"]'


def test_numbered_groups_and_whole_match():
    model = FakeModel(patterns=[{"match": r"(\d+) plus (\d+)", "answer": r"\2+\1 (\g<0>)"}])
    assert text(model, "Q: What is 3 plus 4?\nA:") == "4+3 (3 plus 4)"


def test_pattern_is_searched_in_the_last_question_not_the_examples():
    model = FakeModel(patterns=[{"match": "a b", "answer": "hit"}], default="miss")
    assert text(model, FEWSHOT.format(q="nothing here")) == "miss"


def test_steps_follow_the_qs_lines_after_the_last_qc_with_a_leading_space():
    model = FakeModel(patterns=[STEPS])
    q = 'Do upper to "a b"'
    assert text(model, DECOMP.format(q=q, history="")) == ' [split] What are the words in "a b"?'
    history = 'QS: [split] What are the words in "a b"?\nA: ["a", "b"]\n'
    assert text(model, DECOMP.format(q=q, history=history)) == " (foreach) [upper] #1"
    history += 'QS: (foreach) [upper] #1\nA: ["A", "B"]\n'
    assert text(model, DECOMP.format(q=q, history=history)) == " [EOQ]"


def test_steps_serve_only_prompts_asking_for_a_qs_line():
    model = FakeModel(patterns=[STEPS], default="not a step")
    assert text(model, 'Q: Do upper to "a b"\nA:') == "not a step"


def test_exhausted_steps_fall_through_to_the_next_pattern_and_the_queue():
    short = {"match": "^Do", "steps": ["[only]"]}
    model = FakeModel(patterns=[short, {"match": "upper", "steps": ["[a]", "[second pattern]"]}],
                      answers=["queued"])
    prompt = DECOMP.format(q='Do upper to "a b"', history="QS: [only]\nA: 1\n")
    assert text(model, prompt) == " [second pattern]"
    prompt = DECOMP.format(q='Do upper to "a b"', history="QS: [only]\nA: 1\nQS: [b]\nA: 2\n")
    assert text(model, prompt) == "queued"


def test_patterns_are_tried_in_file_order():
    model = FakeModel(patterns=[{"match": "word", "answer": "first"}, {"match": "words", "answer": "second"}])
    assert text(model, "Q: the words\nA:") == "first"


def test_script_and_exact_mapping_come_before_patterns():
    model = FakeModel(script={"Do upper to \"a b\"": ["[scripted]"]}, patterns=[STEPS, WORDS],
                      mapping={'What are the words in "k"?': "mapped"})
    assert text(model, DECOMP.format(q='Do upper to "a b"', history="")) == " [scripted]"
    assert text(model, FEWSHOT.format(q='What are the words in "k"?')) == "mapped"
    assert text(model, FEWSHOT.format(q='What are the words in "m"?')) == '["m"]'


def test_patterns_come_before_mapping_substrings_and_the_queue():
    model = FakeModel(patterns=[WORDS], mapping={"words": "substring"}, answers=["queued"])
    assert text(model, FEWSHOT.format(q='What are the words in "p q"?')) == '["p q"]'
    assert text(model, "Q: some words\nA:") == "substring"
    assert list(model.queue) == ["queued"]


def test_no_pattern_matches_is_the_usual_error():
    with pytest.raises(ModelError, match="unmatched question"):
        text(FakeModel(patterns=[WORDS]), "Q: unmatched question\nA:")


@pytest.mark.parametrize("pattern, problem", [
    ({"match": "(unclosed", "answer": "x"}, "missing"),
    ({"match": "(a)", "answer": r"\2"}, "invalid group reference 2"),
    ({"match": "(?P<a>x)", "steps": [r"\g<b>"]}, "unknown group name 'b'"),
    ({"match": "x"}, "exactly one of"),
    ({"match": "x", "answer": "a", "steps": ["b"]}, "exactly one of"),
])
def test_bad_in_memory_patterns_are_refused_when_the_model_is_made(pattern, problem):
    with pytest.raises(Exception, match=problem):
        FakeModel(patterns=[pattern])


def test_a_verbose_pattern_ending_in_a_comment_is_checked_right():
    pattern = Pattern.make(r"(?x) (?P<n>\d+)  # a number", answer=r"\g<n>")
    assert text(FakeModel(patterns=[pattern]), "Q: 42\nA:") == "42"
    with pytest.raises(ValueError, match="unknown group name"):
        Pattern.make(r"(?x) (?P<n>\d+)  # a number", answer=r"\g<m>")


def test_patterns_are_part_of_the_cache_identity():
    one = FakeModel(patterns=[WORDS]).cache_identity()
    assert one == FakeModel(patterns=[dict(WORDS)]).cache_identity()
    assert one != FakeModel(patterns=[{**WORDS, "answer": r"\g<w>"}]).cache_identity()
    assert one != FakeModel().cache_identity()
