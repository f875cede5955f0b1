"""`(plan) [h] #n` through real programs: AND / OR orders and their short-circuits, nesting,
skipped steps in the trace, plans without (or with an unreadable) order, missing steps, empty
plans, lists as plans, values that are no plan, and ADaPT's recursion over plans."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import textwrap

import pytest

from decomp import Failed
from decomp.runtime.engine.session import Session


def plan_text(steps: list[str], order: str | None = None) -> str:
    lines = [f"Step {i}: {s}" for i, s in enumerate(steps, 1)]
    if order is not None:
        lines.append(f"Execution Order: {order}")
    return "\n".join(lines) + "\n"


PROGRAM = '''
handler planner = python(function="planner")
handler act = python(function="act")
handler tell = python(function="tell")
program p(question) {
    QS: [planner] #question
    QS: (plan) [act] #1
    if ok(#2) {
        QS: [tell] ok
    } else {
        QS: [tell] failed
    }
}
main p
'''


class Harness:
    """A planner answering `plan` (whatever it is), an actor that records its queries in order and
    fails on those containing "bad"."""

    def __init__(self, plan):
        self.plan = plan
        self.acted: list[str] = []
        reg = builtin_registry()
        reg.add_function(self.planner, "planner")
        reg.add_function(self.act, "act")
        reg.add_function(lambda query: query, "tell")
        self.session = Session(registry=reg, default_model=None)

    def planner(self, query):
        return self.plan

    def act(self, query):
        self.acted.append(query)
        return Failed(f"no {query}") if "bad" in query else query.upper()

    def run(self, src: str = PROGRAM, **fields):
        result = self.session.run(self.session.load("x.decomp", text=src), {"question": "q", **fields})
        assert result.error is None, result.error
        return result


def plan_step(result):
    """The trace node of step 2 (the plan step)."""
    return [n for n in result.trace.walk() if n.kind == "step"][1]


def outline(node, depth: int = 0) -> list[str]:
    """The plan's trace as indented lines: kind, label, and [failed] / [skipped]."""
    marks = "".join(f" [{m}]" for m, on in (("failed", node.failed), ("skipped", node.skipped)) if on)
    lines = ["  " * depth + f"{node.kind} {node.label}{marks}"]
    for child in node.children:
        if child.kind in ("plan", "and", "or", "item"):
            lines += outline(child, depth + 1)
    return lines


def plan_node(result):
    nodes = [c for c in plan_step(result).children if c.kind == "plan"]
    assert len(nodes) == 1
    return nodes[0]


# ------------------------------------------------------------------ AND
def test_and_runs_in_order_and_stops_at_the_first_failure():
    h = Harness(plan_text(["fetch wood", "bad craft", "make table"], "Step 1 AND Step 2 AND Step 3"))
    result = h.run()
    assert h.acted == ["fetch wood", "bad craft"]
    assert result.answer == "failed"
    step = plan_step(result)
    assert step.failed and step.answer == ["FETCH WOOD", "no bad craft"]
    assert outline(plan_node(result)) == [
        "plan (Step 1 AND Step 2 AND Step 3) [failed]",
        "  and (Step 1 AND Step 2 AND Step 3) [failed]",
        "    item Step 1: fetch wood",
        "    item Step 2: bad craft [failed]",
        "    item Step 3: make table [skipped]",
    ]
    skipped = plan_node(result).children[0].children[2]
    assert skipped.children == [] and skipped.answer is None


def test_and_of_successes_answers_every_step_and_is_ok():
    h = Harness(plan_text(["a", "b"], "Step 1 AND Step 2"))
    result = h.run()
    assert h.acted == ["a", "b"]
    assert result.answer == "ok"
    assert plan_step(result).answer == ["A", "B"] and not plan_step(result).failed


def test_each_step_is_one_call_of_the_handler_on_the_step_text():
    h = Harness(plan_text(["a", "b"], "Step 1 AND Step 2"))
    result = h.run()
    items = [n for n in plan_node(result).walk() if n.kind == "item"]
    assert [i.query for i in items] == ["a", "b"]
    calls = [[c for c in i.children if c.kind == "call"] for i in items]
    assert [[(c.handler, c.query, c.answer) for c in cs] for cs in calls] == [[("act", "a", "A")], [("act", "b", "B")]]


# ------------------------------------------------------------------ OR
def test_or_stops_at_the_first_success():
    h = Harness(plan_text(["bad one", "two", "three"], "Step 1 OR Step 2 OR Step 3"))
    result = h.run()
    assert h.acted == ["bad one", "two"]
    assert result.answer == "ok"
    assert plan_step(result).answer == ["no bad one", "TWO"]
    assert outline(plan_node(result)) == [
        "plan (Step 1 OR Step 2 OR Step 3)",
        "  or (Step 1 OR Step 2 OR Step 3)",
        "    item Step 1: bad one [failed]",
        "    item Step 2: two",
        "    item Step 3: three [skipped]",
    ]


def test_or_of_failures_runs_them_all_and_fails():
    h = Harness(plan_text(["bad one", "bad two"], "Step 1 OR Step 2"))
    result = h.run()
    assert h.acted == ["bad one", "bad two"]
    assert result.answer == "failed"
    assert plan_step(result).answer == ["no bad one", "no bad two"]


def test_or_first_success_runs_only_the_first():
    h = Harness(plan_text(["one", "two"], "Step 1 OR Step 2"))
    result = h.run()
    assert h.acted == ["one"] and plan_step(result).answer == ["ONE"]


# ------------------------------------------------------------------ nesting
def test_nested_and_inside_or_falls_back_to_the_alternative():
    h = Harness(plan_text(["a", "bad b", "c", "d"], "((Step 1 AND Step 2 AND Step 4) OR Step 3)"))
    result = h.run()
    assert h.acted == ["a", "bad b", "c"]
    assert result.answer == "ok"
    assert plan_step(result).answer == [["A", "no bad b"], "C"]
    assert outline(plan_node(result)) == [
        "plan ((Step 1 AND Step 2 AND Step 4) OR Step 3)",
        "  or ((Step 1 AND Step 2 AND Step 4) OR Step 3)",
        "    and (Step 1 AND Step 2 AND Step 4) [failed]",
        "      item Step 1: a",
        "      item Step 2: bad b [failed]",
        "      item Step 4: d [skipped]",
        "    item Step 3: c",
    ]


def test_a_decided_group_skips_a_whole_nested_group():
    h = Harness(plan_text(["a", "b", "c"], "Step 1 OR (Step 2 AND Step 3)"))
    result = h.run()
    assert h.acted == ["a"]
    assert plan_step(result).answer == ["A"]
    assert outline(plan_node(result)) == [
        "plan (Step 1 OR (Step 2 AND Step 3))",
        "  or (Step 1 OR (Step 2 AND Step 3))",
        "    item Step 1: a",
        "    and (Step 2 AND Step 3) [skipped]",
        "      item Step 2: b [skipped]",
        "      item Step 3: c [skipped]",
    ]


def test_and_of_or_groups_fails_when_one_group_fails():
    h = Harness(plan_text(["bad a", "b", "bad c", "bad d", "e"], "(Step 1 OR Step 2) AND (Step 3 OR Step 4) AND Step 5"))
    result = h.run()
    assert h.acted == ["bad a", "b", "bad c", "bad d"]
    assert result.answer == "failed"
    assert plan_step(result).answer == [["no bad a", "B"], ["no bad c", "no bad d"]]
    lines = outline(plan_node(result))
    assert lines[-1] == "    item Step 5: e [skipped]"


def test_a_single_step_order_answers_a_one_item_list():
    h = Harness(plan_text(["a", "b"], "Step 2"))
    result = h.run()
    assert h.acted == ["b"]
    assert plan_step(result).answer == ["B"]
    assert outline(plan_node(result)) == ["plan Step 2", "  item Step 2: b"]


def test_a_single_failed_step_order_fails():
    h = Harness(plan_text(["bad a"], "Step 1"))
    result = h.run()
    assert result.answer == "failed" and plan_step(result).answer == ["no bad a"]


# ------------------------------------------------------------------ plans that are not quite plans
def test_no_order_runs_the_and_of_the_steps_with_a_note():
    h = Harness(plan_text(["a", "bad b", "c"]))
    result = h.run()
    assert h.acted == ["a", "bad b"]
    node = plan_node(result)
    assert "no Execution Order" in node.details and "AND" in node.details
    assert node.failed and plan_step(result).answer == ["A", "no bad b"]


def test_unreadable_order_runs_the_and_of_the_steps_with_a_note():
    h = Harness(plan_text(["a", "b"], "Step 1 AND AND Step 2 ???"))
    result = h.run()
    assert h.acted == ["a", "b"]
    node = plan_node(result)
    assert node.details.startswith("Execution Order unreadable")
    assert "running the AND of its steps" in node.details
    assert result.answer == "ok" and plan_step(result).answer == ["A", "B"]
    assert node.label == "(Step 1 AND Step 2)"


def test_a_step_number_not_in_the_plan_is_a_failed_step():
    h = Harness(plan_text(["a", "b"], "Step 1 AND Step 7 AND Step 2"))
    result = h.run()
    assert h.acted == ["a"]
    assert result.answer == "failed"
    missing = "Step 7 is not in the plan (its steps: 1, 2)"
    assert plan_step(result).answer == ["A", missing]
    assert outline(plan_node(result))[3:] == ["    item Step 7 [failed]", "    item Step 2: b [skipped]"]


def test_a_missing_step_in_an_or_falls_through_to_the_next():
    h = Harness(plan_text(["a"], "Step 9 OR Step 1"))
    result = h.run()
    assert h.acted == ["a"] and result.answer == "ok"
    assert plan_step(result).answer == ["Step 9 is not in the plan (its steps: 1)", "A"]


def test_a_skipped_missing_step_is_marked_skipped():
    h = Harness(plan_text(["a"], "Step 1 OR Step 9"))
    result = h.run()
    assert outline(plan_node(result))[-1] == "    item Step 9 [skipped]"


@pytest.mark.parametrize("plan", ["I cannot think of a plan.\n", "", []])
def test_a_plan_without_steps_fails_with_an_empty_answer(plan):
    h = Harness(plan)
    result = h.run()
    assert h.acted == []
    assert result.answer == "failed"
    step = plan_step(result)
    assert step.failed and step.answer == []
    node = plan_node(result)
    assert node.failed and node.answer == [] and node.details == "the plan has no steps"


def test_a_list_is_a_plan_of_its_items_in_and_order():
    h = Harness(["fetch", "bad craft", "place"])
    result = h.run()
    assert h.acted == ["fetch", "bad craft"]
    assert plan_step(result).answer == ["FETCH", "no bad craft"]
    node = plan_node(result)
    assert "list" in node.details and node.query is None
    assert outline(node)[-1] == "    item Step 3: place [skipped]"


def test_a_list_of_numbers_is_a_plan_of_their_texts():
    h = Harness([1, 2.5])
    result = h.run()
    assert h.acted == ["1", "2.5"] and result.answer == "ok"


def test_the_plan_text_is_the_plan_nodes_query():
    text = plan_text(["a"], "Step 1")
    result = Harness(text).run()
    assert plan_node(result).query == text


@pytest.mark.parametrize("value, kind", [(5, "a number"), ({"Step 1": "a"}, "an object"), (None, "null"),
                                         (True, "a boolean")])
def test_a_value_that_is_no_plan_fails_like_an_empty_plan(value, kind):
    """A planner that answers a number is a failed plan (an OR above may recover), not a row error."""
    h = Harness(value)
    result = h.run()
    assert result.error is None and result.answer == "failed"
    assert plan_step(result).answer == value and plan_step(result).failed
    node = plan_node(result)
    assert node.label == "(not a plan)" and node.failed
    assert "a plan is the planner's text" in node.details and node.details.endswith(f"not {kind}")
    assert h.acted == []


# ------------------------------------------------------------------ references in plan steps
def test_named_inputs_are_substituted_in_each_step_query():
    src = PROGRAM.replace("QS: (plan) [act] #1", "QS: (plan) [act] #1 for #question")
    h = Harness(plan_text(["a", "b"], "Step 1 AND Step 2"))
    h.run(src, question="me")
    assert h.acted == ["a for me", "b for me"]


@pytest.mark.parametrize("query", ["#1 and #1", "the plan"])
def test_the_plan_step_needs_exactly_one_reference(query):
    h = Harness(plan_text(["a"]))
    src = PROGRAM.replace("QS: (plan) [act] #1", f"QS: (plan) [act] {query}")
    with pytest.raises(Exception) as info:
        h.session.load("x.decomp", text=src)
    assert "(plan) needs exactly one #n reference" in str(info.value)


def test_with_no_numbered_reference_the_plan_is_a_named_input():
    h = Harness(plan_text(["a"]))
    src = PROGRAM.replace("QS: (plan) [act] #1", "QS: (plan) [act] #question")
    h.run(src, question=plan_text(["mix", "bake"], "Step 2 AND Step 1"))
    assert h.acted == ["bake", "mix"]


def test_plan_takes_no_sub_operations():
    h = Harness(plan_text(["a"]))
    src = PROGRAM.replace("(plan)", "(plan_flat)")
    with pytest.raises(Exception) as info:
        h.session.load("x.decomp", text=src)
    assert "unknown operator '(plan_flat)'" in str(info.value)


# ------------------------------------------------------------------ ADaPT: a program over plans, recursively
ADAPT = textwrap.dedent('''
    handler act = python(function="act")
    handler planner = python(function="planner")
    program adapt(task) with max_depth = 5 {
        QS: [act] #task
        if ok(#1) or depth() >= 3 {
            QS: [EOQ]
        }
        QS: [planner] #task
        QS: (plan) [adapt] #2
    }
    main adapt
''')


def test_adapt_recursion_over_plans():
    acted: list[str] = []
    planned: list[str] = []

    def act(query):
        acted.append(query)
        return Failed(f"cannot {query}") if query.startswith("big") else f"did {query}"

    def planner(query):
        planned.append(query)
        rest = query[len("big "):]
        return plan_text([rest], "Step 1")

    reg = builtin_registry()
    reg.add_function(act, "act")
    reg.add_function(planner, "planner")
    session = Session(registry=reg, default_model=None)
    module = session.load("adapt.decomp", text=ADAPT)

    # "big big x" fails; its plan tries "big x" (fails, plans again: "x" works) -> ok
    result = session.run(module, {"task": "big big x"})
    assert result.error is None, result.error
    assert not result.failed
    assert acted == ["big big x", "big x", "x"]
    assert planned == ["big big x", "big x"]
    assert result.answer == [["did x"]]

    # three levels of "big": at depth 3 the executor's failure is final
    acted.clear(), planned.clear()
    result = session.run(module, {"task": "big big big x"})
    assert result.error is None, result.error
    assert result.failed
    assert planned == ["big big big x", "big big x"]
    assert acted == ["big big big x", "big big x", "big x"]
    assert result.answer == [["cannot big x"]]
    adapt_calls = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "adapt"]
    assert [c.failed for c in adapt_calls] == [True, True]

    # with an alternative in the plan (OR), the failure at depth 3 is recovered from
    planner_or = lambda query: plan_text([query[len("big "):], "x"], "Step 1 OR Step 2")  # noqa: E731
    reg.add_function(planner_or, "planner", replace=True)
    acted.clear()
    session = Session(registry=reg, default_model=None)
    result = session.run(session.load("adapt.decomp", text=ADAPT), {"task": "big big big x"})
    assert result.error is None and not result.failed
    assert acted == ["big big big x", "big big x", "big x", "x"]
    assert result.answer == [["cannot big x", "did x"]]


# ------------------------------------------------------------------ errors are no failed steps
def test_a_step_that_raises_ends_the_row_and_runs_nothing_after_it():
    h = Harness(plan_text(["a", "boom", "c"], "Step 1 OR Step 2 OR Step 3"))

    def act(query):
        h.acted.append(query)
        if query == "boom":
            raise ValueError("exploded")
        return Failed(query)

    h.session.registry.add_function(act, "act", replace=True)
    result = h.session.run(h.session.load("x.decomp", text=PROGRAM), {"question": "q"})
    assert result.answer is None
    assert result.error.startswith("[act] python, x.decomp:7:") and "exploded" in result.error
    assert h.acted == ["a", "boom"]


def test_a_depth_bound_reached_inside_a_plan_ends_the_row():
    src = textwrap.dedent('''
        handler planner = python(function="planner")
        program r(task) with max_depth = 2 {
            QS: [planner] #task
            QS: (plan) [r] #1
        }
        main r
    ''')
    h = Harness(plan_text(["again"], "Step 1"))
    result = h.session.run(h.session.load("x.decomp", text=src), {"task": "t"})
    assert result.error is not None and "max_depth of 2" in result.error
    assert result.answer is None and not result.failed


# ------------------------------------------------------------------ lists and repeated numbers
def test_a_list_item_is_only_the_text_of_its_step_whatever_it_contains():
    h = Harness(["a\nExecution Order: (Step 7)", "b"])
    result = h.run()
    assert h.acted == ["a\nExecution Order: (Step 7)", "b"]
    assert result.answer == "ok"
    node = plan_node(result)
    assert node.label == "(Step 1 AND Step 2)" and "list" in node.details


def test_list_items_that_are_not_strings_become_their_json_text():
    h = Harness([{"x": 1}, None, ["y", 2], True])
    result = h.run()
    assert h.acted == ['{"x": 1}', "null", '["y", 2]', "true"]
    assert result.answer == "ok"


def test_repeated_step_numbers_keep_the_first_of_each_and_run_each_step_once():
    h = Harness("Step 1: a\nStep 1: b\nStep 2: c\nStep 2: d\n")
    result = h.run()
    assert h.acted == ["a", "c"]
    assert result.answer == "ok" and plan_step(result).answer == ["A", "C"]
    node = plan_node(result)
    assert node.label == "(Step 1 AND Step 2)"
    assert "repeated step numbers (1, 2)" in node.details and "no Execution Order" in node.details
    assert outline(node) == ["plan (Step 1 AND Step 2)", "  and (Step 1 AND Step 2)", "    item Step 1: a",
                             "    item Step 2: c"]


def test_a_repeated_step_number_with_an_order_notes_it():
    h = Harness(plan_text(["a", "b"], "Step 1").replace("Step 2:", "Step 1:"))
    result = h.run()
    assert h.acted == ["a"]
    assert plan_node(result).details == "repeated step numbers (1): the first of each is kept"


def test_a_value_that_is_no_plan_inside_an_or_is_recovered_from():
    """ADaPT with an alternative: the planner of the first alternative answers a number, so that
    sub-task fails (not the row), and the OR goes on to the second."""
    acted: list[str] = []

    def act(query):
        acted.append(query)
        return Failed(f"cannot {query}") if query.startswith("big") else f"did {query}"

    def planner(query):
        return plan_text(["big sub", "x"], "Step 1 OR Step 2") if query == "big top" else 42

    reg = builtin_registry()
    reg.add_function(act, "act")
    reg.add_function(planner, "planner")
    session = Session(registry=reg, default_model=None)
    result = session.run(session.load("adapt.decomp", text=ADAPT), {"task": "big top"})
    assert result.error is None, result.error
    assert not result.failed
    assert acted == ["big top", "big sub", "x"]
    assert result.answer == [42, "did x"]
    not_a_plan = [n for n in result.trace.walk() if n.kind == "plan" and n.label == "(not a plan)"]
    assert len(not_a_plan) == 1 and not_a_plan[0].failed and not_a_plan[0].details.endswith("not a number")
