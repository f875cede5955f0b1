"""Tests of decomp.runtime.testing.fake_file: a fake model's JSON file read with positions, and
every problem in it named with its file, line and column."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from decomp.runtime.models.base import ModelError
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.testing.fake_file import (FakeFileError, is_fake_file, looks_like_fake_file, parse_positioned,
                                              plain, read_fake_file)


def problems(tmp_path, text: str) -> list[tuple[int, int, str]]:
    path = tmp_path / "fake.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FakeFileError) as caught:
        read_fake_file(path)
    assert all(e.span.file == str(path) for e in caught.value.errors)
    return [(e.span.line, e.span.column, e.message) for e in caught.value.errors]


def test_a_good_file_reads_every_key(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text(json.dumps({"answers": ["a"], "mapping": {"k": "v"}, "script": {"q": ["[x] y", "[EOQ]"]},
                                "default": "d", "patterns": [{"match": "(x)", "answer": r"\1"},
                                                             {"match": "y", "steps": ["[EOQ]"]}]}))
    spec, raw = read_fake_file(path)
    assert (spec.answers, spec.mapping, spec.script, spec.default) == (["a"], {"k": "v"}, {"q": ["[x] y", "[EOQ]"]}, "d")
    assert [(p.regex.pattern, p.answer, p.steps) for p in spec.patterns] == [("(x)", r"\1", None),
                                                                              ("y", None, ("[EOQ]",))]
    assert raw == path.read_bytes()
    assert spec.counts() == "2 patterns, 1 script, 1 mapping key, 1 answer, a default"


def test_a_bad_regex_is_positioned_at_the_character_in_the_source(tmp_path):
    # the \" escapes before the error move it right in the source: the caret is on the "(" itself
    text = '{"patterns": [\n  {"match": "\\"a\\" (b", "answer": "x"}]}'
    [(line, column, message)] = problems(tmp_path, text)
    assert (line, message.split(":")[0]) == (2, "bad regular expression")
    assert text.split("\n")[1][column - 1] == "("


def test_a_template_naming_a_missing_group(tmp_path):
    text = '{"patterns": [{"match": "(?P<a>x)",\n "steps": ["ok \\\\g<a>", "bad \\\\g<b>"]}]}'
    assert problems(tmp_path, text) == [(2, 25, "bad template for the pattern '(?P<a>x)': unknown group name 'b'")]


def test_a_numbered_group_past_the_last_is_positioned_in_the_template(tmp_path):
    text = '{"patterns": [{"match": "(x)", "answer": "a \\\\2"}]}'
    [(line, column, message)] = problems(tmp_path, text)
    assert "invalid group reference 2" in message and text[column - 3:column] == "\\\\2"  # under the 2 of \\2


@pytest.mark.parametrize("text, where, message", [
    ('{"answers": ["a", 3]}', (1, 19), "an answer must be a string, not a number"),
    ('{\n  "mapping": {"k": ["v"]}}', (2, 20), "the mapping of 'k' must be a string, not a list"),
    ('{"script": {"q": "one line"}}', (1, 18), "the script of 'q' must be a JSON list, not a string"),
    ('{"script": {"q": [null]}}', (1, 19), "a script line must be a string, not null"),
    ('{"default": true}', (1, 13), "default must be a string, not true or false"),
    ('{"patterns": {"match": "x"}}', (1, 14), "patterns must be a JSON list, not an object"),
    ('{"patterns": ["x"]}', (1, 15), "a pattern is an object"),
    ('{"patterns": [{"answer": "x"}]}', (1, 15), 'a pattern needs "match"'),
    ('{"patterns": [{"match": "x"}]}', (1, 15), "a pattern needs exactly one of"),
    ('{"patterns": [{"match": 1, "answer": "x"}]}', (1, 25), '"match" must be a string, not a number'),
    ('{"patterns": [{"match": "x", "answer": "y", "why": 1}]}', (1, 45), "unknown key 'why' in a pattern"),
    ('{"answers": [],\n "defualt": "x"}', (2, 2), "unknown key 'defualt' in a fake model file"),
    ('{"default": "a", "default": "b"}', (1, 18), "a fake model file: the key 'default' is given twice"),
])
def test_each_wrong_shape_is_named_where_it_is(tmp_path, text, where, message):
    [(line, column, found)] = problems(tmp_path, text)
    assert (line, column) == where and found.startswith(message)


def test_every_problem_is_listed_in_order(tmp_path):
    found = problems(tmp_path, '{"answers": [1],\n "patterns": [{"match": "("  , "answer": "x"}],\n "x": 0}')
    assert [(line, column) for line, column, _ in found] == [(1, 14), (2, 26), (3, 2)]


def test_not_json_is_positioned_and_its_text_never_shown(tmp_path):
    path = tmp_path / "secret.json"
    path.write_text("API_KEY=sk-very-secret\n")
    with pytest.raises(FakeFileError) as caught:
        FakeModel.from_file(path)
    assert isinstance(caught.value, ModelError)
    assert str(caught.value).startswith(f"{path}:1:1: not JSON")
    assert "sk-very-secret" not in caught.value.format()


def test_a_json_object_of_other_keys_is_named_by_its_keys_and_not_shown(tmp_path):
    path = tmp_path / "credentials.json"
    path.write_text('{"token": "sk-very-secret"}')
    with pytest.raises(FakeFileError) as caught:
        FakeModel.from_file(path)
    assert "unknown key 'token'" in caught.value.format()
    assert "sk-very-secret" not in caught.value.format()


def test_a_fake_files_problems_show_its_line(tmp_path):
    path = tmp_path / "fake.json"
    path.write_text('{"answers": [1]}')
    with pytest.raises(FakeFileError) as caught:
        read_fake_file(path)
    assert caught.value.format().splitlines()[1:] == ['    {"answers": [1]}', "                 ^"]


def test_a_file_that_is_not_an_object(tmp_path):
    assert problems(tmp_path, '\n ["a"]') == [(2, 2, "a fake model file holds one JSON object")]


def test_a_missing_file(tmp_path):
    with pytest.raises(FakeFileError, match="cannot read the fake model file"):
        read_fake_file(tmp_path / "none.json")


def test_looks_like_fake_file():
    assert looks_like_fake_file('{"patterns": []}')
    assert not looks_like_fake_file('{"1": {"qa_pairs": []}}')
    assert not looks_like_fake_file("[1, 2]") and not looks_like_fake_file("not json")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(JSON, st.sampled_from([None, 2]))
def test_positions_parse_what_json_loads_parses(value, indent):
    text = json.dumps(value, indent=indent)
    node = parse_positioned(text)
    assert plain(node) == json.loads(text)
    assert json.loads(text[node.start:node.end]) == json.loads(text)


@pytest.mark.parametrize("name, text, claimed", [
    ("a.json", '{"answers": ["x"]}', True),        # a fake model file's key
    ("a.txt", '{"default": "x"}', True),
    ("a.json", '{"answers": ["x"],\n "default" "y"}', True),  # a .json file that is not JSON: read to say where
    ("a.json", "import os\n", True),
    ("a.json", '{"1": {"qa_pairs": []}}', False),  # JSON data of another kind
    ("a.json", '{"id": 1}\n{"id": 2}\n', False),   # JSON Lines
    ("a.json", "  \n", False),
    ("a.txt", "not json", False),
])
def test_which_files_the_fake_backend_claims(name, text, claimed):
    assert is_fake_file(name, text) is claimed
