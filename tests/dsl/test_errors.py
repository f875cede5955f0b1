"""Planted syntax errors (exact positions, plain-word diagnostics) and planted check errors
found by `Session().load` before anything runs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from decomp.dsl.errors import CheckError, DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.parser import parse_module
from decomp.runtime.engine.session import Session

# Lark's own vocabulary that must never reach a user
INTERNALS = ("Token(", "_EOL", "_BLANKS", "LPAR", "RPAR", "LSQB", "RSQB", "LBRACE", "RBRACE", "EQUAL",
             "COMMA", "$END", "__ANON", "Traceback", "Unexpected", "lark", "QS_MARK", "HANDLER_REF",
             "REST", "STRING", "NUMBER")


def _syntax_error(src: str, path: str = "t.decomp") -> DecompSyntaxError:
    with pytest.raises(DecompSyntaxError) as info:
        parse_module(src, path)
    return info.value


def _assert_diagnostic(err: DecompError, src: str, line: int, column: int, expected_words: str | None = None,
                       path: str = "t.decomp"):
    """Position, `file:line:col: message`, the source line, a caret under the column, `expected ...`."""
    assert (err.span.file, err.span.line, err.span.column) == (path, line, column), err.format()
    text = err.format()
    head, source_line, caret, *rest = text.split("\n")
    assert head == f"{path}:{line}:{column}: {err.message}"
    written = src.split("\n")[line - 1].rstrip("\r")
    assert source_line == "    " + written
    pad = "".join(ch if ch == "\t" else " " for ch in written[: column - 1])
    assert re.fullmatch(re.escape("    " + pad) + r"\^+", caret), (caret, pad)
    if expected_words is not None:
        assert rest and rest[-1].startswith("    expected "), text
        assert expected_words in rest[-1], text
    for internal in INTERNALS:
        assert internal not in head and all(internal not in r for r in rest), (internal, text)
    return text


# ------------------------------------------------------------------ syntax errors
def test_missing_equals_in_handler():
    src = 'model default = "fake"\nhandler split prompt(file="a.txt")\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 2, 15, "'='")
    assert err.expected == "'='"


def test_missing_option_value():
    src = 'handler a = prompt(file=)\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 1, 25, "a string")
    assert "unexpected ')'" in err.message
    assert "a number" in err.expected and "a name" in err.expected


def test_misspelled_keyword():
    src = '\n\nhandlr a = prompt()\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 3, 1, "'handler'")
    for word in ("'import'", "'model'", "'program'", "'main'"):
        assert word in err.expected


def test_missing_closing_brace_at_end_of_file():
    src = 'program p(x) {\n    QS: [a] #x\n'
    err = _syntax_error(src)
    assert err.message == "unexpected end of the file"
    assert err.span.line == 2
    assert "'}'" in err.expected and "'QS:'" in err.expected
    assert "QS: [a] #x" in err.format()


def test_if_without_condition():
    src = 'program p(x) {\n    QS: [a] #x\n    if {\n        QS: [b] #1\n    }\n}\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 3, 8, "a reference such as #1 or #question")
    assert "'len'" in err.expected and "'not'" in err.expected


def test_step_without_qs_marker():
    src = 'program p(x) {\n    [a] #x\n}\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 2, 5, "'QS:'")


def test_trailing_comma_in_parameters():
    src = 'program p(x,) {\n    QS: [a] #x\n}\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 1, 13, "a name")


def test_unterminated_string():
    src = 'model default = "fake"\nhandler a = prompt(file="abc)\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 2, 25, "a string")


def test_else_on_its_own_line():
    src = 'program p(x) {\n    QS: [a] #x\n    if #1 {\n        QS: [a] #1\n    }\n    else {\n        QS: [b] #1\n    }\n}\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 6, 5, "'}'")
    assert "else" in err.message


def test_unexpected_name_reads_as_plain_words():
    src = 'program p(x) {\n    QS: [a] #x\n    if #1 {\n        QS: [a] #1\n    }\n    else {\n    }\n}\n'
    err = _syntax_error(src)
    assert "'else'" in err.message
    assert "unexpected a " not in err.message  # got: "unexpected a name 'else'"


def test_caret_lines_up_under_a_tab():
    src = 'handler a =\tprompt(file=1 2)\n'
    err = _syntax_error(src)
    text = _assert_diagnostic(err, src, 1, 27, "')'")
    assert "    " + " " * 11 + "\t" + " " * 14 + "^" in text


def test_unexpected_end_inside_options():
    src = 'handler a = prompt('
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 1, 20, "')'")
    assert err.message == "unexpected end of the file"


def test_block_on_one_line():
    src = 'program p(x) { QS: [a] #x }\n'
    err = _syntax_error(src)
    _assert_diagnostic(err, src, 1, 16, "the end of the line")


def test_crlf_error_line_has_no_carriage_return():
    src = 'model default = "fake"\r\nhandler split prompt(file="a.txt")\r\n'
    err = _syntax_error(src)
    assert (err.span.line, err.span.column) == (2, 15)
    assert "\r" not in err.format()


def test_two_broken_declarations_are_both_reported():
    src = ('model default = "fake"\nhandler a = prompt(file=)\nhandler ok = prompt(file="x")\n'
           'handler b prompt(file="y")\nmain ok\n')
    with pytest.raises(Diagnostics) as info:
        parse_module(src, "t.decomp")
    errors = info.value.errors
    assert len(errors) == 2
    assert all(isinstance(e, DecompSyntaxError) for e in errors)
    assert [(e.span.line, e.span.column) for e in errors] == [(2, 25), (4, 11)]
    _assert_diagnostic(errors[0], src, 2, 25, "a string")
    _assert_diagnostic(errors[1], src, 4, 11, "'='")
    text = info.value.format()
    assert text.count("t.decomp:") == 2
    assert "handler a = prompt(file=)" in text and 'handler b prompt(file="y")' in text


def test_three_broken_programs_are_all_reported():
    src = ('program a(x) {\n    QS [a] #x\n}\n'
           'program b(x) {\n    QS: [a] #x\n}\n'
           'program c(x {\n    QS: [a] #x\n}\n'
           'program d(x) {\n    if {\n    }\n}\n')
    with pytest.raises(Diagnostics) as info:
        parse_module(src, "t.decomp")
    assert [e.span.line for e in info.value.errors] == [2, 7, 11]


def test_one_broken_declaration_is_reported_once():
    """An unclosed option list followed by a valid declaration is one problem, not two."""
    src = 'handler split = prompt(file="a.txt"\nmain x\n'
    with pytest.raises(DecompError) as info:
        parse_module(src, "t.decomp")
    err = info.value
    errors = err.errors if isinstance(err, Diagnostics) else [err]
    assert len(errors) == 1, err.format()
    assert (errors[0].span.line, errors[0].span.column) in {(1, 36), (2, 1)}


def test_syntax_error_through_session(tmp_path):
    path = tmp_path / "m.decomp"
    src = 'model default = "fake"\n\nhandler a = prompt(file="x", n=)\n'
    path.write_text(src, encoding="utf-8")
    with pytest.raises(DecompSyntaxError) as info:
        Session().load(path, text=src)
    _assert_diagnostic(info.value, src, 3, 32, "a number", path=str(path))


def test_syntax_error_in_an_imported_file(tmp_path):
    (tmp_path / "lib.decomp").write_text('model x = "fake"\nhandler h = \n', encoding="utf-8")
    src = 'import "lib.decomp"\nmodel default = "fake"\n'
    path = tmp_path / "m.decomp"
    path.write_text(src, encoding="utf-8")
    with pytest.raises(DecompSyntaxError) as info:
        Session().load(path, text=src)
    err = info.value
    assert err.span.file == str(tmp_path / "lib.decomp")
    assert (err.span.line, err.span.column) == (2, 13)
    assert "handler h =" in err.format()


# ------------------------------------------------------------------ check errors
HEADER = 'model default = "fake"\nhandler qa = prompt(file="qa.txt")\n'  # lines 1-2


def _setup(tmp_path: Path, files: dict[str, str] | None = None) -> None:
    (tmp_path / "qa.txt").write_text('Q: a?\nA: "b"\n', encoding="utf-8")
    for name, text in (files or {}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")


def _load(tmp_path: Path, src: str, files: dict[str, str] | None = None):
    _setup(tmp_path, files)
    path = tmp_path / "m.decomp"
    path.write_text(src, encoding="utf-8")
    return Session().load(path, text=src)


def _problems(tmp_path: Path, src: str, files: dict[str, str] | None = None) -> list[DecompError]:
    with pytest.raises(DecompError) as info:
        _load(tmp_path, src, files)
    err = info.value
    return err.errors if isinstance(err, Diagnostics) else [err]


def _one(tmp_path, src, files=None) -> DecompError:
    problems = _problems(tmp_path, src, files)
    assert len(problems) == 1, "\n".join(p.format() for p in problems)
    assert isinstance(problems[0], CheckError)
    return problems[0]


def _where(err: DecompError) -> tuple[int, int, int]:
    return err.span.line, err.span.column, err.span.end_column


def test_clean_module_loads(tmp_path):
    src = HEADER + ('program p(question) with max_depth = 3 {\n    QS: [qa] #question\n'
                    '    if len(#1) > 1 and not #1 == "x" {\n        QS: [qa] #1\n        QS: [EOQ]\n'
                    '    } else {\n        QS: [qa] #1\n    }\n    QS: (foreach) [qa] "#1"\n}\nmain p\n')
    loaded = _load(tmp_path, src)
    assert loaded.main == "p"
    assert set(loaded.handlers) == {"qa", "p"}


def test_the_example_module_loads(tmp_path):
    lib = ('handler items = prompt(file="qa.txt")\nhandler reverse_short = prompt(file="qa.txt")\n'
           'handler letter = prompt(file="qa.txt")\n')
    src = ('import "lib.decomp"\nmodel default = "fake"\n'
           'handler split = prompt(file="prompts/split.txt", max_tokens=64, stop=["\\n"])\n'
           'handler words = regex(pattern=r"\\S+", all=true)\n'
           'program reverse(seq) with max_depth = 8 {\n    QS: [items] #seq\n    if len(#1) < 4 {\n'
           '        QS: [reverse_short] #1\n        QS: [EOQ]\n    }\n    QS: (foreach) [letter] "#1"\n}\n'
           'main reverse\n')
    loaded = _load(tmp_path, src, {"lib.decomp": lib, "prompts/split.txt": 'Q: a b\nA: ["a", "b"]\n'})
    assert {"split", "words", "items", "reverse_short", "letter", "reverse"} <= set(loaded.handlers)


def test_unknown_handler_in_a_program_step(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    QS: [nope] #1\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (5, 9, 15)
    assert "[nope]" in err.message
    text = _assert_diagnostic(err, src, 5, 9, "qa", path=str(tmp_path / "m.decomp"))
    assert "\n" + " " * 12 + "^^^^^^\n" in text  # under `[nope]`: 4 of indent + column 9


def test_ref_beyond_the_steps_so_far(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    QS: [qa] #1\n    QS: [qa] #3\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (6, 14, 16)
    assert "#3" in err.message
    assert "#1, #2" in err.expected


def test_ref_to_its_own_step_is_an_error(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #1\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (4, 14, 16)


def test_ref_into_an_if_branch_after_the_if(tmp_path):
    src = HEADER + ("program p(x) {\n    QS: [qa] #x\n    if #1 {\n        QS: [qa] #1\n    } else {\n"
                    "        QS: [qa] #2\n    }\n    QS: [qa] #1\n    QS: [qa] #2\n    QS: [qa] #3\n}\nmain p\n")
    problems = _problems(tmp_path, src)
    # step 2 is in the then-branch: not in the else-branch (line 8), not after the if (line 11);
    # step 3 is in the else-branch: not after the if (line 12)
    assert [(_where(p), p.message.split()[0]) for p in problems] == [
        ((8, 18, 20), "#2"), ((11, 14, 16), "#2"), ((12, 14, 16), "#3")]


def test_ref_in_a_condition(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    if len(#2) > 1 {\n        QS: [qa] #1\n    }\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (5, 12, 14)


def test_steps_inside_a_branch_may_use_earlier_branch_steps(tmp_path):
    src = HEADER + ("program p(x) {\n    QS: [qa] #x\n    if #1 {\n        QS: [qa] #1\n        QS: [qa] #2\n"
                    "    }\n    QS: [qa] #1\n    QS: [qa] #4\n}\nmain p\n")
    loaded = _load(tmp_path, src)
    assert "p" in loaded.handlers


def test_eoq_is_not_counted(tmp_path):
    src = HEADER + ("program p(x) {\n    QS: [qa] #x\n    if #1 {\n        QS: [EOQ]\n    }\n"
                    "    QS: [qa] #1\n    QS: [qa] #2\n    QS: [qa] #3\n    QS: [qa] #4\n    QS: [qa] #6\n}\nmain p\n")
    # steps: line 4 is #1, lines 8-12 are #2-#6; were the EOQ counted, #2 would sit in the branch
    err = _one(tmp_path, src)
    assert _where(err) == (12, 14, 16)  # #6 is the step being written


@pytest.mark.parametrize("query, found", [("no references here", 0), ("#1 and #2", 2)])
def test_foreach_needs_exactly_one_index_ref(tmp_path, query, found):
    src = HEADER + f"program p(x) {{\n    QS: [qa] #x\n    QS: [qa] #1\n    QS: (foreach) [qa] {query}\n}}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (6, 24, 24 + len(query))
    assert "(foreach)" in err.message and str(found) in err.message
    assert "exactly one #n" in err.expected


def test_foreach_with_one_ref_and_a_named_input_is_fine(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    QS: (foreach) [qa] #1 about #x\n}\nmain p\n"
    assert _load(tmp_path, src).main == "p"


def test_unknown_operator(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    QS: (frobnicate) [qa] #1\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (5, 9, 21)
    assert "frobnicate" in err.message
    assert "foreach" in err.expected and "select" in err.expected


def test_unknown_named_input(tmp_path):
    src = HEADER + "program p(question) {\n    QS: [qa] #questoin\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (4, 14, 23)
    assert "#questoin" in err.message
    assert "#question" in err.expected


def test_direct_recursion_without_max_depth(tmp_path):
    src = HEADER + "program p(x) {\n    QS: [qa] #x\n    QS: [p] #1\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert (err.span.line, err.span.column) == (3, 1)
    assert "[p]" in err.message and "max_depth" in err.message
    assert "max_depth" in err.expected


def test_mutual_recursion_without_max_depth(tmp_path):
    src = HEADER + ("program a(x) {\n    QS: [b] #x\n}\nprogram b(x) {\n    QS: [a] #x\n}\nmain a\n")
    problems = _problems(tmp_path, src)
    assert [(p.span.line, p.span.column) for p in problems] == [(3, 1), (6, 1)]
    assert all("max_depth" in p.message for p in problems)
    assert "[a]" in problems[0].message and "[b]" in problems[1].message


def test_mutual_recursion_with_one_bound_still_reports_the_other(tmp_path):
    src = HEADER + ("program a(x) with max_depth = 4 {\n    QS: [b] #x\n}\nprogram b(x) {\n    QS: [a] #x\n}\n"
                    "main a\n")
    err = _one(tmp_path, src)
    assert err.span.line == 6 and "[b]" in err.message


def test_recursion_with_max_depth_is_clean(tmp_path):
    src = HEADER + ("program p(x) with max_depth = 8 {\n    QS: [qa] #x\n    QS: [p] #1\n}\n"
                    "program a(x) with max_depth = 3 {\n    QS: [b] #x\n}\n"
                    "program b(x) with max_depth = 3 {\n    QS: [a] #x\n}\nmain p\n")
    assert set(_load(tmp_path, src).handlers) == {"qa", "p", "a", "b"}


def test_missing_prompt_file(tmp_path):
    src = HEADER + 'handler gone = prompt(file="prompts/nope.txt")\n'
    err = _one(tmp_path, src)
    assert _where(err) == (3, 28, 46)
    assert "nope.txt" in err.message and "not found" in err.message


def test_unknown_option_key_lists_known_options(tmp_path):
    src = HEADER + 'handler k = prompt(file="qa.txt", max_tokenz=5)\n'
    err = _one(tmp_path, src)
    assert _where(err) == (3, 35, 47)
    assert "max_tokenz" in err.message
    text = err.format()
    for known in ("file", "max_tokens", "temperature", "stop"):
        assert known in text


def test_option_of_the_wrong_type(tmp_path):
    src = HEADER + 'handler k = prompt(file="qa.txt", max_tokens="ten")\n'
    err = _one(tmp_path, src)
    assert _where(err) == (3, 46, 51)
    assert "max_tokens" in err.message
    assert "int" in err.format()


def test_duplicate_handler_names(tmp_path):
    src = HEADER + 'handler qa = prompt(file="qa.txt")\n'
    err = _one(tmp_path, src)
    assert _where(err) == (3, 9, 11)
    assert "'qa'" in err.message
    assert ":2:1" in err.expected  # where the first one is


def test_program_named_like_a_handler(tmp_path):
    src = HEADER + "program qa(x) {\n    QS: [qa] #x\n}\n"
    problems = _problems(tmp_path, src)
    assert any(_where(p) == (3, 9, 11) and "already declared" in p.message for p in problems)


def test_duplicate_parameter(tmp_path):
    src = HEADER + "program p(x, y, x) {\n    QS: [qa] #x\n}\nmain p\n"
    err = _one(tmp_path, src)
    assert _where(err) == (3, 17, 18)
    assert "'x'" in err.message


def test_unknown_handler_kind(tmp_path):
    src = HEADER + "handler k = magic(level=3)\n"
    err = _one(tmp_path, src)
    assert _where(err) == (3, 13, 18)
    assert "magic" in err.message
    assert "prompt" in err.expected and "decomposer" in err.expected


def test_main_naming_nothing(tmp_path):
    src = HEADER + "main nothing\n"
    err = _one(tmp_path, src)
    assert (err.span.line, err.span.column) == (3, 1)
    assert "nothing" in err.message
    assert "qa" in err.expected


def test_decomposer_examples_naming_an_unknown_handler(tmp_path):
    examples = 'QC: q\nQS: [qa] a\nA: "x"\nQS: (foreach) [ghost] #1\nA: ["y"]\nQS: [EOQ]\n'
    src = HEADER + 'handler d = decomposer(file="prompts/dec.txt")\nmain d\n'
    err = _one(tmp_path, src, {"prompts/dec.txt": examples})
    assert err.span.file == str(tmp_path / "prompts" / "dec.txt")
    assert _where(err) == (4, 15, 22)
    assert "[ghost]" in err.message
    text = err.format()
    assert "    QS: (foreach) [ghost] #1\n" + " " * 4 + " " * 14 + "^^^^^^^" in text


def test_decomposer_examples_with_a_bad_reference(tmp_path):
    examples = 'QC: q\nQS: [qa] a\nA: "x"\nQS: [qa] #2\nA: "y"\nQS: [EOQ]\n'
    src = HEADER + 'handler d = decomposer(file="dec.txt")\nmain d\n'
    err = _one(tmp_path, src, {"dec.txt": examples})
    assert err.span.file == str(tmp_path / "dec.txt")
    assert _where(err) == (4, 10, 12)


def test_all_problems_of_one_file_are_reported_together(tmp_path):
    src = HEADER + (
        'handler gone = prompt(file="nope.txt")\n'                    # 3: missing file
        'handler k1 = prompt(file="qa.txt", max_tokenz=5)\n'          # 4: unknown option
        'handler k2 = prompt(file="qa.txt", max_tokens="ten")\n'      # 5: wrong type
        'handler qa = prompt(file="qa.txt")\n'                        # 6: duplicate name
        'handler k3 = magic()\n'                                      # 7: unknown kind
        'program p(x, x) {\n'                                         # 8: duplicate parameter
        '    QS: [nope] #x\n'                                         # 9: unknown handler
        '    QS: [qa] #5\n'                                           # 10: #5 beyond the steps
        '    QS: (frobnicate) [qa] #1\n'                              # 11: unknown operator
        '    QS: (foreach) [qa] nothing\n'                            # 12: foreach without #n
        '    QS: [qa] #y\n'                                           # 13: unknown input
        '}\n'
        'program r(x) {\n    QS: [r] #x\n}\n'                         # 15: recursion, no bound
        'main nowhere\n'                                              # 18: unknown main
    )
    problems = _problems(tmp_path, src)
    assert [p.span.line for p in problems] == [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 18]
    assert all(isinstance(p, CheckError) for p in problems)


def test_check_errors_show_the_source_line_when_loaded_from_text(tmp_path):
    """`load(path, text=...)`: the diagnostic shows the line of the text that was loaded."""
    _setup(tmp_path)
    src = HEADER + "program p(x) {\n    QS: [nope] #x\n}\nmain p\n"
    with pytest.raises(CheckError) as info:
        Session().load(tmp_path / "not_on_disk.decomp", text=src)
    text = info.value.format()
    assert "    " + "    QS: [nope] #x" in text
    assert "\n" + " " * 12 + "^^^^^^" in text
