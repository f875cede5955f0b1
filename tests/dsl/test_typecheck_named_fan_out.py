"""The type checker over fan-outs that iterate over a named input (`QS: (foreach) [h] #items`):
the items take the parameter's item type, a `str` input is a warning (it runs once) and a
scalar an error, each at the reference, as for `#n` (decomp.dsl.typecheck)."""
from __future__ import annotations

import pytest

import decomp.handlers.kinds  # noqa: F401
from decomp.dsl import nodes
from decomp.dsl.answer_types import parse_type
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import parse_module
from decomp.dsl.typecheck import step_types
from decomp.runtime.engine.session import Session
from decomp.runtime.testing.fake import FakeModel

HEAD = '''handler name_of = prompt(text="", returns=str)
handler count = calculator()

program spaced(words: list[str]) -> str {
    QS: [name_of] #words
}

program person(who: str) -> str {
    QS: [name_of] #who
}

'''


def load(tmp_path, params: str, body: str):
    src = HEAD + f"program p({params}) {{\n{body}}}\nmain p\n"
    return Session(model=FakeModel()).load(tmp_path / "t.decomp", text=src)


LINE = HEAD.count("\n") + 2


def test_the_items_of_a_list_input_have_its_item_type(tmp_path):
    load(tmp_path, "question, items: list[str]", "    QS: (foreach) [person] #items\n")  # each item is str
    with pytest.raises(DecompError) as err:
        load(tmp_path, "question, items: list[str]", "    QS: (foreach) [spaced] #items\n")
    assert err.value.message == "[spaced] takes list[str], but each item of #items is str"
    assert (err.value.span.line, err.value.span.column) == (LINE, 28)


def test_a_string_input_is_a_warning_it_runs_once(tmp_path):
    loaded = load(tmp_path, "question: str", "    QS: (foreach) [person] #question\n")
    assert [(w.message, w.span.line, w.span.column, w.expected) for w in loaded.notices] == [
        ("(foreach) iterates over #question, which is str: it runs once, on the whole string", LINE, 28,
         "a list input, such as list[str]; #question is str")]


@pytest.mark.parametrize("op", ["foreach", "filter", "foreach_merge"])
def test_a_scalar_input_is_an_error_at_the_reference(tmp_path, op):
    with pytest.raises(DecompError) as err:
        load(tmp_path, "question, most: int", f"    QS: ({op}) [count] #most\n")
    assert err.value.message == f"({op}) iterates over #most, which is int, not a list"
    assert err.value.expected == "a list input, such as list[...]; #most is int"
    assert err.value.span.line == LINE


def test_an_untyped_input_checks_as_before(tmp_path):
    assert load(tmp_path, "question, items", "    QS: (foreach) [spaced] #items\n").notices == []


def test_the_answer_type_of_a_fan_out_over_an_input_follows_its_handler():
    module = parse_module(HEAD + "program p(items: list[str]) {\n    QS: (foreach) [person] #items\n}\n")
    program = next(p for p in module.programs if p.name == "p")
    types = step_types(program, {"person": parse_type("str")}, {"items": parse_type("list[str]")})
    assert types[1].text == "list[str]"


def test_list_refs_prefer_numbered_references():
    step = nodes.Step(nodes.Span("x", 1, 1, 1, 2), "foreach", "h", "#1 #items",
                      refs=(nodes.Ref(nodes.Span("x", 1, 1, 1, 3), index=1),
                            nodes.Ref(nodes.Span("x", 1, 4, 1, 10), name="items")))
    assert [r.text for r in step.list_refs] == ["#1"]
    named = nodes.Step(step.span, "foreach", "h", "#items", refs=step.refs[1:])
    assert [r.text for r in named.list_refs] == ["#items"]
