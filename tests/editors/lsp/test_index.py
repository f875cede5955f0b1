"""The language server's reading of a document that does not parse (it is being typed), the
answers a step may read, and what sits at a column of a line."""
from __future__ import annotations

from decomp.editors.lsp.index import available_at, build_index
from decomp.editors.lsp.tokens import token_at

PROGRAM = '''\
handler a = regex(pattern="(x)")
handler b = prompt(text="Q: {{ x }}", template=true,
program p(question) {
  QS: [a] #question
  if len(#1) > 1 {
    QS: [a] #1
    QS: [
  } else {
    QS: [a] #1
  }
  QS: [a] #1
  QS: (fore
}
main p
'''


def test_a_document_being_typed_keeps_what_parses(tmp_path):
    index = build_index(tmp_path / "p.decomp", PROGRAM)
    assert index.module is not None
    assert set(index.decls) == {"a", "p"}  # b's parenthesis is open: b is left out, p kept
    program = index.program_at(6)
    assert program is not None and program.name == "p"
    assert index.decls["p"].name_span.line == 3  # every span where it was


def test_the_answers_a_step_may_read_leave_out_other_branches():
    from decomp.dsl.parser import parse_module
    module = parse_module(PROGRAM.replace("    QS: [\n", "").replace("  QS: (fore\n", "")
                          .replace('template=true,\n', 'template=true)\n'))
    program = module.programs[0]
    assert available_at(program, 5) == [1]        # inside `then`, before its first step
    assert available_at(program, 7) == [1]        # inside `else`: #2 (then) is not visible
    assert available_at(program, 10) == [1]       # after the `if`: neither branch's answers
    assert available_at(program, 11) == [1, 4]


def test_a_hash_is_a_reference_on_steps_and_conditions_and_a_comment_elsewhere():
    assert token_at("  QS: [a] #1 and #question", 11).text == "#1"
    assert token_at("  QS: [a] #1 and #question", 20).text == "#question"
    assert token_at("  if ok(#2) {", 9).text == "#2"
    assert token_at("handler a = regex()  # see #1", 28) is None
    assert token_at('handler a = regex(pattern="#1")', 28).kind == "string"
    word = token_at('handler a = prompt(max_tokens=8)', 22)
    assert (word.kind, word.text) == ("option", "max_tokens")
    assert token_at('handler a = prompt(max_tokens=8)', 14).kind == "kind"
