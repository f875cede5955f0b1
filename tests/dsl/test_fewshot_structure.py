"""The shape of few-shot examples (issue 44 item 7): a question with no answer, an answer with no
question, two questions in a row, each an error at its line; a context line that looks like a
misspelt marker named ("did you mean `A:`?"), as the error's position when it is why, else as a
warning. Bundled and official prompt files have none of them."""
from __future__ import annotations

from pathlib import Path

import pytest

from decomp.dsl.checker import fewshot_warnings, misspelt_marker
from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.parser import parse_fewshot, parse_module, read_fewshot

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[tuple[int, int, str, str | None]]:
    try:
        parse_fewshot(text, "p.txt")
    except DecompError as err:
        errors = err.errors if isinstance(err, Diagnostics) else [err]
        assert all(isinstance(e, DecompSyntaxError) for e in errors)
        return [(e.span.line, e.span.column, e.message, e.expected) for e in errors]
    return []


def test_the_issue_file_points_at_the_misspelt_answer():
    err = problems('Q: What?\nA "x"\n\nQ: Who?\nA: "y"\n')
    assert err == [(2, 1, "this line is read as context, so the question at line 1 has no answer: "
                          "did you mean `A:`?", 'A: "x"')]


def test_the_issue_file_formats_with_its_line_and_caret():
    with pytest.raises(DecompError) as info:
        parse_fewshot('Q: What?\nA "x"\n\nQ: Who?\nA: "y"\n', "bad.txt")
    assert info.value.format() == ('bad.txt:2:1: this line is read as context, so the question at line 1 has no '
                                   'answer: did you mean `A:`?\n    A "x"\n    ^^^^^\n    expected A: "x"')


@pytest.mark.parametrize("text, expected", [
    ("Q: What?\nQ: Who?\nA: y\n",
     [(1, 1, "this question has no answer: another question follows it at line 2", "an A: line after each Q: line")]),
    ("Q: a\nA: 1\n\nQ: b\n\nQ: c\nA: 3\n",
     [(4, 1, "this question has no answer: no A: line follows it in its example", "an A: line after each Q: line")]),
    ("context\nA: 1\n",
     [(2, 1, "this answer has no question: no Q: line comes before it in its example",
       "a Q: line before each A: line")]),
    ("Q: a\nA: 1\nA: 2\n",
     [(3, 1, "this answer has no question: the question at line 1 already has its answer at line 2",
       "one A: line after each Q: line (a new example starts with Q:)")]),
    ("Q. Who?\nA: 1\n",
     [(1, 1, "this line is read as context, so the answer at line 2 has no question: did you mean `Q:`?",
       "Q: Who?")]),
    ("QC: Do it.\n",
     [(1, 1, "this question has no steps and no answer: no A: line follows it in its example",
       "QS: steps or an A: line after each QC: line")]),
    ("QC: Do it.\nQS [split] it\n",
     [(2, 1, "this line is read as context, so the question at line 1 has no answer: did you mean `QS:`?",
       "QS: [split] it")]),
    ("Q: a\nA; 1\n", [(2, 1, "this line is read as context, so the question at line 1 has no answer: "
                             "did you mean `A:`?", "A: 1")]),
    ("  Q: a\n  a: 1\n", [(2, 3, "this line is read as context, so the question at line 1 has no answer: "
                                 "did you mean `A:`?", "A: 1")]),
])
def test_each_problem_at_its_line(text, expected):
    assert problems(text) == expected


def test_every_problem_of_a_file_is_reported():
    found = problems("Q: a\nQ: b\nA: 1\n\nA: 2\n\nQ: c\nA: 3\nA: 4\n")
    assert [(line, column) for line, column, _, _ in found] == [(1, 1), (5, 1), (9, 1)]


@pytest.mark.parametrize("text", [
    "Q: a\nA: 1\n\nQ: b\nA: 2\n",
    "Q: a\nA: 1\nQ: b\nA: 2\n",                                # several pairs in one block
    "Some passage.\nQ: a\nA: 1\nQ: b\nA: 2\n",                 # sharing their context
    "Answer briefly.\n\nQ: a\nA: 1\n",                        # instructions, a paragraph of their own
    "Q: a\nA:\n",                                             # an empty answer is an answer
    "Q: a\nsome more of the question\nA: 1\n",
    "QC: q\nQS: [h] x\nA: 1\nQS: [EOQ]\n",
    "QC: q\nQS: [h] x\nQS: [EOQ]\n",                           # steps without answers
    "a passage\nthe question\nQS: [h] x\nA: 1\nQS: [EOQ]\n",   # the official implicit question
    "QC: q\nQS: [h] x\nA: 1\nA: 2\n",                          # a step's answer, then the example's
    "A man walks in.\nA, B and C are friends.\nQ: Who?\nA: [\"A\"]\n",
])
def test_well_formed_examples_pass(text):
    assert problems(text) == []
    assert fewshot_warnings(parse_fewshot(text, "p.txt")) == []


def test_a_misspelt_marker_with_nothing_missing_is_a_warning():
    fewshot = parse_fewshot("Q: a\na: 1\nA: 2\n\nQ: b\nA: 3\nq: c\n", "p.txt")
    assert [(w.span.line, w.span.column, w.message, w.expected) for w in fewshot_warnings(fewshot)] == [
        (2, 1, "this line is read as context, not as a marker: did you mean `A:`?", "A: 1"),
        (7, 1, "this line is read as context, not as a marker: did you mean `Q:`?", "Q: c")]


@pytest.mark.parametrize("line, meant", [
    ('A "x"', ("A:", 'A: "x"')), ('A ["x", "y"]', ("A:", 'A: ["x", "y"]')), ("Q. Who?", ("Q:", "Q: Who?")),
    ("a: x", ("A:", "A: x")), ("Q : x", ("Q:", "Q: x")), ("qc: x", ("QC:", "QC: x")), ("A.", ("A:", "A:")),
    ("QS [h] x", ("QS:", "QS: [h] x")), ("QC How many?", ("QC:", "QC: How many?")), ("Q Who is it?", ("Q:", "Q: Who is it?")),
    ("A: x", None), ("Q: x", None), ("QS: [h] x", None), ("A man walks in.", None), ("A, B and C.", None),
    ("Answer: x", None), ("Question: who?", None), ("movie: X ; director: Y.", None), ("Quite so.", None),
    ("Q is a letter.", None),
])
def test_what_looks_like_a_misspelt_marker(line, meant):
    assert misspelt_marker(line) == meant


def test_examples_inside_a_module_are_reported_at_the_module_lines():
    src = 'handler h = prompt(text="""Q: What?\nA "x"\n""")\n'
    module = parse_module(src, "m.decomp")
    value = module.handlers[0].options[0].value
    with pytest.raises(DecompSyntaxError) as info:
        parse_fewshot(value.value, "m.decomp", line=value.span.line)
    assert (info.value.span.line, info.value.span.column) == (2, 1)


def _prompt_files() -> list[Path]:
    return sorted([*(ROOT / "programs").rglob("*.txt"), *(ROOT / "tests" / "fixtures" / "decomp").rglob("*.txt")])


def test_bundled_and_official_prompt_files_have_no_problem_and_no_warning():
    files = _prompt_files()
    assert len(files) > 30
    for path in files:
        assert fewshot_warnings(read_fewshot(path)) == [], path
