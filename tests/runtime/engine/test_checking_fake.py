"""Tests of `decomp check FILE.json` on a fake model file (decomp.runtime.engine.checking.check_file
and the CLI command): the `fake:` backend claims it (`Backend.check_file`, asked through the
registry as every backend is); ok with what it holds counted, or every problem positioned."""
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
    assert checked.model_file.summary == {"patterns": 1, "scripts": 1, "mapping": 0, "answers": 0, "default": True}
    assert (checked.model_file.what, checked.model_file.key) == ("fake model file", "fake_model")


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
    assert json.loads(ran.output) == {"fake_model": check_file(path).model_file.summary}


def test_the_cli_prints_each_problem_with_its_line_and_exits_1(tmp_path):
    path = write(tmp_path, "fake.json", '{"patterns": [\n  {"match": "(?P<n>\\\\d+)", "answer": "\\\\g<m>"}]}')
    ran = CliRunner().invoke(main, ["check", str(path)])
    assert ran.exit_code == 1
    lines = ran.output.splitlines()
    assert lines[0] == f"{path}:2:38: bad template for the pattern '(?P<n>\\\\d+)': unknown group name 'm'"
    assert lines[1] == '      {"match": "(?P<n>\\\\d+)", "answer": "\\\\g<m>"}]}'
    assert lines[3] == "    expected a group of the regular expression: \\1, \\g<n>"


def test_any_registered_backend_may_claim_a_file_of_its_own(tmp_path):
    from decomp.handlers.plugins import builtin_registry
    from decomp.runtime.engine.session import Session
    from decomp.runtime.models.base import Backend, ModelFile

    class Cards(Backend):
        def __call__(self, name, settings=None):  # pragma: no cover - not called here
            raise NotImplementedError

        def check_file(self, path, text):
            if path.suffix != ".cards":
                return None
            return ModelFile("card deck", "cards", {"cards": len(text.split())}, f"{len(text.split())} cards")

    registry = builtin_registry()
    registry.add_model_backend("cards", Cards(), owner="test")
    deck = write(tmp_path, "deck.cards", "ace king queen")
    checked = check_file(deck, Session(registry=registry))
    assert checked.model_file == ModelFile("card deck", "cards", {"cards": 3}, "3 cards")
    fake = write(tmp_path, "fake.json", json.dumps(GOOD))
    assert check_file(fake, Session(registry=registry)).model_file.what == "fake model file"
    del registry.model_backends["fake"]  # no backend claims it: the check goes on, and refuses JSON data
    with pytest.raises(DecompError, match="looks like JSON data"):
        check_file(fake, Session(registry=registry))
