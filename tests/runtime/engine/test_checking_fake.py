"""Tests of `decomp check FILE.json` on a fake model file (decomp.runtime.engine.checking.check_file
and the CLI command): ok with what it holds counted, or every problem positioned."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.dsl.errors import DecompError
from decomp.runtime.cli import main
from decomp.runtime.engine.checking import check_file
from decomp.runtime.testing.fake_file import FakeFileError

GOOD = {"patterns": [{"match": r"(\d+)", "answer": r"\1"}], "script": {"q": ["[EOQ]"]}, "default": "?"}


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_check_file_reads_a_fake_model_file(tmp_path):
    checked = check_file(write(tmp_path, "fake.json", json.dumps(GOOD)))
    assert checked.module is None and checked.fewshot is None
    assert checked.fake.summary() == {"patterns": 1, "scripts": 1, "mapping": 0, "answers": 0, "default": True}


def test_check_file_raises_every_problem_of_a_fake_file(tmp_path):
    path = write(tmp_path, "fake.json", '{"patterns": [{"match": "(", "answer": "x"}],\n "answers": [1]}')
    with pytest.raises(FakeFileError) as caught:
        check_file(path)
    assert [(e.span.line, e.span.column) for e in caught.value.errors] == [(1, 26), (2, 14)]


def test_a_json_file_that_is_not_json_is_checked_as_a_fake_file(tmp_path):
    with pytest.raises(FakeFileError, match=r"fake.json:2:\d+: not JSON"):
        check_file(write(tmp_path, "fake.json", '{"answers": ["a"],\n "default" "x"}'))


def test_other_json_is_still_refused_as_data(tmp_path):
    with pytest.raises(DecompError, match="looks like JSON data"):
        check_file(write(tmp_path, "data.json", '{"1": {"qa_pairs": []}}'))


def test_the_cli_prints_ok_with_the_counts(tmp_path):
    path = write(tmp_path, "fake.json", json.dumps(GOOD))
    ran = CliRunner().invoke(main, ["check", str(path)])
    assert ran.exit_code == 0, ran.output
    assert ran.output == f"{path}: ok (fake model file: 1 pattern, 1 script, 0 mapping keys, 0 answers, a default)\n"
    ran = CliRunner().invoke(main, ["check", "--json", str(path)])
    assert json.loads(ran.output) == {"fake_model": check_file(path).fake.summary()}


def test_the_cli_prints_each_problem_with_its_line_and_exits_1(tmp_path):
    path = write(tmp_path, "fake.json", '{"patterns": [\n  {"match": "(?P<n>\\\\d+)", "answer": "\\\\g<m>"}]}')
    ran = CliRunner().invoke(main, ["check", str(path)])
    assert ran.exit_code == 1
    lines = ran.output.splitlines()
    assert lines[0] == f"{path}:2:38: bad template for the pattern '(?P<n>\\\\d+)': unknown group name 'm'"
    assert lines[1] == '      {"match": "(?P<n>\\\\d+)", "answer": "\\\\g<m>"}]}'
    assert lines[3] == "    expected a group of the regular expression: \\1, \\g<n>"
