"""No silent acceptance: a `# comment` after a QS line is a warning, an unclosed `[handler` or
`(operator` on a QS line is a syntax error at the bracket, a bracket or string left open is
named where it was opened, and `decomp check` refuses what is no program. Positions are exact."""
from __future__ import annotations

import pytest

from decomp.dsl.checker import module_warnings, program_warnings
from decomp.dsl.errors import CheckWarning, DecompError, DecompSyntaxError, Diagnostics, UnclosedError
from decomp.dsl.parser import parse_fewshot, parse_module, parse_step_line
from decomp.runtime.engine.session import Session
from tests.helpers import invoke


def _error(parse, src: str, path: str = "t.decomp") -> DecompError:
    with pytest.raises(DecompError) as info:
        parse(src, path)
    return info.value


def _at(span) -> tuple[int, int]:
    return span.line, span.column


# ------------------------------------------------------------------ 1. a comment after a QS line
COMMENTED = ('handler up = python(function="capwords")\n'
             'program p(question) {\n'
             '    QS: [up] #question # shout it\n'
             '    if #1 {\n'
             '        QS: [up] #1  #\n'
             '    }\n'
             '    QS: [up] C# and #1 stay\n'
             '}\n'
             'main p\n')


def test_a_comment_after_a_step_is_a_warning_at_the_hash():
    module = parse_module(COMMENTED, "t.decomp")
    warnings = module_warnings(module)
    assert [_at(w.span) for w in warnings] == [(3, 24), (5, 22)]
    first = warnings[0]
    assert isinstance(first, CheckWarning) and first.kind == "warning"
    assert "'# shout it' is part of the query" in first.message
    assert (first.span.end_line, first.span.end_column) == (3, 34)
    assert str(first).startswith("t.decomp:3:24: warning: this looks like a comment")
    assert module.programs[0].body[0].query == "#question # shout it"  # the language is unchanged


def test_no_warning_without_a_comment_look():
    module = parse_module('program p(q) {\n    QS: [a] #q and #1 C# x#y\n    QS: [EOQ]\n}\n', "t.decomp")
    assert program_warnings(module.programs[0]) == []


def test_a_warning_is_not_an_error_for_the_loader():
    loaded = Session().load("t.decomp", text=COMMENTED)
    assert loaded.main == "p"


# ------------------------------------------------------------------ 2. [handler or (operator left open
def test_fewshot_step_with_unclosed_handler_is_a_syntax_error_at_the_bracket():
    src = 'QC: Take the words\nQS: [split What are the words in "a b"?\nA: ["a", "b"]\nQS: [EOQ]\n'
    err = _error(parse_fewshot, src, "f.txt")
    assert isinstance(err, DecompSyntaxError)
    assert _at(err.span) == (2, 5)
    assert err.message.startswith("unclosed `[`")
    assert err.expected == "a handler such as [split]"
    assert err.format().split("\n")[1:3] == ['    QS: [split What are the words in "a b"?', "        ^"]


def test_fewshot_operator_left_open_and_empty_handler_are_both_reported():
    src = "QC: a\nQS: (foreach [split] #1\nA: 1\n\nQC: b\nQS: [] x\nA: 2\n"
    err = _error(parse_fewshot, src, "f.txt")
    assert isinstance(err, Diagnostics)
    assert [(_at(e.span), e.message.split(":")[0]) for e in err.errors] == [
        ((2, 5), "unclosed `(`"), ((6, 5), "empty handler reference []")]
    assert err.errors[0].expected == "an operator such as (foreach)"


def test_program_step_with_unclosed_handler_is_a_syntax_error():
    err = _error(parse_module, "program p(x) {\n    QS: [a #x\n}\n")
    assert isinstance(err, DecompSyntaxError) and _at(err.span) == (2, 9)


def test_a_query_that_merely_starts_with_a_paren_is_still_a_query():
    fewshot = parse_fewshot("QC: a\nQS: [h] (see above\nQS: (see above)\nA: 1\n", "f.txt")
    steps = fewshot.examples[0].steps
    assert [(s.step.handler, s.step.operator, s.step.query) for s in steps] == [
        ("h", None, "(see above"), (None, None, "(see above)")]


def test_a_models_line_is_read_as_it_comes():
    step = parse_step_line("QS: [split What are")   # the decomposer reports "names no handler"
    assert step.handler is None and step.query == "[split What are"


# ------------------------------------------------------------------ 4. brackets and strings left open
def test_unclosed_brace_at_the_end_of_the_file_names_the_brace():
    src = "program p(x) {\n    QS: [a] #x\n"
    err = _error(parse_module, src)
    assert isinstance(err, UnclosedError)
    assert (_at(err.span), err.message) == ((2, 15), "unexpected end of the file")
    assert (_at(err.opened), err.opener) == ((1, 14), "{")
    lines = err.format().split("\n")
    assert "t.decomp:1:14: note: unclosed `{` opened here" in lines
    assert lines[-2:] == ["    program p(x) {", "                 ^"]


def test_an_if_block_left_open_is_found_by_its_indentation():
    src = "program p(x) {\n    if #1 {\n        QS: [a] #x\n    QS: [b] #x\n}\nmain p\n"
    err = _error(parse_module, src)
    assert isinstance(err, UnclosedError)
    assert _at(err.span) == (6, 1) and err.message == "unexpected 'main'"
    assert _at(err.opened) == (2, 11)


def test_unclosed_paren_of_options_is_named_at_the_next_declaration():
    src = 'handler a = prompt(\n  text="x",  # a comment (with a paren\n  n=1\nmain a\n'
    err = _error(parse_module, src)
    assert isinstance(err, UnclosedError)
    assert (_at(err.span), _at(err.opened), err.opener) == ((4, 1), (1, 19), "(")
    assert err.expected == "')'"


def test_a_list_closed_by_the_wrong_bracket():
    src = 'handler a = prompt(text="x", stop=["a")\nmain a\n'
    err = _error(parse_module, src)
    assert isinstance(err, UnclosedError)
    assert (_at(err.span), _at(err.opened), err.opener) == ((1, 39), (1, 35), "[")


def test_brackets_in_queries_strings_and_comments_do_not_count():
    src = 'handler h = prompt(text="(x")  # ] {\nprogram p(x) {\n    QS: [h] (see {this\n'
    err = _error(parse_module, src)
    assert isinstance(err, UnclosedError) and _at(err.opened) == (2, 14)


def test_a_stray_closer_gets_no_note():
    err = _error(parse_module, "program p(x) {\n    QS: [a] #x\n    )\n}\n")
    assert type(err) is DecompSyntaxError and _at(err.span) == (3, 5)


def test_unclosed_string_is_reported_where_it_starts():
    err = _error(parse_module, 'program p(x) {\n    if #1 == "abc {\n        QS: [a] #x\n    }\n}\n')
    assert (_at(err.span), err.message) == ((2, 14), 'unclosed string: no closing " on this line')
    err = _error(parse_module, 'handler a = prompt(text="""abc\nmain a\n')
    assert (_at(err.span), err.message) == ((1, 25), 'unclosed string: no closing """ before the end of the file')
    assert (err.span.end_column, err.expected) == (28, 'a closing """')


def test_the_loader_prints_the_note_too():
    with pytest.raises(DecompError) as info:
        Session().load("t.decomp", text='handler a = prompt(text="x"\nmain a\n')
    text = info.value.format()
    assert text.startswith("t.decomp:2:1: unexpected 'main'")
    assert "t.decomp:1:19: note: unclosed `(` opened here" in text


# ------------------------------------------------------------------ the command line
def test_check_prints_warnings_and_exits_0(tmp_path):
    path = tmp_path / "w.decomp"
    path.write_text(COMMENTED)
    result = invoke("check", str(path))
    assert result.exit_code == 0, result.output
    assert f"{path}:3:24: warning: this looks like a comment" in result.stderr
    assert "        QS: [up] #question # shout it\n" + " " * 27 + "^" * 10 + "\n" in result.stderr
    assert f"{path}:5:22: warning:" in result.stderr
    assert result.stdout == f"{path}: ok (2 warnings)\n"


def test_check_json_lists_the_warnings(tmp_path):
    import json

    path = tmp_path / "w.decomp"
    path.write_text(COMMENTED)
    result = invoke("check", "--json", str(path))
    assert result.exit_code == 0
    warnings = json.loads(result.stdout)["warnings"]
    assert [(w["at"], w["line"], w["column"]) for w in warnings] == [(f"{path}:3:24", 3, 24), (f"{path}:5:22", 5, 22)]
    assert "part of the query" in warnings[0]["message"]


def test_run_prints_the_warnings_once_before_running(tmp_path):
    path = tmp_path / "w.decomp"
    path.write_text(COMMENTED)
    result = invoke("run", str(path), "-q", "a b")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("warning: this looks like a comment") == 2
    assert result.stdout.strip() == 'C# And "a B # Shout It" Stay'  # the comment went into the query


@pytest.mark.parametrize("name, text, looks", [
    ("x.py", "import os\n\ndef f():\n    pass\n", "this looks like Python source"),
    ("d.jsonl", '{"id": 1, "question": "q"}\n{"id": 2}\n', "this looks like JSON Lines data"),
    ("d.json", '{"rows": [1, 2]}\n', "this looks like JSON data"),
    ("e.txt", "\n", "the file is empty"),
])
def test_check_refuses_what_is_no_program(tmp_path, name, text, looks):
    path = tmp_path / name
    path.write_text(text)
    result = invoke("check", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:1:1: not a .decomp program or a few-shot file: {looks}")
    assert "ok" not in result.stdout


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_check_refuses_a_decomp_file_that_declares_nothing(tmp_path, text):
    path = tmp_path / "empty.decomp"
    path.write_text(text)
    result = invoke("check", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:1:1: this .decomp file declares nothing")


def test_check_says_a_decomp_file_looks_like_python(tmp_path):
    path = tmp_path / "py.decomp"
    path.write_text("import os\nx = 1\n")
    result = invoke("check", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:1:8: unexpected 'os'")
    assert f"{path}: note: this looks like Python source, not a .decomp program" in result.stderr


def test_check_warns_about_plain_text(tmp_path):
    path = tmp_path / "junk.txt"
    path.write_text("lorem ipsum\ndolor\n")
    result = invoke("check", str(path))
    assert result.exit_code == 0
    assert result.stderr.startswith(f"{path}:1:1: warning: no examples here: plain text")
    assert result.stdout == f"{path}: ok (1 warning)\n"


def test_check_reads_a_module_not_named_decomp(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text('handler a = regex(pattern="x")\nmain a\n')
    result = invoke("check", str(path))
    assert (result.exit_code, result.output) == (0, f"{path}: ok\n")


def test_check_fewshot_with_unclosed_handler(tmp_path):
    path = tmp_path / "f.txt"
    path.write_text('QC: Take the words\nQS: [split What are the words in "a b"?\nA: ["a", "b"]\nQS: [EOQ]\n')
    result = invoke("check", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:2:5: unclosed `[`: a handler reference needs its `]`")


def test_check_names_the_brace_left_open(tmp_path):
    path = tmp_path / "b.decomp"
    path.write_text("program p(x) {\n    QS: [a] #x\n")
    result = invoke("check", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{path}:2:15: unexpected end of the file")
    assert f"\n{path}:1:14: note: unclosed `{{` opened here\n    program p(x) {{\n" + " " * 17 + "^" in result.stderr
