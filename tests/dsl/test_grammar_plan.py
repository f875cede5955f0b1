"""ADaPT plans (`plan` start symbol) and single decomposer lines (`step_line` start symbol)."""
from __future__ import annotations

import pytest

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError, DecompSyntaxError
from decomp.dsl.parser import parse_plan, parse_step_line


def shape(node):
    """An AND/OR tree without spans: ("and", [...]), ("or", [...]) or a step number."""
    if isinstance(node, nodes.PlanRef):
        return node.number
    if isinstance(node, nodes.PlanAnd):
        return ("and", [shape(i) for i in node.items])
    if isinstance(node, nodes.PlanOr):
        return ("or", [shape(i) for i in node.items])
    raise AssertionError(f"not a plan node: {node!r}")


PLAN = ("Step 1: Go to the kitchen.\nStep 2: Find the mug.\nStep 3: Take it.\n"
        "Execution Order: ((Step 1 AND Step 2) OR Step 3)\n")


# ------------------------------------------------------------------ plans
def test_plan_steps():
    plan = parse_plan(PLAN)
    assert [(s.number, s.text) for s in plan.steps] == [
        (1, "Go to the kitchen."), (2, "Find the mug."), (3, "Take it.")]
    assert plan.steps[1].span == nodes.Span("<plan>", 2, 1, 2, 8)
    assert plan.step(3).text == "Take it."
    assert plan.step(4) is None
    assert plan.text == ()


def test_execution_order_tree_is_exact():
    plan = parse_plan(PLAN, "p.txt")
    assert plan.order == nodes.PlanOr(
        nodes.Span("p.txt", 4, 19, 4, 48),
        (nodes.PlanAnd(nodes.Span("p.txt", 4, 20, 4, 37),
                     (nodes.PlanRef(nodes.Span("p.txt", 4, 20, 4, 26), 1),
                      nodes.PlanRef(nodes.Span("p.txt", 4, 31, 4, 37), 2))),
         nodes.PlanRef(nodes.Span("p.txt", 4, 42, 4, 48), 3)))


@pytest.mark.parametrize("order, tree", [
    ("Step 1 OR Step 2 AND Step 3", ("or", [1, ("and", [2, 3])])),
    ("Step 1 AND Step 2 OR Step 3", ("or", [("and", [1, 2]), 3])),
    ("Step 1 AND Step 2 OR Step 3 AND Step 4", ("or", [("and", [1, 2]), ("and", [3, 4])])),
    ("Step 1 AND (Step 2 OR Step 3)", ("and", [1, ("or", [2, 3])])),
    ("(Step 1 OR (Step 2 AND (Step 3 OR Step 4)))", ("or", [1, ("and", [2, ("or", [3, 4])])])),
    ("Step 1 AND Step 2 AND Step 3", ("and", [1, 2, 3])),
    ("Step 1 OR Step 2 OR Step 3", ("or", [1, 2, 3])),
    ("(((Step 1)))", 1),
    ("Step 1", 1),
    ("Step 1.", 1),
    ("(Step 1 AND Step 2).", ("and", [1, 2])),
    ("step 1 and step 2 or Step 3", ("or", [("and", [1, 2]), 3])),
    ("Step 1 aNd Step 2 Or Step 3", ("or", [("and", [1, 2]), 3])),
    ("Step1 AND Step 12", ("and", [1, 12])),
])
def test_order_precedence_and_brackets(order, tree):
    plan = parse_plan(f"Step 1: a\nStep 2: b\nStep 3: c\nStep 4: d\nExecution Order: {order}\n")
    assert shape(plan.order) == tree


def test_case_insensitive_markers_and_text_lines_around():
    plan = parse_plan("Here is my plan.\nstep 1: a\nSTEP 2: b\n"
                      "execution order: (step 1 and step 2) or (Step 1 aNd Step 2)\nThat's it.")
    assert [s.number for s in plan.steps] == [1, 2]
    assert shape(plan.order) == ("or", [("and", [1, 2]), ("and", [1, 2])])
    assert plan.text == ("Here is my plan.", "That's it.")


def test_lines_that_only_start_like_keywords_are_text():
    plan = parse_plan("Step 1: a\nOrder this list\nStepping is fun\nAndrew\nExecution plan follows\n")
    assert [s.number for s in plan.steps] == [1]
    assert plan.order is None
    assert plan.text == ("Order this list", "Stepping is fun", "Andrew", "Execution plan follows")


def test_plan_without_execution_order():
    plan = parse_plan("Step 1: a\nStep 2: b\nStep 3: c\n")
    assert [s.number for s in plan.steps] == [1, 2, 3]
    # nodes.Plan: "Without an `Execution Order:` line the order is the AND of all steps, in order."
    assert plan.order is None or shape(plan.order) == ("and", [1, 2, 3])


def test_last_execution_order_wins():
    plan = parse_plan("Step 1: a\nStep 2: b\nExecution Order: Step 1\nExecution Order: Step 2 OR Step 1\n")
    assert shape(plan.order) == ("or", [2, 1])


def test_multi_digit_step_numbers_and_empty_step_text():
    plan = parse_plan("Step 10: ten\nStep 2:\nExecution Order: Step 10 AND Step 2\n")
    assert [(s.number, s.text) for s in plan.steps] == [(10, "ten"), (2, "")]
    assert plan.steps[0].span == nodes.Span("<plan>", 1, 1, 1, 9)
    assert plan.order.items[0].span == nodes.Span("<plan>", 3, 18, 3, 25)


def test_plan_blank_lines_crlf_and_no_trailing_newline():
    plan = parse_plan("\r\nStep 1: a\r\n\r\nStep 2: b\r\nExecution Order: Step 1 OR Step 2")
    assert [(s.number, s.text) for s in plan.steps] == [(1, "a"), (2, "b")]
    assert shape(plan.order) == ("or", [1, 2])
    assert plan.steps[1].span.line == 4


def test_empty_plan():
    plan = parse_plan("")
    assert plan.steps == () and plan.order is None and plan.text == ()


def _syntax_error(text: str) -> DecompSyntaxError:
    with pytest.raises(DecompSyntaxError) as info:
        parse_plan(text, "plan.txt")
    return info.value


def test_dangling_and_is_a_positioned_syntax_error():
    err = _syntax_error("Step 1: a\nExecution Order: Step 1 AND\n")
    assert (err.span.file, err.span.line, err.span.column) == ("plan.txt", 2, 28)
    assert "step" in err.expected.lower()
    text = err.format()
    assert text.startswith("plan.txt:2:28: ")
    assert "    Execution Order: Step 1 AND\n" + " " * 4 + " " * 27 + "^" in text


@pytest.mark.parametrize("order, column", [
    ("Step 1 AND Step 2)", 35),
    ("(Step 1 AND Step 2", 36),
    ("AND Step 1", 18),
    ("Step 1 Step 2", 25),
    ("", 18),  # "Execution Order: " ends at column 17; the line end is at 18
])
def test_malformed_orders(order, column):
    err = _syntax_error(f"Step 1: a\nStep 2: b\nExecution Order: {order}\n")
    assert err.span.line == 3
    assert err.span.column == column
    assert err.expected
    for internal in ("Token(", "_EOL", "LPAR", "RPAR", "STEP_REF", "_AND", "Traceback"):
        assert internal not in err.format()


# ------------------------------------------------------------------ step lines
def test_step_line_with_prefix():
    step = parse_step_line('QS: (project_values) [str_position] What is the last letter in "#1"?')
    assert (step.operator, step.handler, step.query) == (
        "project_values", "str_position", 'What is the last letter in "#1"?')
    assert [r.index for r in step.refs] == [1]
    assert step.operator_span == nodes.Span("<model output>", 1, 5, 1, 21)
    assert step.handler_span == nodes.Span("<model output>", 1, 22, 1, 36)
    assert step.refs[0].span == nodes.Span("<model output>", 1, 65, 1, 67)


def test_step_line_without_prefix():
    step = parse_step_line("(foreach) [letter] #1")
    assert (step.operator, step.handler, step.query) == ("foreach", "letter", "#1")
    assert [r.index for r in step.refs] == [1]
    assert step.text == "(foreach) [letter] #1"


def test_step_line_without_prefix_spans_point_into_the_given_text():
    line = "(foreach) [letter] #1"
    step = parse_step_line(line, "out")
    assert step.operator_span == nodes.Span("out", 1, 1, 1, 10)
    assert step.handler_span == nodes.Span("out", 1, 11, 1, 19)
    assert step.refs[0].span == nodes.Span("out", 1, 20, 1, 22)
    assert line[step.refs[0].span.column - 1: step.refs[0].span.end_column - 1] == "#1"


@pytest.mark.parametrize("line", ["[EOQ]", "QS: [EOQ]", "  QS: [EOQ]  ", "QS: [EOQ]\n"])
def test_step_line_end_of_question(line):
    step = parse_step_line(line)
    assert step.handler == "EOQ" and step.is_end
    assert step.operator is None and step.query == "" and step.refs == ()


@pytest.mark.parametrize("line", [
    'The last letter of "Augusta" is "a". So the answer is "a a g".',
    "QS: The people born in 1910 were Muntaril and Teeplemole.",
])
def test_step_line_cot_text_has_no_handler(line):
    step = parse_step_line(line)
    assert step.handler is None and step.operator is None
    assert step.query == line.removeprefix("QS: ")
    assert not step.is_end


def test_step_line_details():
    step = parse_step_line("  QS: [split]  words of #question and #12  ")
    assert (step.handler, step.query) == ("split", "words of #question and #12")
    assert [(r.index, r.name) for r in step.refs] == [(None, "question"), (12, None)]
    assert step.span.column == 3
    assert parse_step_line("QS: [ spaced name ] q").handler == "spaced name"
    assert parse_step_line("QS: [a] [b] q").query == "[b] q"
    crlf = parse_step_line("QS: [a] q #1\r\n")
    assert (crlf.handler, crlf.query) == ("a", "q #1")
    assert parse_step_line("QS: (select)").operator == "select"


def test_step_line_with_two_lines_is_an_error():
    with pytest.raises(DecompError) as info:
        parse_step_line("QS: [a] x\nQS: [b] y")
    assert isinstance(info.value, DecompSyntaxError)
    assert (info.value.span.line, info.value.span.column) == (2, 1)
