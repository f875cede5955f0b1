"""Tests of the repair rule (decomp.dsl.repair.fit): what chat models wrap around JSON is
stripped, and what still does not fit is a worded problem."""
from __future__ import annotations

import pytest

from decomp.dsl.repair import MAX_REPAIR_CHARS, fit
from decomp.dsl.answer_types import parse_type

LIST = parse_type("list[str]")


@pytest.mark.parametrize("text", [
    '["a", "b"]',
    '```json\n["a", "b"]\n```',
    '```\n["a", "b"]\n```',
    'Here is the list:\n```json\n["a", "b"]\n```\nLet me know if you need more.',
    'Sure! The words are ["a", "b"].',
    '["a", "b"]\n\nNote: I kept the original order.',
    'The answer: ["a", "b"] (2 items)',
])
def test_text_around_a_json_value_is_stripped(text):
    assert fit(LIST, text) == (["a", "b"], None)


def test_the_first_value_that_fits_wins():
    assert fit(LIST, 'Not [1, 2] but ["x"] and ["y"]') == (["1", "2"], None)  # numbers read as text
    assert fit(parse_type("{a: int}"), 'see [1] or {"a": 2}') == ({"a": 2}, None)


def test_what_does_not_fit_names_the_type_and_the_text():
    value, problem = fit(LIST, "I cannot answer that.")
    assert value == "I cannot answer that."
    assert problem == "the answer 'I cannot answer that.' is not list[str]"
    _, nested = fit(parse_type("list[int]"), [1, "x"])
    assert "at [1]" in nested and "list[int]" in nested


def test_a_value_of_the_type_is_kept_as_it_is():
    assert fit(parse_type("str"), "hello") == ("hello", None)
    assert fit(parse_type("any"), "whatever") == ("whatever", None)


def test_words_are_not_read_as_literals():
    # "often" holds "f", "nothing" holds "n": only a value standing on its own is read
    assert fit(parse_type("bool"), "often nothing")[1] is not None


def test_long_text_is_not_searched():
    text = "x" * (MAX_REPAIR_CHARS + 1) + '["a"]'
    assert fit(LIST, text)[1] is not None


@pytest.mark.parametrize("text", [
    "['a', 'b']", "Sure: ['a', 'b'] is the list.", "```python\n('a', 'b')\n```",
])
def test_python_literals_are_read_without_evaluating_anything(text):
    assert fit(LIST, text) == (["a", "b"], None)


@pytest.mark.parametrize("text", [
    '["a", "b', "{'a', 'b'}", "[__import__('os').getcwd()]", "- a\n- b", "[b'a']",
])
def test_nothing_is_guessed(text):
    assert fit(LIST, text)[1] is not None
