"""The conditions `ok(#n)` and `depth()`: parsing (nodes and spans), syntax errors in words of the
language, `decomp check` errors, and the words `ok` / `depth` still free as names."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from decomp.dsl import nodes
from decomp.dsl.errors import DecompSyntaxError
from decomp.dsl.parser import parse_module
from decomp.runtime.cli import main
from decomp.runtime.engine.session import Session

from tests.helpers import registry_with

INTERNALS = ("Token(", "_EOL", "__ANON", "Traceback", "Unexpected", "lark", "REF", "LPAR", "RPAR", "$END")


def condition_of(cond: str, params: str = "question") -> nodes.Expr:
    src = (f"handler a = python(function=\"capwords\")\nprogram p({params}) {{\n    QS: [a] #question\n"
           f"    if {cond} {{\n        QS: [a] #1\n    }}\n}}\n")
    module = parse_module(src, "t.decomp")
    stmt = module.programs[0].body[1]
    assert isinstance(stmt, nodes.If)
    return stmt.condition


def span_of(node) -> tuple[int, int, int, int]:
    s = node.span
    return s.line, s.column, s.end_line, s.end_column


# ------------------------------------------------------------------ parsing
def test_ok_parses_to_an_ok_node_with_its_reference_and_spans():
    cond = condition_of("ok(#1)")
    assert isinstance(cond, nodes.Ok)
    assert cond.ref.index == 1 and cond.ref.name is None
    # `    if ok(#1) {`: ok starts at column 8, #1 at column 11
    assert span_of(cond) == (4, 8, 4, 14)
    assert span_of(cond.ref) == (4, 11, 4, 13)
    assert list(nodes.condition_refs(cond)) == [cond.ref]


def test_ok_of_a_named_input():
    cond = condition_of("ok(#question)")
    assert isinstance(cond, nodes.Ok)
    assert cond.ref.name == "question" and cond.ref.index is None


def test_depth_parses_to_a_depth_node_with_its_span():
    cond = condition_of("depth() >= 3")
    assert isinstance(cond, nodes.Compare) and cond.op == ">="
    assert isinstance(cond.left, nodes.Depth)
    assert span_of(cond.left) == (4, 8, 4, 15)
    assert isinstance(cond.right, nodes.Literal) and cond.right.value == 3
    assert list(nodes.condition_refs(cond)) == []


def test_depth_alone_and_spaces_inside_the_parentheses():
    assert isinstance(condition_of("depth()"), nodes.Depth)
    assert isinstance(condition_of("depth( )"), nodes.Depth)
    assert isinstance(condition_of("ok( #1 )"), nodes.Ok)


def test_combinations_with_and_or_not_keep_precedence():
    cond = condition_of("ok(#1) and not depth() > 2 or len(#1) == 0")
    assert isinstance(cond, nodes.BoolOp) and cond.op == "or"
    left, right = cond.operands
    assert isinstance(left, nodes.BoolOp) and left.op == "and"
    first, negated = left.operands
    assert isinstance(first, nodes.Ok) and first.ref.index == 1
    assert isinstance(negated, nodes.Not)
    assert isinstance(negated.operand, nodes.Compare) and isinstance(negated.operand.left, nodes.Depth)
    assert isinstance(right, nodes.Compare) and isinstance(right.left, nodes.Len)
    assert span_of(cond) == (4, 8, 4, 50)
    assert [r.text for r in nodes.condition_refs(cond)] == ["#1", "#1"]


def test_not_ok_and_parenthesised_or():
    cond = condition_of("not (ok(#1) or depth() >= #question)")
    assert isinstance(cond, nodes.Not)
    inner = cond.operand
    assert isinstance(inner, nodes.BoolOp) and inner.op == "or"
    assert isinstance(inner.operands[0], nodes.Ok)
    compare = inner.operands[1]
    assert isinstance(compare.left, nodes.Depth)
    assert isinstance(compare.right, nodes.RefOperand) and compare.right.ref.name == "question"
    assert [r.text for r in nodes.condition_refs(cond)] == ["#1", "#question"]


def test_ok_compared_with_a_boolean():
    cond = condition_of("ok(#1) == false")
    assert isinstance(cond, nodes.Compare) and isinstance(cond.left, nodes.Ok)
    assert cond.right.value is False


# ------------------------------------------------------------------ syntax errors in words
def _syntax_error(cond: str) -> DecompSyntaxError:
    src = f"program p(x) {{\n    if {cond} {{\n        QS: [a] x\n    }}\n}}\n"
    with pytest.raises(DecompSyntaxError) as info:
        parse_module(src, "t.decomp")
    err = info.value
    text = err.format()
    for internal in INTERNALS:
        assert internal not in text, (internal, text)
    assert err.span.line == 2, text
    return err


def test_ok_without_a_reference_asks_for_one():
    err = _syntax_error("ok()")
    assert err.span.column == 11
    assert "reference" in err.expected and "#1" in err.expected


def test_ok_of_a_bare_word_asks_for_a_reference():
    err = _syntax_error("ok(x)")
    assert err.span.column == 11
    assert "reference" in err.expected


def test_ok_of_two_references_is_refused():
    err = _syntax_error("ok(#1, #2)")
    assert "')'" in err.expected


def test_depth_with_an_argument_is_refused_at_the_argument():
    err = _syntax_error("depth(#1)")
    assert "takes no argument" in err.message and err.expected == "depth()"
    assert (err.span.column, err.span.end_column) == (14, 16)  # under `#1`


def test_depth_without_parentheses_is_refused():
    err = _syntax_error("depth > 1")
    assert err.span.column == 14
    assert "'('" in err.expected


def test_ok_without_parentheses_is_refused():
    err = _syntax_error("ok == true")
    assert "'('" in err.expected


# ------------------------------------------------------------------ decomp check
def test_check_reports_ok_beyond_the_steps_and_unknown_inputs(tmp_path):
    path = tmp_path / "a.decomp"
    path.write_text('handler h = python(function="capwords")\n'
                    'program p(question) {\n'
                    '    QS: [h] #question\n'
                    '    if ok(#9) or ok(#nope) {\n'
                    '        QS: [h] #1\n'
                    '    }\n'
                    '    if ok(#2) {\n'
                    '        QS: [h] #1\n'
                    '    }\n'
                    '}\n'
                    'main p\n')
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 1
    assert f"{path}:4:11: #9 refers to a step that has not run at this point" in result.output
    assert f"{path}:4:21: unknown input #nope" in result.output
    # #2 exists only inside the first if: not available after it
    assert f"{path}:7:11: #2 refers to a step that has not run" in result.output


def test_check_accepts_ok_of_earlier_steps_and_depth(tmp_path):
    path = tmp_path / "a.decomp"
    path.write_text('handler h = python(function="capwords")\n'
                    'program p(question) with max_depth = 3 {\n'
                    '    QS: [h] #question\n'
                    '    if ok(#1) and depth() < 3 {\n'
                    '        QS: [p] #1\n'
                    '    }\n'
                    '}\n'
                    'main p\n')
    result = CliRunner().invoke(main, ["check", str(path)])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ the words stay free as names
NAMES = '''
handler ok = fn(fn="echo")
handler depth = fn(fn="echo")
program p(question, depth, ok) {
    QS: [ok] #question #depth #ok
    QS: [depth] #1
    if ok(#2) and depth() == 1 and #depth == 3 and #ok == "yes" {
        QS: [ok] taken
    }
}
main p
'''


def test_ok_and_depth_remain_usable_as_handler_and_input_names():
    module = parse_module(NAMES, "t.decomp")
    assert {h.name for h in module.handlers} == {"ok", "depth"}
    assert [p.name for p in module.programs[0].params] == ["question", "depth", "ok"]
    session = Session(registry=registry_with({"echo": lambda q: q}))
    result = session.run(session.load("t.decomp", text=NAMES), {"question": "q", "depth": 3, "ok": "yes"})
    assert result.error is None, result.error
    assert result.answer == "taken"
    # and the branch is not taken when the named input differs
    result = session.run(session.load("t.decomp", text=NAMES), {"question": "q", "depth": 2, "ok": "yes"})
    assert result.error is None and result.answer == '"q 2 yes"'  # step 2 got #1 as JSON text


def test_ok_and_depth_as_program_main_and_option_names():
    src = ('handler h = python(function="capwords", description = ok)\n'
           'program ok(depth) {\n    QS: [h] #depth\n}\n'
           'program depth(ok) {\n    QS: [ok] #ok\n}\n'
           'main depth\n')
    module = parse_module(src, "t.decomp")
    assert [p.name for p in module.programs] == ["ok", "depth"]
    assert module.main.target == "depth"
