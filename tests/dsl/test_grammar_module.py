"""Modules (the `module` start symbol): declarations, option values, programs, conditions, spans."""
from __future__ import annotations

import pytest

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError
from decomp.dsl.parser import decode_string, parse_module, read_module

EXAMPLE = '''import "lib.decomp"
model default = "fake"
handler split = prompt(file="prompts/split.txt", max_tokens=64, stop=["\\n"])
handler words = regex(pattern=r"\\S+", all=true)
program reverse(seq) with max_depth = 8 {
    QS: [items] #seq
    if len(#1) < 4 {
        QS: [reverse_short] #1
        QS: [EOQ]
    }
    QS: (foreach) [letter] "#1"
}
main reverse
'''

VALUES = r'''# leading comment

import "a.decomp"   # trailing comment
import 'b.decomp'
model default = "fake"
model big = "openai:gpt-4" (temperature=0.5)
handler h = prompt(
    s1 = "tab\there \"quoted\" \\ back\nnl \u00e9",
    s2 = 'single \'q\'',
    raw = r"\d+\s",
    raw2 = R'\w',
    long = """line one
  line "two" # not a comment
last""",
    long2 = r\'\'\'a\nb\'\'\',
    n1 = 42, n2 = -7, n3 = 3.25, n4 = 1e3, n5 = -2.5E-2,
    b1 = true, b2 = false, z = null,
    lst = [1, "two", [3, null], true,],
    empty = [],
    multi = [
        "a",
        "b",
    ],
    id = some_ident,  # comment inside options
    hash = "#1 # not a comment",
)
handler noopts = program
handler emptyopts = prompt()
'''.replace("\\'\\'\\'", "'''")


def S(line, column, end_line, end_column, file="m.decomp"):
    return nodes.Span(file, line, column, end_line, end_column)


def _program(body: str, header: str = "program p(x) {") -> nodes.Program:
    return parse_module(f"{header}\n{body}}}\n", "m.decomp").programs[0]


# ------------------------------------------------------------------ the brief's example
def test_example_module_structure():
    m = parse_module(EXAMPLE, "x.decomp")
    assert m.path == "x.decomp"
    assert [i.path for i in m.imports] == ["lib.decomp"]
    assert [(d.name, d.spec, d.options) for d in m.models] == [("default", "fake", ())]
    assert [(h.name, h.kind) for h in m.handlers] == [("split", "prompt"), ("words", "regex")]
    split = m.handlers[0]
    assert {o.name: o.value.plain() for o in split.options} == {
        "file": "prompts/split.txt", "max_tokens": 64, "stop": ["\n"]}
    assert m.handlers[1].option("pattern").value.value == "\\S+"
    assert m.handlers[1].option("all").value == nodes.Value(S(4, 43, 4, 47, "x.decomp"), True, "bool")
    (program,) = m.programs
    assert program.name == "reverse"
    assert [p.name for p in program.params] == ["seq"]
    assert program.option("max_depth").value.value == 8
    assert m.main == nodes.Main(S(13, 1, 13, 13, "x.decomp"), "reverse")
    first, cond, last = program.body
    assert (first.handler, first.query, first.refs[0].name) == ("items", "#seq", "seq")
    assert isinstance(cond, nodes.If)
    assert cond.condition == nodes.Compare(
        S(7, 8, 7, 19, "x.decomp"), "<",
        nodes.Len(S(7, 8, 7, 15, "x.decomp"), nodes.Ref(S(7, 12, 7, 14, "x.decomp"), index=1)),
        nodes.Literal(S(7, 18, 7, 19, "x.decomp"), 4))
    assert [s.handler for s in cond.then] == ["reverse_short", "EOQ"]
    assert cond.then[1].is_end
    assert cond.otherwise == ()
    assert (last.operator, last.handler, last.query) == ("foreach", "letter", '"#1"')


def test_example_module_spans_are_exact():
    m = parse_module(EXAMPLE, "x.decomp")
    split = m.handlers[0]
    assert split.span == S(3, 1, 3, 77, "x.decomp")
    assert split.name_span == S(3, 9, 3, 14, "x.decomp")
    assert split.kind_span == S(3, 17, 3, 23, "x.decomp")
    max_tokens = split.option("max_tokens")
    assert max_tokens.span == S(3, 50, 3, 63, "x.decomp")
    assert max_tokens.value.span == S(3, 61, 3, 63, "x.decomp")
    assert split.option("file").value.span == S(3, 29, 3, 48, "x.decomp")
    stop = split.option("stop").value
    assert stop.span == S(3, 70, 3, 76, "x.decomp")
    assert stop.value[0].span == S(3, 71, 3, 75, "x.decomp")
    program = m.programs[0]
    assert program.name_span == S(5, 9, 5, 16, "x.decomp")
    assert program.params[0].span == S(5, 17, 5, 20, "x.decomp")
    assert program.span.line == 5 and program.span.end_line == 12
    items = program.body[0]
    assert items.span == S(6, 5, 6, 21, "x.decomp")
    assert items.handler_span == S(6, 9, 6, 16, "x.decomp")  # `[items]`, brackets included
    inner = program.body[1].then[0]
    assert inner.handler_span == S(8, 13, 8, 28, "x.decomp")
    assert inner.refs == (nodes.Ref(S(8, 29, 8, 31, "x.decomp"), index=1),)
    foreach = program.body[2]
    assert foreach.operator_span == S(11, 9, 11, 18, "x.decomp")
    assert foreach.handler_span == S(11, 19, 11, 27, "x.decomp")
    assert foreach.refs[0].span == S(11, 29, 11, 31, "x.decomp")
    assert program.body[1].span == S(7, 5, 10, 6, "x.decomp")


def test_spans_cut_the_source_text():
    lines = EXAMPLE.split("\n")

    def cut(span):
        return lines[span.line - 1][span.column - 1: span.end_column - 1]

    m = parse_module(EXAMPLE, "x.decomp")
    assert cut(m.handlers[1].name_span) == "words"
    assert cut(m.handlers[1].option("pattern").value.span) == 'r"\\S+"'
    assert cut(m.programs[0].body[2].handler_span) == "[letter]"
    assert cut(m.programs[0].body[2].refs[0].span) == "#1"
    assert cut(m.imports[0].span) == 'import "lib.decomp"'


# ------------------------------------------------------------------ option values
@pytest.fixture(scope="module")
def values_module() -> nodes.Module:
    return parse_module(VALUES, "m.decomp")


def _opt(module, name) -> nodes.Value:
    return module.handlers[0].option(name).value


@pytest.mark.parametrize("name, kind, value", [
    ("s1", "string", 'tab\there "quoted" \\ back\nnl \u00e9'),
    ("s2", "string", "single 'q'"),
    ("raw", "string", "\\d+\\s"),
    ("raw2", "string", "\\w"),
    ("long", "string", 'line one\n  line "two" # not a comment\nlast'),
    ("long2", "string", "a\\nb"),
    ("n1", "number", 42),
    ("n2", "number", -7),
    ("n3", "number", 3.25),
    ("n4", "number", 1000.0),
    ("n5", "number", -0.025),
    ("b1", "bool", True),
    ("b2", "bool", False),
    ("z", "null", None),
    ("lst", "list", [1, "two", [3, None], True]),
    ("empty", "list", []),
    ("multi", "list", ["a", "b"]),
    ("id", "ident", "some_ident"),
    ("hash", "string", "#1 # not a comment"),
])
def test_option_value_kinds(values_module, name, kind, value):
    v = _opt(values_module, name)
    assert v.kind == kind
    assert v.plain() == value
    assert type(v.plain()) is type(value)


def test_all_options_in_order(values_module):
    h = values_module.handlers[0]
    assert [o.name for o in h.options] == [
        "s1", "s2", "raw", "raw2", "long", "long2", "n1", "n2", "n3", "n4", "n5", "b1", "b2", "z",
        "lst", "empty", "multi", "id", "hash"]


def test_multiline_option_spans(values_module):
    h = values_module.handlers[0]
    assert h.span.line == 7 and h.span.end_line == 26
    long = h.option("long").value
    assert (long.span.line, long.span.column, long.span.end_line) == (12, 12, 14)
    multi = h.option("multi").value
    assert (multi.span.line, multi.span.column, multi.span.end_line, multi.span.end_column) == (20, 13, 23, 6)
    assert [v.span.line for v in multi.value] == [21, 22]
    nested = h.option("lst").value.value[2]
    assert nested.kind == "list" and nested.value[1].kind == "null"


def test_imports_models_and_handlers_without_options(values_module):
    m = values_module
    assert [i.path for i in m.imports] == ["a.decomp", "b.decomp"]
    assert m.imports[0].span == S(3, 1, 3, 18)
    big = m.models[1]
    assert (big.name, big.spec) == ("big", "openai:gpt-4")
    assert [(o.name, o.value.plain()) for o in big.options] == [("temperature", 0.5)]
    assert [(h.name, h.kind, h.options) for h in m.handlers[1:]] == [
        ("noopts", "program", ()), ("emptyopts", "prompt", ())]
    assert m.programs == () and m.main is None


@pytest.mark.parametrize("literal, value", [
    ('"a\\tb"', "a\tb"),
    ('"\\u0041\\u00e9"', "A\u00e9"),
    ('"\\q"', "\\q"),  # an unknown escape is kept as written
    ("r'\\n'", "\\n"),
    ('"""x\ny"""', "x\ny"),
    ("'''it's'''", "it's"),
    ('""', ""),
])
def test_decode_string(literal, value):
    assert decode_string(literal) == value


def test_read_module(tmp_path):
    path = tmp_path / "m.decomp"
    path.write_text("main p", encoding="utf-8")
    m = read_module(path)
    assert m.path == str(path)
    assert m.main.target == "p" and m.main.span.file == str(path)


# ------------------------------------------------------------------ programs
def test_program_params_and_options():
    src = ('program p() {\n    QS: [h] hello\n}\n'
           'program q(a, b, c) with max_depth = 8, description = "d" {\n    QS: [h] #a #b\n}\n'
           'main q\n')
    m = parse_module(src, "m.decomp")
    p, q = m.programs
    assert p.params == () and p.options == ()
    assert [(x.name, x.span) for x in q.params] == [("a", S(4, 11, 4, 12)), ("b", S(4, 14, 4, 15)),
                                                   ("c", S(4, 17, 4, 18))]
    assert [(o.name, o.value.plain()) for o in q.options] == [("max_depth", 8), ("description", "d")]
    assert q.option("max_depth").value.span == S(4, 37, 4, 38)
    assert [r.name for r in q.body[0].refs] == ["a", "b"]
    assert m.main.target == "q"


def test_if_else_branches():
    program = _program("    QS: [a] #x\n    if #1 {\n        QS: [a] #1\n    } else {\n        QS: [b] #1\n"
                       "        QS: [EOQ]\n    }\n    QS: [c] #1\n")
    step, cond, after = program.body
    assert isinstance(cond, nodes.If)
    assert cond.condition == nodes.RefOperand(S(3, 8, 3, 10), nodes.Ref(S(3, 8, 3, 10), index=1))
    assert [s.handler for s in cond.then] == ["a"]
    assert [s.handler for s in cond.otherwise] == ["b", "EOQ"]
    assert after.handler == "c"


def test_nested_if():
    program = _program("    QS: [a] #x\n    if #1 {\n        if len(#1) > 1 {\n            QS: [b] #1\n"
                       "        }\n    }\n")
    outer = program.body[1]
    inner = outer.then[0]
    assert isinstance(inner, nodes.If)
    assert inner.then[0].handler == "b"
    assert inner.then[0].span == S(5, 13, 5, 23)


def test_condition_and_binds_tighter_than_or_and_not_wraps_comparison():
    program = _program('    QS: [a] #x\n    if #1 != "no" or not #1 in #x and len(#1) >= 2 {\n        QS: [a] #1\n'
                       "    }\n")
    c = program.body[1].condition
    assert isinstance(c, nodes.BoolOp) and c.op == "or"
    left, right = c.operands
    assert left == nodes.Compare(S(3, 8, 3, 18), "!=", nodes.RefOperand(S(3, 8, 3, 10), nodes.Ref(S(3, 8, 3, 10), 1)),
                               nodes.Literal(S(3, 14, 3, 18), "no"))
    assert isinstance(right, nodes.BoolOp) and right.op == "and"
    negated, length = right.operands
    assert isinstance(negated, nodes.Not)
    assert negated.operand.op == "in"
    assert negated.operand.right.ref.name == "x"
    assert length.op == ">=" and isinstance(length.left, nodes.Len) and length.right.value == 2


def test_condition_literals_and_parentheses():
    program = _program("    QS: [a] #x\n"
                       '    if not (#1 == true or #1 == null) and #1 <= -1.5 or "a" in #1 or #1 == false {\n'
                       "        QS: [a] #1\n    }\n")
    c = program.body[1].condition
    assert c.op == "or" and len(c.operands) == 3
    first = c.operands[0]
    assert first.op == "and"
    inner = first.operands[0].operand
    assert isinstance(inner, nodes.BoolOp) and inner.op == "or"
    assert [o.right.value for o in inner.operands] == [True, None]
    assert first.operands[1].right.value == -1.5
    assert c.operands[1].left == nodes.Literal(S(3, 57, 3, 60), "a")
    assert c.operands[2].right.value is False


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "in"])
def test_every_comparison(op):
    program = _program(f"    QS: [a] #x\n    if #1 {op} 3 {{\n        QS: [a] #1\n    }}\n")
    assert program.body[1].condition.op == op


def test_and_or_chains_are_flat():
    program = _program("    QS: [a] #x\n    if #1 and #x and #1 or #x or #1 {\n        QS: [a] #1\n    }\n")
    c = program.body[1].condition
    assert c.op == "or" and len(c.operands) == 3
    assert c.operands[0].op == "and" and len(c.operands[0].operands) == 3


def test_comments_and_blank_lines_inside_a_body():
    program = _program("\n    # first\n    QS: [a] #x\n\n    # between\n    QS: [a] #1  # this is query text\n\n",
                       header="program p(x) {  # a comment after the brace")
    assert [s.handler for s in program.body] == ["a", "a"]
    assert program.body[1].query == "#1  # this is query text"
    assert [r.index for r in program.body[1].refs] == [1]


def test_comments_between_declarations_and_at_the_end():
    m = parse_module('model default = "fake"\n# a comment\n\n  # another\nhandler a = prompt(file="x")\nmain p\n# end',
                     "m.decomp")
    assert [h.name for h in m.handlers] == ["a"]
    assert m.handlers[0].span.line == 5
    assert m.main.span == S(6, 1, 6, 7)


def test_crlf_module():
    m = parse_module('model default = "fake"\r\nprogram p(x) {\r\n    QS: [a] #x\r\n}\r\nmain p\r\n', "m.decomp")
    step = m.programs[0].body[0]
    assert (step.handler, step.query) == ("a", "#x")
    assert step.refs[0].span == S(3, 13, 3, 15)
    assert m.main.target == "p"


def test_no_trailing_newline_and_empty_modules():
    assert parse_module("main p", "m.decomp").main.target == "p"
    empty = parse_module("", "m.decomp")
    assert (empty.imports, empty.models, empty.handlers, empty.programs, empty.main) == ((), (), (), (), None)
    assert parse_module("# only\n# comments\n\n", "m.decomp").handlers == ()


def test_several_mains_are_all_kept():
    m = parse_module("main a\nmain b\n", "m.decomp")
    assert [x.target for x in m.mains] == ["a", "b"]
    assert m.main.target == "b"


def test_keywords_inside_names_are_names():
    m = parse_module("handler a = prompt(x = trueish, y = nullable, z = inside)\n", "m.decomp")
    assert [(o.value.kind, o.value.value) for o in m.handlers[0].options] == [
        ("ident", "trueish"), ("ident", "nullable"), ("ident", "inside")]


@pytest.mark.parametrize("src", [
    "program p(x) { QS: [a] #x }\n",          # a block needs its own lines
    "program p(x) {\n    QS: [a] #x\n    }\n    else {\n}\n",
    "handler a = prompt(x=1 y=2)\n",
    "model default\n",
])
def test_malformed_modules_raise_decomp_errors(src):
    with pytest.raises(DecompError):
        parse_module(src, "m.decomp")
