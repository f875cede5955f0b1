"""Tests of the type language (decomp.dsl.answer_types): reading, schemas, coercion, the static
relation, inference, and how each type constrains decoding."""
from __future__ import annotations

import json

import pytest

from decomp.dsl.answer_types import (ANY, Bool, Float, Int, ListOf, Obj, OneOf, Pattern, Str, TypeProblem, accepts, decoding,
                              infer, parse_type)


@pytest.mark.parametrize("text, expected", [
    ("str", Str()), ("int", Int()), ("float", Float()), ("bool", Bool()), ("any", ANY),
    ("list[str]", ListOf(Str())), ("list[list[int]]", ListOf(ListOf(Int()))),
    ("{name: str, year: int}", Obj((("name", Str()), ("year", Int())))),
    ('one_of("yes", "no")', OneOf(("yes", "no"))), ("one_of(1, 2.5, true)", OneOf((1, 2.5, True))),
    (r'pattern(r"\d{4}")', Pattern(r"\d{4}")),
])
def test_types_read_and_print_back(text, expected):
    t = parse_type(text)
    assert t == expected
    assert parse_type(t.text) == t  # the canonical text reads back as the same type


@pytest.mark.parametrize("text, words", [
    ("strr", "unknown type 'strr'"), ("dict[str]", "list[T] is the only one"), ("one_of()", "one or more"),
    ('one_of("a", "a")', "different"), ('pattern("(")', "does not compile"), ("list[", "cannot read the type"),
    ("{a: int, a: str}", "appears twice"), ('schema("x.json")', "read only from a program's folder"),
])
def test_bad_types_are_worded(text, words):
    with pytest.raises(TypeProblem, match=words.replace("[", r"\[").replace("(", r"\(")):
        parse_type(text)


def test_schema_file_is_read_through_the_resolver(tmp_path):
    (tmp_path / "person.json").write_text('{"type": "object", "required": ["name"]}')
    t = parse_type('schema("person.json")', lambda p: tmp_path / p)
    assert t.schema() == {"type": "object", "required": ["name"]}
    assert t.problem({"name": "Ada"}) is None and "name" in t.problem({})
    (tmp_path / "bad.json").write_text('{"type": 3}')
    with pytest.raises(TypeProblem, match="not a JSON Schema"):
        parse_type('schema("bad.json")', lambda p: tmp_path / p)


@pytest.mark.parametrize("text, value, fits", [
    ("list[str]", ["a", "b"], True), ("list[str]", "a", False), ("int", 3, True), ("int", 3.5, False),
    ("float", 3, True), ("bool", True, True), ("{a: int}", {"a": 1}, True), ("{a: int}", {"a": 1, "b": 2}, False),
    ('one_of("yes", "no")', "yes", True), ('one_of("yes", "no")', "maybe", False),
    (r'pattern("\\d{4}")', "1990", True), (r'pattern("\\d{4}")', "19900", False),
])
def test_problem_says_whether_a_value_fits(text, value, fits):
    assert (parse_type(text).problem(value) is None) is fits


def test_coercions_lose_nothing():
    assert Str().coerce(1990) == "1990" and Str().coerce(True) == "true"
    assert Bool().coerce(" Yes ") is True and Bool().coerce("no") is False
    assert OneOf(("yes", "no")).coerce("YES") == "yes"
    assert Int().coerce(3.0) == 3 and Int().coerce(3.5) == 3.5


@pytest.mark.parametrize("want, have, ok", [
    ("any", "list[str]", True), ("list[str]", "any", True), ("str", "int", True), ("int", "str", False),
    ("float", "int", True), ("int", "float", False), ("list[str]", "list[int]", True), ("list[int]", "list[str]", False),
    ("list[str]", "str", False), ('one_of("a", "b")', 'one_of("a")', True), ('one_of("a")', 'one_of("a", "b")', False),
    ("{a: int}", "{a: int, b: str}", True), ("{a: int, b: str}", "{a: int}", False),
    ("bool", 'one_of("yes", "no")', True),
])
def test_accepts_is_the_static_relation(want, have, ok):
    assert accepts(parse_type(want), parse_type(have)) is ok


@pytest.mark.parametrize("values, expected", [
    ([["a"], ["b", "c"]], "list[str]"), ([["a"], []], "list[str]"), ([[], []], "list[any]"), ([1, 2], "int"),
    ([1, 2.5], "float"), (["x", 1], "any"), (["Paris", "Rome"], "any"), (["Paris", ["a"]], "any"), ([], "any"), ([True], "bool"),
    ([{"a": 1}], "any"),
])
def test_infer_from_example_answers(values, expected):
    assert infer(values).text == expected


def test_decoding_writes_answers_as_examples_do():
    assert decoding(Str()) is None and decoding(ANY) is None
    assert decoding(OneOf(("yes", "no"))) == ("regex", "(?:yes|no)|\"(?:yes|no)\"")
    assert decoding(Pattern(r"\d+")) == ("regex", r'(?:\d+)|"(?:\d+)"')
    kind, schema = decoding(ListOf(Str()))
    assert kind == "schema" and json.loads(schema) == {"type": "array", "items": {"type": "string"}}


def test_a_catastrophic_pattern_fails_the_answer_instead_of_hanging():
    import time

    t = parse_type('pattern("(a|aa)+")')
    started = time.monotonic()
    problem = t.problem("a" * 40 + "!")
    assert "took over 1 s" in problem and time.monotonic() - started < 10
    assert t.problem("aaa") is None  # (a|aa)+ backtracks exponentially on a non-match


@pytest.mark.parametrize("text", ["str", "int", "float", "bool", "list[str]", "list[list[int]]", 'one_of("a", 1, true)',
                                  "list[any]"])
def test_the_quick_yes_never_disagrees_with_jsonschema(text):
    from decomp.dsl.answer_types import _validation_problem

    t = parse_type(text)
    values = ["a", "", 1, 0, 1.5, 2.0, True, False, None, [], ["a"], ["a", 1], [[1], [2]], [[1], ["x"]], {"a": 1},
              [True], [1.0]]
    for value in values:
        if t.plainly_fits(value):
            assert _validation_problem(t.schema_text, value) is None, (text, value)
