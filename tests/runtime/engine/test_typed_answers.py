"""Tests of typed answers at run time (runtime/engine/interpreter.py `typed_answer`): every
kind's answer is fitted to its declared type, a program's parameters and result are fitted to
theirs, and a decomposer decodes its lines under the line constraint."""
from __future__ import annotations

import re

import pytest

import decomp.handlers.kinds  # noqa: F401
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel


def run(tmp_path, src: str, fields: dict, model: FakeModel | None = None):
    session = Session(model=model or FakeModel())
    return session.run(session.load(tmp_path / "main.decomp", text=src), fields)


def test_json_text_from_python_is_a_list_when_typed(tmp_path):
    (tmp_path / "helpers.py").write_text("def cities(q):\n    return '[\"Paris\", \"Rome\"]'\n"
                                         "def shout(q):\n    return q.upper()\n")
    src = ('handler cities = python(function="helpers:cities", returns=list[str])\n'
           'handler shout = python(function="helpers:shout")\n'
           "program p(question) {\n    QS: [cities] #question\n    QS: (foreach) [shout] #1\n}\nmain p\n")
    assert run(tmp_path, src, {"question": "q"}).answer == ["PARIS", "ROME"]


def test_untyped_json_text_stays_as_it_was(tmp_path):
    (tmp_path / "helpers.py").write_text("def cities(q):\n    return '[\"Paris\", \"Rome\"]'\n")
    src = ('handler cities = python(function="helpers:cities")\n'
           "program p(question) {\n    QS: [cities] #question\n}\nmain p\n")
    assert run(tmp_path, src, {"question": "q"}).answer == '["Paris", "Rome"]'


def test_a_symbolic_answer_that_does_not_fit_is_a_failed_outcome(tmp_path):
    src = ('handler calc = calculator(returns=list[int])\n'
           "program p(question) {\n    QS: [calc] 1 + 2\n    if ok(#1) {\n        QS: [calc] 5\n    }\n}\nmain p\n")
    result = run(tmp_path, src, {"question": "q"})
    assert result.error is None and result.failed and result.answer == 3


def test_a_program_parameter_is_fitted_to_its_type(tmp_path):
    src = ('handler calc = calculator()\n'
           "program p(n: int, items: list[str]) {\n    QS: [calc] #n + 1\n}\nmain p\n")
    assert run(tmp_path, src, {"n": "41", "items": '["a"]'}).answer == 42
    bad = run(tmp_path, src, {"n": "many", "items": []})
    assert bad.error is not None and "parameter 'n'" in bad.error and "is not int" in bad.error


def test_a_program_result_is_fitted_to_its_type(tmp_path):
    src = ('handler calc = calculator()\n'
           "program inner(q) -> one_of(1, 2) {\n    QS: [calc] #q\n}\n"
           "program p(question) {\n    QS: [inner] 1 + 2\n}\nmain p\n")
    result = run(tmp_path, src, {"question": "q"})
    assert result.failed and result.error is None


def test_a_decomposer_decodes_each_line_under_the_line_constraint(tmp_path):
    (tmp_path / "d.txt").write_text('QC: Do "a b".\nQS: [split] What are the words in "a b"?\nA: ["a", "b"]\n'
                                    'QS: (foreach) [up] #1\nA: ["A", "B"]\nQS: [EOQ]\n')
    (tmp_path / "helpers.py").write_text("def split(q):\n    return q.split('\"')[1].split()\n"
                                         "def up(q):\n    return q.upper()\n")
    src = ('handler split = python(function="helpers:split")\nhandler up = python(function="helpers:up")\n'
           'handler d = decomposer(file="d.txt")\nmain d\n')
    model = FakeModel(answers=[' [split] What are the words in "x y"?', " (foreach) [up] #1", " [EOQ]"])
    result = run(tmp_path, src, {"question": 'Do "x y".'}, model)
    assert result.answer == ["X", "Y"]
    first, second = (r.constraint.regex for r in model.history[:2])
    assert re.fullmatch(first, ' [split] What are the words in "x y"?')
    assert not re.fullmatch(first, " [split] see #1")  # no answer yet to refer to
    assert re.fullmatch(second, " (foreach) [up] #1") and not re.fullmatch(second, " [nope] #1")
    assert not re.fullmatch(second, " (foreach) [split] (foreach(split(split(")
    assert not re.fullmatch(second, " (filter) [up] #1")  # an operator its examples never use


def test_constrain_false_decodes_lines_freely(tmp_path):
    (tmp_path / "d.txt").write_text('QC: q\nQS: [EOQ]\n')
    src = 'handler d = decomposer(file="d.txt", constrain=false)\nmain d\n'
    model = FakeModel(answers=[" [EOQ]"])
    run(tmp_path, src, {"question": "q"}, model)
    assert model.history[0].constraint is None


def test_the_reason_of_a_failed_outcome_reaches_the_row(tmp_path):
    src = ('handler calc = calculator(returns=list[int])\n'
           "program p(question) {\n    QS: [calc] 1 + 2\n}\nmain p\n")
    result = run(tmp_path, src, {"question": "q"})
    assert result.failed and result.reason == "the answer '3' is not list[int]"


def test_the_reason_of_a_failed_item_names_the_item(tmp_path):
    src = ('handler words = regex(pattern=r"\\w+", all=true)\nhandler calc = calculator(returns=one_of(2))\n'
           "program p(question) {\n    QS: [words] #question\n    QS: (foreach) [calc] #1\n}\nmain p\n")
    result = run(tmp_path, src, {"question": "2 3"})
    assert result.failed and result.answer == [2, 3] and result.reason == "item 2: the answer '3' is not one_of(2)"


def test_the_main_handlers_type_is_applied_too(tmp_path):
    src = ('handler words = regex(pattern=r"[a-z]+", all=true)\n'
           "program n(question: str) -> int {\n    QS: [words] #question\n}\nmain n\n")
    result = run(tmp_path, src, {"question": "a b"})
    assert result.failed and "is not int" in result.reason
    (tmp_path / "helpers.py").write_text("def cities(q):\n    return '[\"Paris\", \"Rome\"]'\n")
    src = 'handler cities = python(function="helpers:cities", returns=list[str])\nmain cities\n'
    assert run(tmp_path, src, {"question": "q"}).answer == ["Paris", "Rome"]


def _decomposers():
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "programs"
    return sorted(p for p in root.rglob("*.decomp") if "decomposer(" in p.read_text())


@pytest.mark.parametrize("path", _decomposers(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_line_a_bundled_decomposers_examples_show_fits_its_line_constraint(path):
    from decomp.handlers.kinds.decomposer import DecomposerHandler

    loaded = Session(model=FakeModel()).load(path)
    for handler in loaded.handlers.values():
        if not isinstance(handler, DecomposerHandler):
            continue
        for example in handler.fewshot.examples:
            for number, item in enumerate(example.steps, 1):
                pattern = handler.line_constraint(number).regex
                assert re.fullmatch(pattern, " " + item.step.text), (handler.name, item.step.text)
