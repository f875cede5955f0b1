"""The limits every parse checks first (dsl/limits.py; issue 14, item 8): nesting deeper than
MAX_NESTING is an error at the construct that is too deep, a text or file over MAX_SOURCE_CHARS
is refused at once, and `\\r\\n` and a lone `\\r` end lines everywhere positions are counted."""
from __future__ import annotations

import sys
import time

import pytest

from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.limits import MAX_NESTING, MAX_SOURCE_CHARS, json_too_deep, source_lines
from decomp.dsl.parser import (
    parse_answer_text,
    parse_fewshot,
    parse_module,
    parse_plan,
    parse_step_line,
    read_text,
)
from decomp.dsl.plans import read_plan
from decomp.runtime.engine.checking import check_file
from decomp.runtime.engine.session import Session

HEAD = 'handler c = calculator()\n'


def nested_ifs(depth: int, condition: str = "#1 == 2") -> str:
    """A program whose innermost step sits inside `depth - 1` nested `if` blocks."""
    opens = "".join("  " * (i + 1) + f"if {condition} {{\n" for i in range(depth - 1))
    closes = "".join("  " * (i + 1) + "}\n" for i in reversed(range(depth - 1)))
    return HEAD + "program p(q) {\n  QS: [c] 1+1\n" + opens + "    QS: [c] 2+2\n" + closes + "}\nmain p\n"


def error_of(call, *args, **kwargs) -> DecompError:
    with pytest.raises(DecompError) as info:
        call(*args, **kwargs)
    return info.value


# ------------------------------------------------------------------ nesting
def test_ifs_at_the_limit_parse_check_and_run_even_with_a_small_stack():
    """MAX_NESTING levels of `if` (conditions on their if's level) load and run; the walks over
    them never recurse as deep as Python's limit, even a lowered one."""
    session = Session()
    loaded = session.load("deep.decomp", nested_ifs(MAX_NESTING + 1))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        result = session.run(loaded, {"q": "x"})
    finally:
        sys.setrecursionlimit(limit)
    assert result.error is None and result.answer == 4


def test_if_one_level_too_deep_is_an_error_at_its_own_line():
    text = nested_ifs(MAX_NESTING + 2)
    err = error_of(parse_module, text, "deep.decomp")
    line = 3 + MAX_NESTING + 1  # the head, `program`, the first step, then one `if` a line
    assert isinstance(err, DecompSyntaxError)
    assert (err.span.line, err.span.column) == (line, 2 * (MAX_NESTING + 1) + 1)  # at its `if`
    assert err.message.startswith("`if` block nested too deeply") and str(MAX_NESTING) in err.message
    assert err.line_text.strip().startswith("if #1 == 2")
    assert "at most 100 levels" in err.format()


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 400, 5000])
def test_lists_too_deep_are_an_error_at_the_first_bracket_too_deep(depth):
    text = 'handler r = regex(pattern="a", default=' + "[" * depth + "1" + "]" * depth + ")\n"
    err = error_of(parse_module, text, "l.decomp")
    assert err.message.startswith("list nested too deeply")
    assert (err.span.line, err.span.column) == (1, 40 + MAX_NESTING)  # the (MAX_NESTING + 1)th `[`
    assert text[err.span.column - 1] == "["


@pytest.mark.parametrize("condition, word", [
    ("not " * 600 + "ok(#1)", "`not` condition"),
    ("(ok(#1) and " * 400 + "ok(#1)" + ")" * 400, "`and` condition"),
    ("(ok(#1) or " * 400 + "ok(#1)" + ")" * 400, "`or` condition"),
    ("(" * 300 + "#1" + " == 1)" * 300, "comparison"),
])
def test_conditions_too_deep_are_an_error_on_their_line(condition, word):
    text = HEAD + "program p(q) {\n  QS: [c] 1\n  if " + condition + " {\n    QS: [c] 2\n  }\n}\n"
    err = error_of(parse_module, text, "c.decomp")
    assert err.span.line == 4 and err.message.startswith(f"{word} nested too deeply")


def test_a_list_at_the_limit_is_read():
    text = 'handler r = regex(pattern="a", default=' + "[" * MAX_NESTING + "1" + "]" * MAX_NESTING + ")\n"
    value = parse_module(text, "l.decomp").handlers[0].options[1].value
    for _ in range(MAX_NESTING - 1):
        value = value.value[0]
    assert value.kind == "list" and value.plain() == [1]


def test_plans_too_deep_are_an_error_and_read_plan_runs_the_and_of_the_steps():
    text = "Step 1: a\nStep 2: b\nExecution Order: " + "(Step 1 AND " * 400 + "Step 2" + ")" * 400 + "\n"
    err = error_of(parse_plan, text)
    assert err.span.line == 3 and "AND group nested too deeply" in err.message
    plan, note = read_plan(text)
    assert [s.number for s in plan.steps] == [1, 2] and plan.order is None
    assert "nested too deeply" in note


def test_json_answers_nested_too_deep_stay_text():
    deep = "[" * (MAX_NESTING + 1) + "1" + "]" * (MAX_NESTING + 1)
    at_limit = "[" * MAX_NESTING + "1" + "]" * MAX_NESTING
    assert parse_answer_text(deep) == (deep, False)
    assert parse_answer_text(at_limit)[1] is True
    assert not json_too_deep('["' + "[" * 500 + '"]')  # brackets inside strings do not count
    fewshot = parse_fewshot(f"Q: a\nA: {deep}\n\nQ: b\nA: {at_limit}\n", "f.txt")
    assert [e.answer.is_json for e in fewshot.examples] == [False, True]


# ------------------------------------------------------------------ size
def test_a_ten_megabyte_text_is_refused_at_once():
    text = 'handler h = prompt(text="hello", temperature=0.5)\n' * 200_000  # 10 MB
    started = time.perf_counter()
    err = error_of(parse_module, text, "big.decomp")
    assert time.perf_counter() - started < 5  # it took over ten minutes to parse
    assert err.message == f"the text is too long to read: more than {MAX_SOURCE_CHARS:,} characters"
    assert (err.span.line, err.span.column) == (1, 1)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.decomp"
    path.write_bytes(b"# x\n" * (3 * MAX_SOURCE_CHARS // 4))
    err = error_of(read_text, path)
    assert "the file is too long to read" in err.message and str(err).startswith(f"{path}:1:1: ")
    err = error_of(check_file, path)
    assert "too long" in err.message
    path.write_bytes(b"#" * MAX_SOURCE_CHARS)
    assert len(read_text(path)) == MAX_SOURCE_CHARS  # the limit itself is allowed


# ------------------------------------------------------------------ line ends
def test_bare_cr_module_reads_like_lf():
    text = HEAD + "program p(q) {\n  QS: [c] #q\n  if ok(#1) {\n    QS: [c] #1\n  }\n}\nmain p\n"
    assert parse_module(text.replace("\n", "\r"), "m.decomp") == parse_module(text, "m.decomp")
    assert parse_module(text.replace("\n", "\r\n"), "m.decomp") == parse_module(text, "m.decomp")


def test_bare_cr_fewshot_has_its_examples_and_lines():
    text = "QC: q?\nQS: [h] x\nA: 1\nQS: [EOQ]\n\nQ: a?\nA: \"b\"\n"
    fewshot = parse_fewshot(text.replace("\n", "\r"), "f.txt")
    first, second = fewshot.examples
    assert first.question == "q?" and [s.step.handler for s in first.steps] == ["h", "EOQ"]
    assert (second.question, second.answer.value, second.span.line) == ("a?", "b", 6)
    assert first.lines[:4] == ("QC: q?", "QS: [h] x", "A: 1", "QS: [EOQ]")
    assert fewshot == parse_fewshot(text, "f.txt")


def test_bare_cr_positions_count_lines_in_errors():
    text = (HEAD + "program p(q) {\n  QS: [c] #q\n  QS: [c #1\n}\n").replace("\n", "\r")
    err = error_of(parse_module, text, "m.decomp")
    assert (err.span.line, err.span.column) == (4, 7) and err.line_text == "  QS: [c #1"


def test_bare_cr_check_errors_carry_their_line(tmp_path):
    path = tmp_path / "m.decomp"
    path.write_bytes(b"handler c = calculator()\rprogram p(q) {\r  QS: [nope] #q\r}\rmain p\r")
    err = error_of(check_file, path)
    assert (err.span.line, err.line_text) == (3, "  QS: [nope] #q") and "unknown handler [nope]" in err.message


def test_not_utf8_position_counts_cr_line_ends(tmp_path):
    path = tmp_path / "f.txt"
    path.write_bytes(b"Q: a\rA: b\r\nQ: c\xff\n")
    err = error_of(read_text, path)
    assert (err.span.line, err.span.column) == (3, 5)


def test_step_lines_and_plans_end_lines_at_cr():
    assert parse_step_line("QS: [h] a b\r").query == "a b"
    with pytest.raises(DecompSyntaxError):
        parse_step_line("QS: [h] a\rQS: [g] b")  # two lines: not one step
    plan = parse_plan("Step 1: a\rStep 2: b\rExecution Order: (Step 1 AND Step 2)\r")
    assert [s.text for s in plan.steps] == ["a", "b"] and plan.order is not None
    plan, note = read_plan("Step 1: a\rExecution Order: (Step 1 AND\rStep 2: b\r")  # an order cut short
    assert [s.text for s in plan.steps] == ["a", "b"] and note.startswith("Execution Order unreadable (line 2")
    assert source_lines("a\rb\r\nc\nd") == ["a", "b", "c", "d"]


# ------------------------------------------------------------------ examples inside a .decomp file
def test_inline_examples_are_positioned_in_their_file():
    """`parse_fewshot(text, path, line=N)`: spans and errors count from line N of `path`."""
    fewshot = parse_fewshot("QC: q\nQS: [h] #1\nA: 1\n", "m.decomp", line=40)
    assert fewshot.examples[0].span.line == 40 and fewshot.examples[0].steps[0].step.span.line == 41
    assert fewshot.examples[0].steps[0].step.refs[0].span.line == 41
    err = error_of(parse_fewshot, "QC: q\nA: 1\nQS: [split what\n", "m.decomp", line=40)
    assert (err.span.line, err.span.column, err.line_text) == (42, 5, "QS: [split what")
    errors = error_of(parse_fewshot, "QS: [x\n\nQS: (foreach [y] z\n", "m.decomp", line=10)
    assert isinstance(errors, Diagnostics) and [e.span.line for e in errors.errors] == [10, 12]
    err = error_of(parse_fewshot, "Q: a\nA: 1\n\n" + "QC: " + "x" * 3 + "\nQS: [a\n", "m.decomp", line=7)
    assert err.span.line == 11
