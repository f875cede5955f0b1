"""Parse and check time grows linearly with the text (issue 14, item 8): the few-shot reader,
the checker's block walk, error recovery and the loader's error lines each did work per item
proportional to the whole text. Sizes are chosen so the old code took 20 s to over a minute
and this one about a second: the bounds are generous (a busy machine), never tight."""
from __future__ import annotations

import time

import pytest

from decomp.dsl import nodes
from decomp.dsl.checker import check_fewshot, check_program
from decomp.dsl.errors import DecompError, Diagnostics
from decomp.dsl.parser import parse_fewshot, parse_module
from decomp.runtime.engine.session import Session


def timed(call, *args):
    """(seconds of this process's CPU, result or the DecompError raised): CPU time, not wall
    time, so that other jobs on a busy machine do not count."""
    started = time.process_time()
    try:
        result = call(*args)
    except DecompError as err:
        result = err
    return time.process_time() - started, result


def test_checker_walks_100000_steps_in_one_pass():
    """Each step used to copy the set of answers so far (old: 67 s)."""
    span = nodes.Span("p.decomp", 1, 1, 1, 2)
    steps = tuple(nodes.Step(span, None, "h", "#1 #9", refs=(nodes.Ref(span, index=1), nodes.Ref(span, index=9)))
                  for _ in range(100_000))
    seconds, errors = timed(check_program, nodes.Program(span, "p", (), steps), ["h"])
    assert seconds < 20
    assert [e.message for e in errors] == ["#1 refers to a step that has not run at this point"] + [
        "#9 refers to a step that has not run at this point"] * 9
    assert errors[-1].expected == "one of the answers so far: #1, #2, #3, #4, #5, #6, #7, #8"


def test_answers_listed_in_a_message_stay_short():
    span = nodes.Span("p.decomp", 1, 1, 1, 2)
    steps = tuple(nodes.Step(span, None, "h", "x") for _ in range(5000))
    late = nodes.Step(span, None, "h", "#9999", refs=(nodes.Ref(span, index=9999),))
    [error] = check_program(nodes.Program(span, "p", (), steps + (late,)), ["h"])
    assert error.expected == "one of the answers so far: #1, #2, #3, ..., #4998, #4999, #5000"


def test_branches_answers_are_not_available_after_them():
    """The linear walk keeps the rule: an answer inside an `if` is not available after it."""
    module = parse_module("program p(q) {\n  QS: [h] #q\n  if ok(#1) {\n    QS: [h] #1\n  } else {\n"
                          "    QS: [h] #2\n  }\n  QS: [h] #1 #2 #3\n}\n", "p.decomp")
    errors = check_program(module.programs[0], ["h"])
    assert [(e.span.line, e.message.split()[0]) for e in errors] == [(6, "#2"), (8, "#2"), (8, "#3")]
    assert errors[0].expected == "one of the answers so far: #1"


@pytest.mark.slow
def test_a_decomposition_example_of_30000_steps_is_checked_in_one_pass():
    """Each step built the set of the numbers before it."""
    fewshot = parse_fewshot("QC: q\nQS: [h] x\nA: 1\n" + "QS: [h] #1\nA: 1\n" * 30_000 + "QS: [h] #0\n", "f.txt")
    seconds, errors = timed(check_fewshot, fewshot, ["h"])
    assert seconds < 5  # about 0.05 s (old: 9.5 s)
    assert [e.expected for e in errors] == ["one of the answers so far: #1, #2, #3, ..., #29999, #30000, #30001"]


def test_broken_declarations_recovered_one_chunk_at_a_time():
    """Each chunk after an error was re-parsed behind all the lines before it (old: 57 s)."""
    seconds, err = timed(parse_module, "handler h = prompt(\n" * 20_000, "m.decomp")
    assert seconds < 20
    assert isinstance(err, Diagnostics) and len(err.errors) == 19_999
    assert err.errors[-1].span.line == 20_000 and "end of the file" in err.errors[-1].message


def test_broken_examples_recovered_one_chunk_at_a_time():
    """(old: 41 s)"""
    seconds, err = timed(parse_fewshot, "QS: [x\n\n" * 20_000, "f.txt")
    assert seconds < 20
    assert isinstance(err, Diagnostics) and [e.span.line for e in err.errors[-2:]] == [39_997, 39_999]


@pytest.mark.slow
def test_a_few_shot_file_of_20000_examples():
    """Each example used to split the whole text into lines (old: 36 s)."""
    seconds, fewshot = timed(parse_fewshot, "Q: a\nA: b\n\n" * 20_000, "f.txt")
    assert seconds < 20
    assert len(fewshot.examples) == 20_000 and fewshot.examples[-1].span.line == 59_998


@pytest.mark.slow
def test_a_program_with_30000_bad_steps_gets_every_error_with_its_line():
    """The loader split the text again for each error's line (old: 59 s)."""
    seconds, err = timed(Session().load, "p.decomp", "program p(q) {\n" + "  QS: [nope] #99\n" * 30_000 + "}\n")
    assert seconds < 20
    assert isinstance(err, Diagnostics) and len(err.errors) == 30_099
    assert all(e.line_text == "  QS: [nope] #99" for e in err.errors)
