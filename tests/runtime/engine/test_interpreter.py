"""End-to-end tests of decomp.runtime.engine.interpreter through `Session`: reference substitution,
operator fan-out (order, concurrency), conditions, `[EOQ]`, recursion bounds, traces."""
from __future__ import annotations

import asyncio
import json

import pytest

from decomp.dsl.errors import DecompError, HandlerError
from decomp.dsl.parser import parse_step_line
from decomp.runtime.testing.fake import FakeModel
from decomp.runtime.engine.session import RunResult, Session
from decomp.dsl.values import item_text, json_text, named_text, parse_output, substitute


# --- a custom kind, registered exactly as a plugin would be ----------------------------------

from tests.helpers import registry_with  # noqa: E402


HANG_GUARD = 30.0  # seconds an item waits for another before it gives up: only a hang gets there


def session_with(functions, calls=None, **kwargs) -> Session:
    return Session(registry=registry_with(functions, calls), **kwargs)


def echo(query):
    return query


def run_src(src: str, fields: dict, functions=None, calls=None, **kwargs) -> RunResult:
    session = session_with(functions or {"echo": echo}, calls, **kwargs)
    module = session.load("x.decomp", text=src)
    return session.run(module, fields)


# --- values helpers --------------------------------------------------------------------------

def test_json_text_and_item_text():
    assert json_text(["a", "b"]) == '["a", "b"]'
    assert json_text("a") == '"a"'
    assert json_text("Lougerière") == '"Lougerière"'
    assert item_text("a b") == "a b"
    assert item_text(3) == "3"
    assert item_text(2.5) == "2.5"
    assert item_text(True) == "true"
    assert item_text(["x", 1]) == '["x", 1]'
    assert item_text(None) == "null"
    assert named_text("raw string") == "raw string"
    assert named_text([1, 2]) == "[1, 2]"
    assert named_text(7) == "7"


def test_parse_output():
    assert parse_output(' ["a", "b"] ') == ["a", "b"]
    assert parse_output("3") == 3
    assert parse_output('"q"') == "q"
    assert parse_output("  plain text \n") == "plain text"
    assert parse_output("true") is True


def test_substitute_multi_digit_by_position():
    step = parse_step_line("QS: [x] #12 and #1 and #1")
    replaced = substitute(step.query, step.refs, {"#1": "ONE", "#12": "TWELVE"}, step.query_span.column)
    assert replaced == "TWELVE and ONE and ONE"
    # a reference without a replacement stays as written
    replaced = substitute(step.query, step.refs, {"#1": "ONE"}, step.query_span.column)
    assert replaced == "#12 and ONE and ONE"


# --- select ----------------------------------------------------------------------------------

def test_select_substitutes_json_text():
    src = '''
handler make = fn(fn="make")
handler echo = fn(fn="echo")
program p(question) {
    QS: [make] list
    QS: [make] string
    QS: [make] number
    QS: [echo] L=#1 S=#2 N=#3
}
main p
'''
    made = {"list": ["a", "b"], "string": "x y", "number": 3}
    calls: list = []
    result = run_src(src, {"question": "q"}, {"make": made.__getitem__, "echo": echo}, calls)
    assert result.error is None, result.error
    assert result.answer == 'L=["a", "b"] S="x y" N=3'
    assert calls[-1] == ("echo", 'L=["a", "b"] S="x y" N=3')


def test_select_through_prompt_handler_and_fake_model():
    src = '''
handler ask = prompt(text="Q: example?\\nA: \\"x\\"\\n")
program p(question) {
    QS: [ask] What are the words in "#question"?
    QS: [ask] Concatenate #1 using a space.
}
main p
'''
    model = FakeModel(mapping={'What are the words in "a b"?': '["a", "b"]',
                               'Concatenate ["a", "b"] using a space.': '"a b"'})
    session = Session(model=model)
    result = session.run(session.load("x.decomp", text=src), {"question": "a b"})
    assert result.error is None, result.error
    assert result.answer == "a b"
    assert model.prompts[1].endswith('Q: Concatenate ["a", "b"] using a space.\nA:')


def test_named_input_substitution():
    src = '''
handler echo = fn(fn="echo")
program p(question, words, n) {
    QS: [echo] q=#question w=#words n=#n
}
main p
'''
    result = run_src(src, {"question": 'say "hi"', "words": ["a", "b"], "n": 2})
    assert result.error is None, result.error
    assert result.answer == 'q=say "hi" w=["a", "b"] n=2'


def test_multi_digit_reference():
    lines = "\n".join(f"    QS: [tag] s{k}" for k in range(1, 13))
    src = f'''
handler tag = fn(fn="tag")
handler echo = fn(fn="echo")
program p(question) {{
{lines}
    QS: [echo] #12|#1|#2|#10
}}
main p
'''
    result = run_src(src, {"question": "q"}, {"tag": lambda q: f"v:{q}", "echo": echo})
    assert result.error is None, result.error
    assert result.answer == '"v:s12"|"v:s1"|"v:s2"|"v:s10"'


def test_substituted_text_is_not_substituted_again():
    src = '''
handler make = fn(fn="make")
handler echo = fn(fn="echo")
program p(question) {
    QS: [make] one
    QS: [make] two
    QS: [echo] #1 #2 #question
}
main p
'''
    made = {"one": "see #2 and #question", "two": "X"}
    result = run_src(src, {"question": "Q #1"}, {"make": made.__getitem__, "echo": echo})
    assert result.error is None, result.error
    assert result.answer == '"see #2 and #question" "X" Q #1'


def test_multi_digit_reference_in_a_fan_out():
    lines = "\n".join(f"    QS: [tag] s{k}" for k in range(1, 12))
    src = f'''
handler tag = fn(fn="tag")
handler make = fn(fn="make")
handler echo = fn(fn="echo")
program p(question) {{
{lines}
    QS: [make] list
    QS: (foreach) [echo] <#12> #question
}}
main p
'''
    result = run_src(src, {"question": "q"}, {"tag": lambda q: q, "make": lambda q: ["a", "b"], "echo": echo})
    assert result.error is None, result.error
    assert result.answer == ["<a> q", "<b> q"]


def test_answer_is_the_last_step_answer():
    src = '''
handler make = fn(fn="make")
program p(question) {
    QS: [make] one
    QS: [make] two
}
main p
'''
    result = run_src(src, {"question": "q"}, {"make": lambda q: {"one": 1, "two": [2]}[q]})
    assert result.ok
    assert result.answer == [2]


# --- fan-out ---------------------------------------------------------------------------------

FANOUT = '''
handler make = fn(fn="make")
handler per = fn(fn="per")
program p(question) {{
    QS: [make] items
    QS: ({op}) [per] item <#1>
}}
main p
'''


def fanout(op, items, per, calls=None):
    return run_src(FANOUT.format(op=op), {"question": "q"}, {"make": lambda q: items, "per": per}, calls)


def test_foreach_substitutes_raw_items_in_order():
    calls: list = []
    result = fanout("foreach", ["Augusta", 3, ["x"], {"k": 1}], lambda q: f"got {q}", calls)
    assert result.error is None, result.error
    assert result.answer == ["got item <Augusta>", "got item <3>", 'got item <["x"]>',
                             'got item <{"k": 1}>']
    assert sorted(q for name, q in calls if name == "per") == sorted(
        ["item <Augusta>", "item <3>", 'item <["x"]>', 'item <{"k": 1}>'])


def test_project_values_is_foreach():
    result = fanout("project_values", ["a", "b"], lambda q: q.upper())
    assert result.answer == ["ITEM <A>", "ITEM <B>"]


def test_foreach_over_a_string_is_one_item():
    calls: list = []
    result = fanout("foreach", "Augusta Ada", lambda q: q, calls)
    assert result.error is None, result.error
    assert result.answer == ["item <Augusta Ada>"]
    assert [c for c in calls if c[0] == "per"] == [("per", "item <Augusta Ada>")]


def test_foreach_over_a_number_is_a_clean_error():
    result = fanout("foreach", 42, lambda q: q)
    assert result.answer is None
    assert "#1" in result.error and "not a list" in result.error


def test_foreach_over_empty_list():
    calls: list = []
    result = fanout("foreach", [], lambda q: q, calls)
    assert result.error is None
    assert result.answer == []
    assert [c for c in calls if c[0] == "per"] == []


def test_foreach_keeps_order_when_items_finish_out_of_order():
    # "slow" ends only after "medium" has ended, "medium" only after "fast": run one after another,
    # the first item would wait for the last (and fail after HANG_GUARD s); at the same time,
    # they end last item first
    waits_for = {"item <slow>": "item <medium>", "item <medium>": "item <fast>"}
    ended = {q: asyncio.Event() for q in ("item <slow>", "item <medium>", "item <fast>")}
    finished: list[str] = []

    async def per(query):
        if query in waits_for:
            await asyncio.wait_for(ended[waits_for[query]].wait(), HANG_GUARD)
        finished.append(query)
        ended[query].set()
        return query.upper()

    session = session_with({"make": lambda q: ["slow", "medium", "fast"], "per": per})
    module = session.load("x.decomp", text=FANOUT.format(op="foreach"))
    result = session.run(module, {"question": "q"})
    assert result.error is None, result.error
    assert result.answer == ["ITEM <SLOW>", "ITEM <MEDIUM>", "ITEM <FAST>"]
    assert finished == ["item <fast>", "item <medium>", "item <slow>"]  # ran at the same time
    items = [n for n in result.trace.walk() if n.kind == "item"]
    assert [i.label for i in items] == ["slow", "medium", "fast"]  # the trace keeps item order too


def test_foreach_items_run_concurrently():
    """Each item waits until all three have started: only concurrent execution finishes."""
    state = {"started": 0}
    all_started = asyncio.Event()

    async def per(query):
        state["started"] += 1
        if state["started"] == 3:
            all_started.set()
        try:
            await asyncio.wait_for(all_started.wait(), HANG_GUARD)
        except TimeoutError:
            return "timed out waiting for the other items"
        return query

    result = fanout("foreach", ["a", "b", "c"], per)
    assert result.answer == ["item <a>", "item <b>", "item <c>"]


def test_foreach_merge_flattens_and_deduplicates():
    answers = {"item <a>": ["x", ["y"]], "item <b>": ["y", "z"], "item <c>": "x"}
    result = fanout("foreach_merge", ["a", "b", "c"], answers.__getitem__)
    assert result.error is None, result.error
    assert result.answer == ["x", "y", "z"]


def test_project_values_flat_keeps_repeats():
    answers = {"item <a>": ["x", ["y"]], "item <b>": ["y"]}
    result = fanout("project_values_flat", ["a", "b"], answers.__getitem__)
    assert result.answer == ["x", "y", "y"]


def test_project_gives_pairs():
    result = fanout("project", ["a", 2], lambda q: len(q))
    assert result.error is None, result.error
    assert result.answer == [["a", 8], [2, 8]]


def test_filter_keeps_items_with_yes():
    verdicts = {"item <1>": "yes", "item <2>": "no", "item <3>": True, "item <4>": "1",
                "item <5>": "true", "item <6>": False}
    result = fanout("filter", [1, 2, 3, 4, 5, 6], verdicts.__getitem__)
    assert result.error is None, result.error
    assert result.answer == [1, 3, 4, 5]


def test_filter_bad_verdict_is_a_clean_error():
    result = fanout("filter", ["a"], lambda q: {"verdict": "?"})
    assert result.answer is None
    assert "yes or no" in result.error


def test_project_values_on_pairs_sends_the_value_as_json():
    calls: list = []
    result = fanout("projectValues", [["Paris", "France"], ["Rome", "Italy"]], lambda q: q[6:-1].upper(), calls)
    assert result.error is None, result.error
    assert result.answer == [["Paris", '"FRANCE"'], ["Rome", '"ITALY"']]
    assert ("per", 'item <"France">') in calls


def test_select_applies_sub_operations():
    src = FANOUT.replace("(project_values)", "(select_flat)").replace("#1>", "#1")
    result = run_src(src.format(op="select_flat"), {"question": "q"},
                     {"make": lambda q: 1, "per": lambda q: [[1, [2, [3]]], [4]]})
    assert result.error is None, result.error
    assert result.answer == [1, 2, 3, 4]


def test_fan_out_with_named_input_too():
    src = '''
handler make = fn(fn="make")
handler per = fn(fn="per")
program p(question, sep) {
    QS: [make] items
    QS: (foreach) [per] #1#sep#question
}
main p
'''
    result = run_src(src, {"question": "Q", "sep": ":"}, {"make": lambda q: ["a", "b"], "per": echo})
    assert result.error is None, result.error
    assert result.answer == ["a:Q", "b:Q"]


def test_fan_out_items_see_the_step_query_not_other_answers_json():
    src = '''
handler make = fn(fn="make")
handler per = fn(fn="per")
program p(question) {
    QS: [make] items
    QS: (foreach) [per] "#1" in #question
}
main p
'''
    result = run_src(src, {"question": "the text"}, {"make": lambda q: ["x"], "per": echo})
    assert result.answer == ['"x" in the text']


# --- conditions and [EOQ] ----------------------------------------------------------------------

BRANCH = '''
handler make = fn(fn="make")
handler tag = fn(fn="tag")
program p(question) {
    QS: [make] #question
    if #1 == "yes" {
        QS: [tag] then-branch
        QS: [EOQ]
    } else {
        QS: [tag] else-branch
    }
    QS: [tag] after
}
main p
'''


def test_if_true_branch_and_eoq_ends_early():
    calls: list = []
    result = run_src(BRANCH, {"question": "yes"}, {"make": echo, "tag": lambda q: f"<{q}>"}, calls)
    assert result.error is None, result.error
    assert result.answer == "<then-branch>"
    assert [q for name, q in calls] == ["yes", "then-branch"]


def test_else_branch_then_continues():
    calls: list = []
    result = run_src(BRANCH, {"question": "no"}, {"make": echo, "tag": lambda q: f"<{q}>"}, calls)
    assert result.error is None, result.error
    assert result.answer == "<after>"
    assert [q for name, q in calls] == ["no", "else-branch", "after"]


def test_eoq_first_gives_none():
    src = '''
handler tag = fn(fn="tag")
program p(question) {
    QS: [EOQ]
    QS: [tag] never
}
main p
'''
    calls: list = []
    result = run_src(src, {"question": "q"}, {"tag": echo}, calls)
    assert result.error is None
    assert result.answer is None
    assert calls == []


LEN = '''
handler make = fn(fn="make")
handler tag = fn(fn="tag")
program p(question) {
    QS: [make] #question
    if len(#1) > 2 {
        QS: [tag] long (#1)
    } else {
        QS: [tag] short (#1)
    }
}
main p
'''


@pytest.mark.parametrize("value, expected", [
    (["a", "b", "c"], 'long (["a", "b", "c"])'),
    (["a"], 'short (["a"])'),
    ("abcd", 'long ("abcd")'),
    ("ab", 'short ("ab")'),
])
def test_len_condition(value, expected):
    result = run_src(LEN, {"question": "q"}, {"make": lambda q: value, "tag": echo})
    assert result.error is None, result.error
    assert result.answer == expected


def test_branch_steps_are_not_visible_after_the_if():
    src = LEN.replace("    }\n}", "    }\n    QS: [tag] #2\n}")
    assert "QS: [tag] #2\n}" in src
    session = session_with({"make": echo, "tag": echo})
    with pytest.raises(DecompError, match="#2 refers to a step that has not run"):
        session.load("x.decomp", text=src)


def test_len_of_a_number_is_a_clean_error():
    result = run_src(LEN, {"question": "q"}, {"make": lambda q: 5, "tag": echo})
    assert result.answer is None
    assert "len()" in result.error


def test_conditions_with_and_or_not_and_in():
    src = '''
handler make = fn(fn="make")
handler tag = fn(fn="tag")
program p(question) {
    QS: [make] #question
    if not (#1 == "b") and ("a" in #question or len(#1) == 0) {
        QS: [tag] yes
    } else {
        QS: [tag] no
    }
}
main p
'''
    fns = {"make": echo, "tag": echo}
    assert run_src(src, {"question": "a"}, fns).answer == "yes"
    assert run_src(src, {"question": "b"}, fns).answer == "no"
    assert run_src(src, {"question": "c"}, fns).answer == "no"


@pytest.mark.parametrize("answer, branch", [
    ("no", "else"), ("No ", "else"), ("false", "else"), ("0", "else"), ("", "else"), ([], "else"),
    (False, "else"), (0, "else"), ("yes", "then"), ("anything", "then"), ([0], "then"), (True, "then"),
])
def test_truth_of_a_bare_reference(answer, branch):
    src = '''
handler make = fn(fn="make")
handler tag = fn(fn="tag")
program p(question) {
    QS: [make] x
    if #1 {
        QS: [tag] then
    } else {
        QS: [tag] else
    }
}
main p
'''
    result = run_src(src, {"question": "q"}, {"make": lambda q: answer, "tag": echo})
    assert result.error is None, result.error
    assert result.answer == branch


def test_comparing_incompatible_values_is_a_clean_error():
    src = '''
handler make = fn(fn="make")
program p(question) {
    QS: [make] x
    if #1 < 3 {
        QS: [make] y
    }
}
main p
'''
    result = run_src(src, {"question": "q"}, {"make": lambda q: "text"})
    assert result.answer is None
    assert "cannot compare" in result.error


# --- run-time errors are results, not exceptions ------------------------------------------------

DECOMPOSER = '''
handler dec = decomposer(examples="""QC: example
QS: [echo] step
A: "step"
QS: [EOQ]
""")
handler echo = fn(fn="echo")
main dec
'''


def test_unknown_handler_at_run_time_is_a_clean_error():
    model = FakeModel(script={"do it": ["[nosuch] please", "[EOQ]"]})
    session = session_with({"echo": echo}, model=model)
    result = session.run(session.load("x.decomp", text=DECOMPOSER), {"question": "do it"})
    assert isinstance(result, RunResult)
    assert result.answer is None
    assert "unknown handler [nosuch]" in result.error
    assert result.trace.error == result.error


def test_reference_to_a_missing_answer_at_run_time_is_a_clean_error():
    model = FakeModel(script={"do it": ["[echo] first", "[echo] use #5", "[EOQ]"]})
    session = session_with({"echo": echo}, model=model)
    result = session.run(session.load("x.decomp", text=DECOMPOSER), {"question": "do it"})
    assert result.answer is None
    assert "#5 refers to an answer that does not exist" in result.error
    assert "#1" in result.error  # lists the answers there are


def test_handler_exception_of_the_language_is_caught_into_the_result():
    from decomp.dsl.errors import HandlerError

    def boom(query):
        raise HandlerError("boom went the handler")

    src = '''
handler b = fn(fn="b")
program p(question) {
    QS: [b] #question
}
main p
'''
    result = run_src(src, {"question": "q"}, {"b": boom})
    assert result.answer is None
    assert "boom went the handler" in result.error
    steps = [n for n in result.trace.walk() if n.kind == "step"]
    assert steps and steps[0].error and "boom" in steps[0].error


def test_missing_row_field_is_a_clean_error():
    src = '''
handler echo = fn(fn="echo")
program p(question, context) {
    QS: [echo] #question #context
}
main p
'''
    result = run_src(src, {"question": "q"})
    assert result.answer is None
    assert "context" in result.error


def test_unknown_handler_in_a_program_is_caught_at_load():
    session = session_with({"echo": echo})
    with pytest.raises(DecompError, match=r"unknown handler \[nosuch\]"):
        session.load("x.decomp", text="program p(question) {\n    QS: [nosuch] #question\n}\nmain p\n")


def test_reference_to_a_later_step_is_caught_at_load():
    session = session_with({"echo": echo})
    with pytest.raises(DecompError, match="#2"):
        session.load("x.decomp", text="handler echo = fn(fn=\"echo\")\n"
                     "program p(question) {\n    QS: [echo] #2\n    QS: [echo] x\n}\nmain p\n")


# --- recursion ------------------------------------------------------------------------------------

COUNT = '''
handler rest = fn(fn="rest")
handler zero = fn(fn="zero")
handler inc = fn(fn="inc")
program count(xs) with max_depth = {bound} {{
    if len(#xs) == 0 {{
        QS: [zero] #xs
    }} else {{
        QS: [rest] #xs
        QS: [count] #2
        QS: [inc] #3
    }}
}}
main count
'''
COUNT_FNS = {"rest": lambda q: json.loads(q)[1:], "zero": lambda q: 0, "inc": lambda q: int(q) + 1}


@pytest.mark.parametrize("xs", [[], ["a"], ["a", "b"], ["a", "b", "c"]])
def test_recursive_program_counts_a_list(xs):
    result = run_src(COUNT.format(bound=4), {"xs": xs}, COUNT_FNS)
    assert result.error is None, result.error
    assert result.answer == len(xs)


def test_recursion_beyond_max_depth_is_a_clean_error():
    # main is one activation of [count]; each element adds one more: 4 elements need 5
    result = run_src(COUNT.format(bound=4), {"xs": ["a", "b", "c", "d"]}, COUNT_FNS)
    assert result.answer is None
    assert "max_depth" in result.error
    assert "[count]" in result.error and "4" in result.error


def test_recursive_program_without_max_depth_is_rejected_at_load():
    src = COUNT.format(bound=4).replace(" with max_depth = 4", "")
    session = session_with(COUNT_FNS)
    with pytest.raises(DecompError, match="max_depth"):
        session.load("x.decomp", text=src)


def test_session_wide_max_depth():
    session = session_with(COUNT_FNS, max_depth=3)
    module = session.load("x.decomp", text=COUNT.format(bound=50))
    ok = session.run(module, {"xs": ["a", "b"]})
    assert ok.error is None, ok.error
    assert ok.answer == 2
    deep = session.run(module, {"xs": ["a", "b", "c"]})
    assert deep.answer is None
    assert "limit of 3" in deep.error


def test_session_default_max_depth_stops_runaway_recursion():
    session = session_with(COUNT_FNS)
    module = session.load("x.decomp", text=COUNT.format(bound=1000))
    result = session.run(module, {"xs": list(range(100))})
    assert result.answer is None
    assert f"limit of {session.max_depth}" in result.error


def test_program_called_from_a_step_gets_json_first_parameter():
    src = '''
handler make = fn(fn="make")
handler echo = fn(fn="echo")
program inner(words, sep) {
    QS: [echo] #words joined by #sep
}
program outer(question, sep) {
    QS: [make] x
    QS: [inner] #1
}
main outer
'''
    result = run_src(src, {"question": "q", "sep": "+"}, {"make": lambda q: ["a", "b"], "echo": echo})
    assert result.error is None, result.error
    assert result.answer == '["a", "b"] joined by +'


# --- traces ----------------------------------------------------------------------------------------

def test_trace_has_step_item_and_call_nodes():
    answers = {"item <a>": "A", "item <b>": "B"}
    result = fanout("foreach", ["a", "b"], answers.__getitem__)
    assert result.error is None, result.error
    root = result.trace
    assert root.kind == "row"
    assert root.answer == ["A", "B"]
    steps = [c for c in root.children if c.kind == "step"]
    assert [s.label for s in steps] == ["[make] items", "(foreach) [per] item <#1>"]
    first, second = steps
    assert first.handler == "make" and first.operator == "select"
    assert first.query == "items" and first.answer == ["a", "b"]
    assert first.location == "x.decomp:5"
    assert [c.kind for c in first.children] == ["call"]
    assert first.children[0].query == "items" and first.children[0].answer == ["a", "b"]
    assert second.operator == "foreach" and second.answer == ["A", "B"]
    items = second.children
    assert [i.kind for i in items] == ["item", "item"]
    assert [i.label for i in items] == ["a", "b"]
    assert [i.query for i in items] == ["item <a>", "item <b>"]
    assert [i.answer for i in items] == ["A", "B"]
    for item, expected in zip(items, ["A", "B"]):
        calls = [c for c in item.children if c.kind == "call"]
        assert len(calls) == 1
        assert calls[0].handler == "per" and calls[0].answer == expected
        assert calls[0].query == item.query
    assert all(n.ok for n in root.walk())
    json.dumps(root.to_dict())  # serialisable


def test_trace_records_model_prompts_and_errors():
    model = FakeModel(mapping={"hello": '"hi"'})
    src = '''
handler ask = prompt(text="Q: x?\\nA: y\\n")
program p(question) {
    QS: [ask] #question
    QS: [ask] unanswerable
}
main p
'''
    session = Session(model=model)
    result = session.run(session.load("x.decomp", text=src), {"question": "hello"})
    assert result.answer is None
    assert "unanswerable" in result.error
    models = [n for n in result.trace.walk() if n.kind == "model"]
    assert models[0].prompt.endswith("Q: hello\nA:")
    assert models[0].raw_output == '"hi"'
    assert models[1].error is not None
    steps = [n for n in result.trace.walk() if n.kind == "step"]
    assert steps[0].answer == "hi" and steps[0].error is None
    assert steps[1].error is not None


def test_trace_of_nested_program_calls():
    result = run_src(COUNT.format(bound=4), {"xs": ["a"]}, COUNT_FNS)
    assert result.error is None, result.error
    calls = [n for n in result.trace.walk() if n.kind == "call" and n.handler == "count"]
    assert len(calls) == 1
    assert calls[0].query == "[]"
    assert calls[0].answer == 0
    # the program's own steps: its children, and the children of its `if` nodes
    inner_steps = [n for c in calls[0].children for n in ([c] if c.kind == "step" else c.children)
                   if n.kind == "step"]
    assert [s.handler for s in inner_steps] == ["zero"]


# --- steps that fail at the same time (issue 22 item 4) ------------------------------------------

TWO_FAIL = '''
handler calc = fn(fn="calc")
handler most = fn(fn="most")
handler gate = fn(fn="gate")
program p(question) {
    QS: [calc] #question
    QS: [most] #question
    QS: [gate] #question
    QS: [gate] #1 #2 #3
}
main p
'''

TRACEBACK = 'Traceback (most recent call last):\n  File "most.py", line 2, in most\nValueError: no most'


def failing_together() -> dict:
    """[calc] and [most] both wait for [gate], which lets them go after a few turns of the event
    loop; they resume in the order they began waiting and fail in the same turn, [calc] first
    (before the row's end can cancel [most]). [most]'s error carries a traceback as details."""
    go = asyncio.Event()

    async def gate(query):
        for _ in range(5):
            await asyncio.sleep(0)
        go.set()
        return "open"

    async def calc(query):
        await asyncio.wait_for(go.wait(), HANG_GUARD)
        raise HandlerError("division by zero")

    async def most(query):
        await asyncio.wait_for(go.wait(), HANG_GUARD)
        raise HandlerError("function most raised ValueError: no most", details=TRACEBACK)

    return {"gate": gate, "calc": calc, "most": most}


def test_steps_failing_at_the_same_time_are_each_named_under_their_own_step():
    for _ in range(5):  # the same every time: no race decides it
        result = run_src(TWO_FAIL, {"question": "q"}, failing_together())
        assert result.error == "[calc] fn, x.decomp:6:5: division by zero"
        assert result.also_failed == ("[most] fn, x.decomp:7:5: function most raised ValueError: no most",)
        steps = {n.handler: n for n in result.trace.walk() if n.kind == "step" and n.error}
        assert sorted(steps) == ["calc", "most"]
        assert steps["calc"].error == result.error and steps["most"].error == result.also_failed[0]
        # each error's details are its own: [most]'s traceback is never under [calc]'s message
        assert result.trace.failure_details(result.error) is None
        assert result.trace.failure_details(result.also_failed[0]) == TRACEBACK


def test_a_step_failing_alone_has_nothing_also_failed():
    functions = {**failing_together(), "most": lambda q: "fine"}
    result = run_src(TWO_FAIL, {"question": "q"}, functions)
    assert result.error == "[calc] fn, x.decomp:6:5: division by zero"
    assert result.also_failed == ()


def test_items_of_a_fan_out_failing_at_the_same_time_are_each_kept():
    go = asyncio.Event()

    async def item(query):
        await asyncio.wait_for(go.wait(), HANG_GUARD)
        raise HandlerError(f"bad item {query}")

    src = '''
handler item = fn(fn="item")
handler gate = fn(fn="gate")
program p(question) {
    QS: [gate] #question
    QS: (foreach) [item] #1
}
main p
'''
    # the items wait for an event set before they start: they fail in the same turn, "a" first
    go_first = {"item": item, "gate": lambda q: (go.set(), ["a", "b"])[1]}
    result = run_src(src, {"question": "q"}, go_first)
    assert result.error.endswith("bad item a") and result.error.startswith("[item] fn")
    assert len(result.also_failed) == 1 and result.also_failed[0].endswith("bad item b")


def test_a_reference_error_names_the_step_handler_and_line():
    model = FakeModel(script={"do it": ["[echo] first", "[echo] use #5", "[EOQ]"]})
    session = session_with({"echo": echo}, model=model)
    result = session.run(session.load("x.decomp", text=DECOMPOSER), {"question": "do it"})
    assert result.error.startswith("[echo] fn")
    assert "#5 refers to an answer that does not exist" in result.error
