"""`decomp check` on a few-shot file whose examples are broken (issue 44 item 7), and the same
positioned errors when a program that uses the file is loaded or run: through
decomp.runtime.engine.checking.check_file, `Session.load` and the command line."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decomp.dsl.errors import DecompError, Diagnostics
from decomp.runtime.cli import main
from decomp.runtime.engine.checking import check_file
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

BAD = 'Q: What?\nA "x"\n\nQ: Who?\nA: "y"\n'
MESSAGE = "this line is read as context, so the question at line 1 has no answer: did you mean `A:`?"
TWO = 'Q: What?\nQ: Who?\nA: "y"\n\nQ: Where?\nA: "z"\nA: "w"\n'


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def positions(err: DecompError) -> list[tuple[str, int, int]]:
    errors = err.errors if isinstance(err, Diagnostics) else [err]
    return [(e.span.file, e.span.line, e.span.column) for e in errors]


def test_check_file_raises_the_positioned_error(tmp_path):
    path = write(tmp_path, "bad.txt", BAD)
    with pytest.raises(DecompError) as info:
        check_file(path)
    assert info.value.message == MESSAGE
    assert positions(info.value) == [(str(path), 2, 1)]


def test_check_file_gives_a_misspelt_marker_that_misses_nothing_as_a_warning(tmp_path):
    checked = check_file(write(tmp_path, "warn.txt", "Q: a\nq: b\nA: 1\n"))
    assert [(w.span.line, w.expected) for w in checked.warnings] == [(2, "Q: b")]


@pytest.mark.parametrize("kind, option", [("prompt", 'file="bad.txt"'), ("decomposer", 'file="bad.txt"')])
def test_loading_a_program_that_uses_the_file_reports_every_problem_at_its_line(tmp_path, kind, option):
    path = write(tmp_path, "bad.txt", TWO)
    src = f"handler h = {kind}({option})\nmain h\n"
    with pytest.raises(DecompError) as info:
        Session(model=FakeModel()).load(tmp_path / "p.decomp", text=src)
    assert positions(info.value) == [(str(path), 1, 1), (str(path), 7, 1)]
    assert "in the examples of [h]: this question has no answer: another question follows it at line 2" in str(
        info.value)


def test_inline_examples_are_reported_at_the_module_lines(tmp_path):
    src = 'handler h = prompt(text="""Q: What?\nA "x"\n""")\nmain h\n'
    with pytest.raises(DecompError) as info:
        Session(model=FakeModel()).load(tmp_path / "p.decomp", text=src)
    assert positions(info.value) == [(str(tmp_path / "p.decomp"), 2, 1)]
    assert MESSAGE in info.value.message


def test_decomp_check_fails_on_the_issue_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "bad.txt", BAD)
    result = CliRunner().invoke(main, ["check", "bad.txt"])
    assert result.exit_code == 1
    assert f"bad.txt:2:1: {MESSAGE}\n" in result.output
    assert 'expected A: "x"' in result.output and "ok" not in result.output


def test_decomp_check_and_run_give_the_same_error_for_a_program_using_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "bad.txt", BAD)
    write(tmp_path, "p.decomp", 'handler ask = prompt(file="bad.txt")\nmain ask\n')
    write(tmp_path, "answers.json", json.dumps({"default": "x"}))
    checked = CliRunner().invoke(main, ["check", "p.decomp"])
    ran = CliRunner().invoke(main, ["run", "p.decomp", "-q", "hi", "--model", "fake:answers.json"])
    line = f"{tmp_path / 'bad.txt'}:2:1: in the examples of [ask]: {MESSAGE}"
    assert (checked.exit_code, ran.exit_code) == (1, 1)
    assert line in checked.output and line in ran.output
