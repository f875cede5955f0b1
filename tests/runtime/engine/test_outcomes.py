"""Step outcomes: `Failed(value)` from Python handlers through select, foreach, programs and
decomposers; `ok(#n)` and `depth()` at run time; the row's outcome in `RunResult` and in a
dataset run's results lines and summary; the step cache keeping outcomes; aborts still ending
the row."""
from __future__ import annotations

from decomp.handlers.plugins import builtin_registry
import json

import pytest

import decomp
from decomp import Environment, Failed, FakeModel, StepResult
from decomp.runtime.runs.api import run_dataset
from decomp.dsl.values import outcome
from decomp.handlers.registry import Registry
from decomp.runtime.engine.budgets import Budget
from decomp.runtime.engine.cache import StepCache
from decomp.runtime.engine.session import Session


def registry(**functions) -> Registry:
    """The built-in kinds; `functions` usable as python(function="name")."""
    reg = builtin_registry()
    for name, fn in functions.items():
        reg.add_function(fn, name)
    return reg


def run(src: str, fields: dict | None = None, *, functions: dict | None = None, **session_kwargs):
    session = Session(registry=registry(**(functions or {})), default_model=None, **session_kwargs)
    return session.run(session.load("x.decomp", text=src), {"question": "q", **(fields or {})})


def fail_on(word: str):
    def f(query):
        return Failed(f"no {query}") if word in query else query.upper()
    return f


def walk(trace, kind=None):
    return [n for n in trace.walk() if kind is None or n.kind == kind]


# ------------------------------------------------------------------ the value itself
def test_outcome_splits_failed_answers():
    assert outcome(Failed([1])) == ([1], False)
    assert outcome([1]) == ([1], True)
    assert outcome(None) == (None, True)
    assert decomp.Failed is Failed
    assert Failed(1) == Failed(1) and Failed(1) != Failed(2)


# ------------------------------------------------------------------ select
SELECT = '''
handler h = python(function="h")
handler tell = python(function="tell")
program p(question) {
    QS: [h] #question
    if ok(#1) {
        QS: [tell] ok #1
    } else {
        QS: [tell] failed #1
    }
}
main p
'''


def test_failed_select_step_answers_its_value_and_ok_is_false():
    functions = {"h": fail_on("bad"), "tell": lambda query: query}
    failed = run(SELECT, {"question": "bad"}, functions=functions)
    assert failed.error is None, failed.error
    assert failed.answer == 'failed "no bad"'  # the step's answer is the value, as JSON text
    assert not failed.failed and failed.succeeded  # the last step (tell) is ok
    good = run(SELECT, {"question": "fine"}, functions=functions)
    assert good.answer == 'ok "FINE"' and not good.failed

    step = walk(failed.trace, "step")[0]
    assert step.failed and step.answer == "no bad"
    call = walk(failed.trace, "call")[0]
    assert call.failed and call.answer == "no bad"
    assert not walk(good.trace, "step")[0].failed


def test_a_program_whose_last_step_failed_fails_but_the_row_answers():
    src = 'handler h = python(function="h")\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n'
    result = run(src, {"question": "bad"}, functions={"h": fail_on("bad")})
    assert result.error is None and result.ok
    assert result.answer == "no bad"
    assert result.failed and not result.succeeded
    assert result.trace.failed and result.trace.answer == "no bad"


def test_python_failed_value_is_made_json():
    src = 'handler h = python(function="h")\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n'
    result = run(src, functions={"h": lambda query: Failed((query, (1,), [(3,)]))})
    assert result.failed
    assert result.answer == ["q", [1], [[3]]]


def test_python_failed_value_that_is_not_json_is_a_row_error():
    src = 'handler h = python(function="h")\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n'
    result = run(src, functions={"h": lambda query: Failed(object())})
    assert result.error is not None and "[h]" in result.error


def test_ok_of_a_named_input_is_true():
    src = ('handler tell = python(function="tell")\nprogram p(question) {\n    QS: [tell] first\n'
           '    if ok(#question) and ok(#1) {\n        QS: [tell] yes\n    }\n}\nmain p\n')
    result = run(src, functions={"tell": lambda query: query})
    assert result.answer == "yes"


def test_not_ok_takes_the_recovery_branch_and_earlier_failures_do_not_fail_the_program():
    src = '''
handler h = python(function="h")
handler tell = python(function="tell")
program p(question) {
    QS: [h] bad
    QS: [h] fine
    if not ok(#1) and ok(#2) {
        QS: [tell] recovered
    }
}
main p
'''
    result = run(src, functions={"h": fail_on("bad"), "tell": lambda query: query})
    assert result.error is None
    assert result.answer == "recovered" and not result.failed


def test_program_ending_at_eoq_after_a_failed_step_fails():
    src = '''
handler h = python(function="h")
program p(question) {
    QS: [h] #question
    if not ok(#1) {
        QS: [EOQ]
    }
    QS: [h] never
}
main p
'''
    result = run(src, {"question": "bad"}, functions={"h": fail_on("bad")})
    assert result.failed and result.answer == "no bad"


# ------------------------------------------------------------------ foreach
FOREACH = '''
handler items = python(function="items")
handler h = python(function="h")
program p(question) {
    QS: [items] #question
    QS: (foreach) [h] #1
}
main p
'''


def test_foreach_fails_when_any_item_failed_and_keeps_every_value():
    functions = {"items": lambda query: query.split(), "h": fail_on("bad")}
    result = run(FOREACH, {"question": "a bad c"}, functions=functions)
    assert result.error is None
    assert result.failed
    assert result.answer == ["A", "no bad", "C"]
    items = [n for n in walk(result.trace, "item")]
    assert [(i.label, i.failed) for i in items] == [("a", False), ("bad", True), ("c", False)]
    step = walk(result.trace, "step")[1]
    assert step.failed and step.answer == ["A", "no bad", "C"]

    ok = run(FOREACH, {"question": "a c"}, functions=functions)
    assert not ok.failed and ok.answer == ["A", "C"]


def test_foreach_over_an_empty_list_is_ok():
    result = run(FOREACH, {"question": ""}, functions={"items": lambda query: [], "h": fail_on("bad")})
    assert result.error is None and result.answer == [] and not result.failed


def test_foreach_merge_keeps_the_failed_outcome():
    src = FOREACH.replace("(foreach)", "(foreach_merge)")
    functions = {"items": lambda query: query.split(), "h": lambda query: Failed([query, "x"])}
    result = run(src, {"question": "a b"}, functions=functions)
    assert result.failed and result.answer == ["a", "x", "b"]


# ------------------------------------------------------------------ programs calling programs
def test_a_called_program_passes_its_outcome_to_the_caller():
    src = '''
handler h = python(function="h")
handler tell = python(function="tell")
program inner(task) {
    QS: [h] #task
}
program p(question) {
    QS: [inner] #question
    if ok(#1) {
        QS: [tell] inner ok
    } else {
        QS: [tell] inner failed
    }
    QS: [inner] #question
}
main p
'''
    functions = {"h": fail_on("bad"), "tell": lambda query: query}
    result = run(src, {"question": "bad"}, functions=functions)
    assert result.error is None
    assert result.failed and result.answer == "no bad"
    tells = [n.answer for n in walk(result.trace, "call") if n.handler == "tell"]
    assert tells == ["inner failed"]
    inner_calls = [n for n in walk(result.trace, "call") if n.handler == "inner"]
    assert [c.failed for c in inner_calls] == [True, True]

    result = run(src, {"question": "fine"}, functions=functions)
    assert not result.failed and result.answer == "FINE"
    assert [n.answer for n in walk(result.trace, "call") if n.handler == "tell"] == ["inner ok"]


# ------------------------------------------------------------------ decomposer
DECOMPOSER = '''
handler h = python(function="h")
handler dec = decomposer(examples="""QC: an example
QS: [h] step one
A: "STEP ONE"
QS: [EOQ]
""")
program p(question) {
    QS: [dec] #question
    if ok(#1) {
        QS: [EOQ]
    }
    QS: [h] fallback
}
main dec
'''


def run_decomposer(lines: list[str], main: str = "dec"):
    model = FakeModel(script={"do it": lines})
    session = Session(registry=registry(h=fail_on("bad")), model=model)
    module = session.load("x.decomp", text=DECOMPOSER.replace("main dec", f"main {main}"))
    return session.run(module, {"question": "do it"})


def test_decomposer_outcome_is_its_last_answers():
    failed = run_decomposer(["[h] bad one", "[EOQ]"])
    assert failed.error is None, failed.error
    assert failed.failed and failed.answer == "no bad one"

    recovered = run_decomposer(["[h] bad one", "[h] fine", "[EOQ]"])
    assert not recovered.failed and recovered.answer == "FINE"

    ok_then_failed = run_decomposer(["[h] fine", "[h] bad #1", "[EOQ]"])
    assert ok_then_failed.failed and ok_then_failed.answer == 'no bad "FINE"'


def test_decomposer_failed_outcome_reaches_the_calling_program():
    result = run_decomposer(["[h] bad one", "[EOQ]"], main="p")
    assert result.error is None, result.error
    assert not result.failed and result.answer == "FALLBACK"
    result = run_decomposer(["[h] fine", "[EOQ]"], main="p")
    assert not result.failed and result.answer == "FINE"


# ------------------------------------------------------------------ depth()
def test_depth_counts_the_running_program_on_the_call_stack():
    seen: list[str] = []

    def log(query):
        seen.append(query)
        return query + "+"

    src = '''
handler log = python(function="log")
program r(question) with max_depth = 5 {
    QS: [log] #question
    if depth() >= 3 {
        QS: [EOQ]
    }
    QS: [r] #1
}
main r
'''
    result = run(src, {"question": "x"}, functions={"log": log})
    assert result.error is None, result.error
    assert seen == ["x", "x+", "x++"]  # depth 1, 2, 3: the third stops
    assert not result.failed


def test_depth_is_one_at_the_top_and_in_another_program_called_from_it():
    src = '''
handler tell = python(function="tell")
program other(task) {
    QS: [tell] other
    if depth() == 1 {
        QS: [tell] other at 1
    }
}
program p(question) {
    QS: [other] x
    if depth() == 1 {
        QS: [tell] #1 top at 1
    }
}
main p
'''
    result = run(src, functions={"tell": lambda query: query})
    assert result.answer == '"other at 1" top at 1'


def test_depth_in_mutual_recursion_counts_only_the_running_program():
    depths: list[str] = []
    src = '''
handler tell = python(function="tell")
program a(question) with max_depth = 4 {
    if depth() == 1 {
        QS: [tell] a1
    }
    if depth() == 2 {
        QS: [tell] a2
        QS: [EOQ]
    }
    QS: [b] x
}
program b(task) with max_depth = 4 {
    if depth() == 1 {
        QS: [tell] b1
    }
    QS: [a] y
}
main a
'''

    def tell(query):
        depths.append(query)
        return query

    result = run(src, functions={"tell": tell})
    assert result.error is None, result.error
    assert depths == ["a1", "b1", "a2"]


def test_depth_beyond_max_depth_ends_the_row():
    src = '''
handler log = python(function="log")
program r(question) with max_depth = 2 {
    QS: [log] #question
    if depth() >= 5 {
        QS: [EOQ]
    }
    QS: [r] #1
}
main r
'''
    result = run(src, functions={"log": lambda query: query})
    assert result.error is not None and "max_depth of 2" in result.error
    assert result.answer is None and not result.failed


# ------------------------------------------------------------------ aborts still end the row
def test_budget_exceeded_after_a_failed_step_ends_the_row():
    src = '''
handler h = python(function="h")
handler ask = prompt(text="Q: x\\nA: y\\n")
program p(question) {
    QS: [h] bad
    if not ok(#1) {
        QS: [ask] first
        QS: [ask] second
    }
}
main p
'''
    model = FakeModel(default="fine")
    session = Session(registry=registry(h=fail_on("bad")), model=model, budget=Budget(row_calls=1))
    result = session.run(session.load("x.decomp", text=src), {"question": "q"})
    assert result.error is not None and "budget" in result.error.lower()
    assert result.answer is None and not result.failed and not result.succeeded


def test_a_failed_step_is_no_abort_but_a_raising_handler_still_is_a_row_error():
    src = ('handler h = python(function="h")\nhandler boom = python(function="boom")\n'
           'program p(question) {\n    QS: [h] bad\n    QS: [boom] x\n}\nmain p\n')

    def boom(query):
        raise ValueError("kaput")

    result = run(src, functions={"h": fail_on("bad"), "boom": boom})
    assert result.error is not None and "kaput" in result.error and "[boom]" in result.error


# ------------------------------------------------------------------ the step cache
CACHED = 'handler h = python(function="h")\nprogram p(question) {\n    QS: [h] #question\n}\nmain p\n'


def _cached_run(path, fn, question="q"):
    session = Session(registry=registry(h=fn), cache=StepCache(path), default_model=None)
    return session.run(session.load("x.decomp", text=CACHED), {"question": question})


def test_a_failed_outcome_round_trips_through_the_step_cache(tmp_path):
    ran: list[str] = []

    def h(query):
        ran.append(query)
        return Failed({"why": query})

    path = tmp_path / "steps.sqlite"
    first = _cached_run(path, h)
    second = _cached_run(path, h)
    assert ran == ["q"]
    assert second.usage.cache_hits == 1
    assert (first.answer, first.failed) == ({"why": "q"}, True)
    assert (second.answer, second.failed) == ({"why": "q"}, True)
    assert walk(second.trace, "call")[0].cache_hit


@pytest.mark.parametrize("answer", [
    {"$failed": 1}, {"$failedok": 1}, {"$failedok": {"$failed": 2}}, {"$failed": 1, "other": 2}, [{"$failed": 1}],
])
def test_answers_that_look_like_the_cache_wrapping_round_trip_unchanged(tmp_path, answer):
    ran: list[str] = []

    def h(query):
        ran.append(query)
        return answer

    path = tmp_path / "steps.sqlite"
    first = _cached_run(path, h)
    second = _cached_run(path, h)
    assert ran == ["q"] and second.usage.cache_hits == 1
    assert (first.answer, first.failed) == (answer, False)
    assert (second.answer, second.failed) == (answer, False), "the cache changed the answer"


def test_a_failed_answer_whose_value_looks_like_the_wrapping_round_trips(tmp_path):
    def h(query):
        return Failed({"$failed": 1})

    path = tmp_path / "steps.sqlite"
    _cached_run(path, h)
    second = _cached_run(path, h)
    assert second.usage.cache_hits == 1
    assert (second.answer, second.failed) == ({"$failed": 1}, True)


# ------------------------------------------------------------------ dataset runs
class Coin(Environment):
    """A toy environment: `flip` succeeds on rows whose `lucky` is true; its summary names
    the row's group."""

    def __init__(self, fields):
        self.lucky, self.group, self.flips = bool(fields.get("lucky")), fields.get("group"), 0

    def step(self, action):
        self.flips += 1
        return StepResult("heads" if self.lucky else "tails", reward=1.0 if self.lucky else 0.0)

    def failed(self, observation):
        return observation == "tails"

    def summary(self):
        out = {"success": self.lucky, "flips": self.flips}
        if self.group is not None:
            out["group"] = self.group
        return out


COIN = '''
handler coin = environment(name="coin")
handler h = python(function="h")
program p(question) {
    QS: [coin] flip
    if ok(#1) {
        QS: [h] fine
    } else {
        QS: [h] #question
    }
}
main p
'''


def coin_registry() -> Registry:
    reg = registry(h=fail_on("bad"))
    reg.add_environment("coin", Coin)
    return reg


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_run_result_carries_the_environment_summary():
    session = Session(registry=coin_registry(), default_model=None)
    module = session.load("x.decomp", text=COIN)
    result = session.run(module, {"question": "bad", "lucky": False, "group": 2})
    assert result.failed and result.answer == "no bad"
    assert result.environments == {"coin": {"success": False, "flips": 1, "group": 2}}
    result = session.run(module, {"question": "bad", "lucky": True})
    assert not result.failed and result.answer == "FINE"
    assert result.environments == {"coin": {"success": True, "flips": 1}}


def test_results_lines_and_summary_record_outcomes_and_groups(tmp_path):
    rows = [
        {"id": "a", "question": "bad", "lucky": True, "group": 1},    # env ok -> ok
        {"id": "b", "question": "bad", "lucky": False, "group": 1},   # env fails, h fails -> failed
        {"id": "c", "question": "good", "lucky": False, "group": 2},  # env fails, h ok -> ok (self-judged)
        {"id": "d", "question": "boom", "lucky": True, "group": 2},   # a row error
    ]
    data = write_rows(tmp_path / "rows.jsonl", rows)

    def h(query):
        if query == "boom":
            raise RuntimeError("boom")
        return fail_on("bad")(query)

    reg = registry(h=h)
    reg.add_environment("coin", Coin)
    program = tmp_path / "coin.decomp"
    program.write_text(COIN.replace("QS: [h] fine", "QS: [h] #question"), encoding="utf-8")
    session = Session(registry=reg, default_model=None)
    done = run_dataset(program, data, session=session, run_dir=tmp_path / "run")
    records = {r["id"]: r for r in done.records()}
    assert {k: r["outcome"] for k, r in records.items()} == {"a": "failed", "b": "failed", "c": "ok", "d": "error"}
    assert records["a"]["answer"] == "no bad"
    assert records["a"]["environment"] == {"coin": {"success": True, "flips": 1, "group": 1}}
    assert records["d"]["environment"]["coin"]["success"] is True
    assert "error" in records["d"]

    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary == done.summary
    assert summary["rows"] == 4 and summary["failed"] == 1
    assert summary["failed_outcome"] == 2
    assert summary["success_rate"] == 0.25            # only c
    assert summary["env_success_rate"] == 0.5         # a and d
    assert summary["calls_per_row"] == 0.0            # no model calls
    assert summary["by_group"] == {
        "1": {"rows": 2, "failed_outcome": 2, "success_rate": 0.0, "env_success_rate": 0.5, "calls_per_row": 0.0},
        "2": {"rows": 2, "failed_outcome": 0, "success_rate": 0.5, "env_success_rate": 0.5, "calls_per_row": 0.0},
    }


def test_rows_without_environments_have_no_env_fields(tmp_path):
    data = write_rows(tmp_path / "rows.jsonl", [{"id": "a", "question": "bad"}, {"id": "b", "question": "ok"}])
    program = tmp_path / "p.decomp"
    program.write_text(CACHED, encoding="utf-8")
    session = Session(registry=registry(h=fail_on("bad")), default_model=None)
    done = run_dataset(program, data, session=session, run_dir=tmp_path / "run")
    records = done.records()
    assert [r["outcome"] for r in records] == ["failed", "ok"]
    assert all("environment" not in r for r in records)
    assert done.summary["failed_outcome"] == 1 and done.summary["success_rate"] == 0.5
    assert "env_success_rate" not in done.summary and "by_group" not in done.summary


def test_a_main_handler_that_fails_fails_the_row():
    session = Session(registry=coin_registry(), default_model=None)
    module = session.load("x.decomp", text='handler coin = environment(name="coin")\nmain coin\n')
    result = session.run(module, {"question": "flip", "lucky": False})
    assert result.error is None
    assert result.failed and result.answer == "tails"
    assert result.trace.failed and result.trace.answer == "tails"
    assert result.environments == {"coin": {"success": False, "flips": 1}}


def test_ok_of_a_step_inside_a_branch_that_ran():
    src = '''
handler h = python(function="h")
program p(question) {
    if true {
        QS: [h] bad
        if not ok(#1) {
            QS: [h] caught
        }
    }
}
main p
'''
    result = run(src, functions={"h": fail_on("bad")})
    assert result.error is None
    assert result.answer == "CAUGHT" and not result.failed


# ------------------------------------------------------------------ depth() through program(file=...)
LIB = '''
handler log = python(function="log")
program rec(n) with max_depth = 5 {
    QS: [log] #n
    if depth() >= 3 {
        QS: [EOQ]
    }
    QS: [rec] #1
}
program at_one(n) {
    if depth() == 1 {
        QS: [log] one
    } else {
        QS: [log] more
    }
}
'''


@pytest.mark.parametrize("main", [
    'import "lib.decomp"\nprogram p(question) {\n    QS: [rec] x\n}\nmain p\n',
    'handler r = program(file="lib.decomp", name="rec")\nprogram p(question) {\n    QS: [r] x\n}\nmain p\n',
], ids=["imported", "alias"])
def test_depth_through_a_program_file_alias_counts_its_target(tmp_path, main):
    """`handler r = program(file=..., name="rec")`: the first activation through [r] is rec's depth
    1, so the recursion stops after as many activations as when rec is called directly."""
    (tmp_path / "lib.decomp").write_text(LIB, encoding="utf-8")
    (tmp_path / "main.decomp").write_text(main, encoding="utf-8")
    seen: list[str] = []

    def log(query):
        seen.append(query)
        return query + "+"

    session = Session(registry=registry(log=log), default_model=None)
    result = session.run(session.load(tmp_path / "main.decomp"), {"question": "q"})
    assert result.error is None, result.error
    assert seen == ["x", "x+", "x++"]


def test_max_depth_through_a_program_file_alias_counts_its_target(tmp_path):
    """The bound too: through the alias, rec (max_depth = 5, never stopping by itself) ends the
    row after five activations, as when called directly."""
    (tmp_path / "lib.decomp").write_text(LIB.replace("depth() >= 3", "depth() >= 99"), encoding="utf-8")
    (tmp_path / "main.decomp").write_text(
        'handler r = program(file="lib.decomp", name="rec")\nprogram p(question) {\n    QS: [r] x\n}\nmain p\n',
        encoding="utf-8")
    seen: list[str] = []

    def log(query):
        seen.append(query)
        return query + "+"

    session = Session(registry=registry(log=log), default_model=None)
    result = session.run(session.load(tmp_path / "main.decomp"), {"question": "q"})
    assert result.error is not None and "max_depth of 5" in result.error
    assert seen == ["x", "x+", "x++", "x+++", "x++++"]
