"""Tests of the type checker (decomp.dsl.typecheck) through the loader, as `decomp check`
runs it: each error at its file:line:col with both types named; untyped programs, every
bundled program and every official DecomP prompt file without a report."""
from __future__ import annotations

from pathlib import Path

import pytest

import decomp.handlers.kinds  # noqa: F401
from decomp.dsl.errors import DecompError, Diagnostics
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

ROOT = Path(__file__).resolve().parents[2]
HEAD = '''handler split = prompt(file="split.txt")
handler count = calculator()
handler yn = prompt(text="", returns=one_of("yes", "no"))
handler words = regex(pattern=r"\\S+", all=true)
handler name_of = prompt(text="", returns=str)

program person(who: str) -> str {
    QS: [name_of] #who
}
'''
SPLIT = 'Q: Ada Lovelace\nA: ["Ada", "Lovelace"]\n\nQ: King\nA: ["King"]\n'


def problems(tmp_path, body: str) -> list[str]:
    (tmp_path / "split.txt").write_text(SPLIT)
    src = HEAD + "program main_prog(question) {\n" + body + "}\nmain main_prog\n"
    try:
        Session(model=FakeModel()).load(tmp_path / "t.decomp", text=src)
    except Diagnostics as err:
        return [f"{e.span.line}:{e.span.column} {e.message}" for e in err.errors]
    except DecompError as err:
        return [f"{err.span.line}:{err.span.column} {err.message}"]
    return []


LINE = HEAD.count("\n") + 2  # the first line of main_prog's body


@pytest.mark.parametrize("body, expected", [
    ("    QS: [count] 1 + 2\n    QS: (foreach) [split] #1\n",
     "(foreach) iterates over #1, which is float, not a list"),
    ("    QS: [split] #question\n    QS: (filter) [count] #1\n",
     "(filter) keeps the items whose answer is yes/true, but [count] answers float"),
    ("    QS: [split] #question\n    QS: [person] #1\n", "[person] takes str, but #1 is list[str]"),
    ("    QS: [yn] ok?\n    if #1 == \"maybe\" {\n        QS: [count] 1\n    }\n",
     '#1 is one_of("yes", "no"): it is never "maybe", so this comparison never holds'),
    ("    QS: [count] 2\n    if len(#1) > 1 {\n        QS: [count] 1\n    }\n",
     "len() of #1, which is float: only a list, a string or an object has a length"),
    ("    QS: [words] #question\n    if #1 == \"x\" {\n        QS: [count] 1\n    }\n",
     "this comparison can never hold: #1 is list[str], \"x\" is a string"),
    ("    QS: [yn] ok?\n    QS: (filter) [yn] #1\n",
     '(filter) iterates over #1, which is one_of("yes", "no"), not a list'),
])
def test_each_mismatch_is_reported_where_it_is(tmp_path, body, expected):
    found = problems(tmp_path, body)
    assert len(found) == 1, found
    where, message = found[0].split(" ", 1)
    assert message == expected
    assert int(where.split(":")[0]) >= LINE


def test_types_flow_through_operators(tmp_path):
    body = ("    QS: [words] #question\n    QS: (foreach) [split] #1\n    QS: (foreach_flat) [count] #2\n"
            "    QS: (filter) [yn] #1\n    QS: (foreach) [person] #4\n")
    assert problems(tmp_path, body) == []  # list[list[str]], flattened; filter keeps list[str]; items are str


def test_an_untyped_program_checks_as_before(tmp_path):
    src = "handler h = prompt(text=\"\")\nprogram p(q) {\n    QS: [h] #q\n    QS: (foreach) [h] #1\n}\nmain p\n"
    Session(model=FakeModel()).load(tmp_path / "u.decomp", text=src)


def test_examples_that_contradict_a_declared_type_are_errors_at_the_example(tmp_path):
    (tmp_path / "split.txt").write_text(SPLIT)
    with pytest.raises(Diagnostics) as err:
        Session(model=FakeModel()).load(tmp_path / "t.decomp", text='handler h = prompt(file="split.txt", returns=list[int])\n')
    assert [(e.span.file, e.span.line, e.span.column) for e in err.value.errors] == [
        (str(tmp_path / "split.txt"), 2, 4), (str(tmp_path / "split.txt"), 5, 4)]
    assert "is not list[int]" in err.value.errors[0].message


def test_a_bad_type_is_an_error_at_its_option(tmp_path):
    with pytest.raises(DecompError) as err:
        Session(model=FakeModel()).load(tmp_path / "t.decomp", text='handler h = prompt(text="", returns=lst[str])\n')
    assert "unknown type lst[...]" in err.value.message and err.value.span.column == 37


def test_a_bad_parameter_type_is_an_error_at_the_parameter(tmp_path):
    src = 'handler h = prompt(text="")\nprogram p(q: strr) {\n    QS: [h] #q\n}\n'
    with pytest.raises(DecompError) as err:
        Session(model=FakeModel()).load(tmp_path / "t.decomp", text=src)
    assert "unknown type 'strr'" in err.value.message and (err.value.span.line, err.value.span.column) == (2, 14)


def _bundled():
    return sorted(p for p in (ROOT / "programs").rglob("*.decomp") if p.name != "methods.decomp")


@pytest.mark.parametrize("path", _bundled(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_false_report_on_a_bundled_program(path):
    from decomp.runtime.engine.checking import check_file

    check_file(path)


def test_no_false_report_on_the_official_decomp_prompt_files():
    from decomp.runtime.engine.checking import check_file

    files = sorted((ROOT / "tests" / "fixtures" / "decomp").rglob("*.txt"))
    assert files
    for path in files:
        try:
            check_file(path)
        except DecompError as err:
            pytest.fail(f"{path}: {err}")


def test_not_equal_across_kinds_is_worded_as_always_holding(tmp_path):
    body = "    QS: [words] #question\n    if #1 != \"x\" {\n        QS: [count] 1\n    }\n"
    assert [p.split(" ", 1)[1] for p in problems(tmp_path, body)] == [
        "this comparison always holds: #1 is list[str], \"x\" is a string"]


def test_a_step_inside_an_ended_if_gets_one_report_not_two(tmp_path):
    body = ("    QS: [count] 1\n    if #1 > 0 {\n        QS: [name_of] x\n    }\n"
            "    if #2 == true {\n        QS: [count] 2\n    }\n")
    found = problems(tmp_path, body)
    assert len(found) == 1 and "has not run at this point" in found[0]


def test_a_missing_schema_file_is_worded(tmp_path):
    with pytest.raises(DecompError) as err:
        Session(model=FakeModel()).load(tmp_path / "t.decomp", text='handler h = prompt(text="", returns=schema("no.json"))\n')
    assert "schema('no.json')" in err.value.message and "Errno" not in err.value.message


def test_a_foreach_over_a_string_is_a_warning_it_runs_once(tmp_path):
    (tmp_path / "split.txt").write_text(SPLIT)
    src = HEAD + "program main_prog(question) {\n    QS: [name_of] #question\n    QS: (foreach) [count] #1\n}\n"
    loaded = Session(model=FakeModel()).load(tmp_path / "t.decomp", text=src)
    assert [w.message for w in loaded.notices] == [
        "(foreach) iterates over #1, which is str: it runs once, on the whole string"]
