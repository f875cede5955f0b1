"""Fan-outs over named inputs (`QS: (foreach) [h] #items`, issue 44 item 6) and over answers a
typed step gave as JSON text: through `Session` as programs run, the command line in a real
process, and a decomposer's own lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from decomp.dsl.errors import DecompError
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

from tests.helpers import registry_with

ROOT = Path(__file__).resolve().parents[3]


def run(src: str, fields: dict, functions: dict, calls: list | None = None):
    session = Session(registry=registry_with(functions, calls))
    return session.run(session.load("x.decomp", text=src), fields)


NAMED = '''
handler per = fn(fn="per")
program p(question, items) {{
    QS: ({op}) [per] item <#items>
}}
main p
'''


@pytest.mark.parametrize("op, items, per, expected", [
    ("foreach", ["Ada", "Alan"], str.upper, ["ITEM <ADA>", "ITEM <ALAN>"]),
    ("project_values", ["a", "b"], len, [8, 8]),
    ("foreach_flat", ["a", "b"], lambda q: [q[6], [q[6]]], ["a", "a", "b", "b"]),
    ("foreach_merge", ["a", "b", "a"], lambda q: [q[6], "x"], ["a", "x", "b"]),
    ("project", ["a", "b"], lambda q: q[6], [["a", "a"], ["b", "b"]]),
    ("filter", ["keep", "drop", "keep too"], lambda q: "yes" if "keep" in q else "no", ["keep", "keep too"]),
    ("projectValues", [["k1", "v1"], ["k2", "v2"]], lambda q: q[7:9], [["k1", "v1"], ["k2", "v2"]]),
])
def test_every_fan_out_operator_iterates_over_a_named_input(op, items, per, expected):
    calls: list = []
    result = run(NAMED.format(op=op), {"question": "q", "items": items}, {"per": per}, calls)
    assert result.error is None, result.error
    assert result.answer == expected
    assert len(calls) == len(items)
    labels = [n.label for n in result.trace.walk() if n.kind == "item"]
    assert len(labels) == len(items)


def test_a_named_input_holding_a_string_is_one_item_as_for_an_answer():
    result = run(NAMED.format(op="foreach"), {"question": "q", "items": "Ada Alan"}, {"per": str.upper})
    assert (result.error, result.answer) == (None, ["ITEM <ADA ALAN>"])


def test_a_named_input_holding_a_number_is_a_positioned_failure():
    result = run(NAMED.format(op="foreach"), {"question": "q", "items": 42}, {"per": str.upper})
    assert result.answer is None
    assert result.error == "[per] fn, x.decomp:4:31: #items: (foreach) cannot iterate over 42: not a list"


def test_with_a_numbered_reference_the_named_inputs_are_inserted_as_they_are():
    src = '''
handler make = fn(fn="make")
handler per = fn(fn="per")
program p(question, items) {
    QS: [make] go
    QS: (foreach) [per] #1 / #items
}
main p
'''
    result = run(src, {"question": "q", "items": ["x", "y"]}, {"make": lambda q: ["a", "b"], "per": lambda q: q})
    assert result.answer == ['a / ["x", "y"]', 'b / ["x", "y"]']


def test_plan_runs_the_steps_of_a_plan_given_as_a_named_input():
    src = '''
handler act = fn(fn="act")
program p(question, plan) {
    QS: (plan) [act] #plan
}
main p
'''
    plan = "Step 1: mix\nStep 2: bake\nExecution Order: (Step 1 AND Step 2)\n"
    calls: list = []
    result = run(src, {"question": "q", "plan": plan}, {"act": str.upper}, calls)
    assert result.error is None, result.error
    assert [q for _, q in calls] == ["mix", "bake"]


@pytest.mark.parametrize("query, found", [("#items and #question", "it names 2: #items, #question"),
                                          ("no reference", "(or, with no #n, one named input such as #items)")])
def test_a_fan_out_without_one_list_to_iterate_is_a_check_error(query, found):
    src = NAMED.replace("item <#items>", query).format(op="foreach")
    with pytest.raises(DecompError) as info:
        Session(registry=registry_with({"per": str.upper})).load("x.decomp", text=src)
    err = info.value
    assert (err.span.line, err.span.column) == (4, 25)
    assert "(foreach) needs exactly one #n reference, found 0" in err.message and found in err.message
    assert "one named input (#items)" in err.expected


DECOMPOSER = '''
handler echo = fn(fn="echo")
handler dec = decomposer(examples="""QC: an example
QS: [echo] step one
A: "step one"
QS: [EOQ]
""")
main dec
'''


def test_a_decomposer_line_may_iterate_over_an_input_and_is_told_when_none_exists():
    def decompose(line):
        session = Session(registry=registry_with({"echo": lambda q: f"<{q}>"}),
                          model=FakeModel(script={"do it": [line, "[EOQ]"]}))
        return session.run(session.load("x.decomp", text=DECOMPOSER), {"question": "do it"})

    assert decompose("(foreach) [echo] #question").answer == ["<do it>"]
    failed = decompose("(foreach) [echo] #words")
    assert failed.answer is None and "#words is not an input of this program" in failed.error


# ------------------------------------------------------------------ JSON text from a typed step
TYPED = '''
handler helper = fn(fn="helper"{returns})
handler per = fn(fn="per")
program p(question) {{
    QS: [helper] #question
    QS: (foreach) [per] #1
}}
main p
'''


def typed(answer: str, returns: str = ", returns=list[str]", calls: list | None = None):
    return run(TYPED.format(returns=returns), {"question": "q"}, {"helper": lambda q: answer, "per": str.upper},
               calls)


def test_json_text_from_a_step_declared_list_is_iterated_as_a_list():
    result = typed('["a", "b"]')
    assert (result.error, result.answer, result.failed) == (None, ["A", "B"], False)


def test_text_that_is_no_list_from_a_step_declared_list_fails_the_fan_out_without_running_it():
    calls: list = []
    result = typed("a and b", calls=calls)
    assert result.error is None and result.failed
    assert result.answer == "a and b"
    assert result.reason == ("(foreach) did not run: #1 is a failed answer, not a list "
                             "(the answer 'a and b' is not list[str])")
    assert [name for name, _ in calls] == ["helper"]  # never run on the text as one item
    step = [n for n in result.trace.walk() if n.kind == "step"][1]
    assert step.failed and step.facts["reason"] == result.reason


def test_untyped_json_text_stays_one_string_item_as_documented():
    result = typed('["a", "b"]', returns="")
    assert result.answer == ['["A", "B"]']


def test_a_failed_fan_out_whose_answer_is_a_list_is_still_iterated():
    src = '''
handler make = fn(fn="make")
handler check = fn(fn="check", returns=int)
handler per = fn(fn="per")
program p(question) {
    QS: [make] go
    QS: (foreach) [check] #1
    QS: (foreach) [per] #2
}
main p
'''
    result = run(src, {"question": "q"}, {"make": lambda q: ["1", "x"], "check": lambda q: q, "per": str})
    assert result.answer == ["1", "x"]  # #2 failed on its item "x", but is a list: its items run


# ------------------------------------------------------------------ from the command line
def test_the_command_line_runs_a_fan_out_over_a_named_input(tmp_path):
    (tmp_path / "shout.decomp").write_text('''handler upper = prompt(text="Q: {{ query }}\\nA:")

program shout(question, items: list[str]) {
    QS: (foreach) [upper] Say #items loudly.
}

main shout
''')
    (tmp_path / "answers.json").write_text(json.dumps({"mapping": {"Say a loudly.": "A", "Say b loudly.": "B"}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    done = subprocess.run([sys.executable, "-m", "decomp", "run", "shout.decomp", "-q", "go", "--field",
                           'items=["a", "b"]', "--model", "fake:answers.json"],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["A", "B"]


@pytest.mark.parametrize("returned, code, printed", [
    ('["a", "b"]', 0, '["A", "B"]'),
    ("a and b", 1, "reason: (foreach) did not run: #1 is a failed answer, not a list (the answer 'a and b' is "
                   "not list[str])"),
])
def test_the_command_line_reads_json_text_of_a_step_declared_list(tmp_path, monkeypatch, returned, code, printed):
    from click.testing import CliRunner

    from decomp.runtime.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "fan_out_text_helpers.py").write_text(f"def words(q):\n    return {returned!r}\n\n"
                                                      "def upper(q):\n    return q.upper()\n")
    (tmp_path / "p.decomp").write_text('''handler words = python(function="fan_out_text_helpers:words", returns=list[str])
handler upper = python(function="fan_out_text_helpers:upper")

program p(question) {
    QS: [words] #question
    QS: (foreach) [upper] #1
}

main p
''')
    result = CliRunner().invoke(main, ["run", "p.decomp", "-q", "go"])
    assert result.exit_code == code, result.output
    assert printed in result.output
