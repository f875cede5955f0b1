"""runtime.lsp.tokens: what sits at a column of a line, read with dsl.lexicon's patterns."""
from __future__ import annotations

from decomp.dsl import lexicon
from decomp.editors.lsp.tokens import KEYWORDS, Token, token_at


def test_every_declaration_keyword_has_its_hover():
    assert set(KEYWORDS) == {*lexicon.DECLARATIONS, "if"}


def test_step_line_pieces():
    line = "    QS:  (foreach) [ split ] #1 and #name"
    assert token_at(line, 10) == Token("operator", "foreach", 9, 18)
    assert token_at(line, 22) == Token("handler", "split", 19, 28)
    assert token_at(line, 30) == Token("ref", "#1", 29, 31)
    assert token_at(line, 38) == Token("ref", "#name", 36, 41)
    assert token_at("QS: (not an operator) x", 6) is None


def test_strings_raw_or_not():
    line = 'handler h = regex(pattern=r"\\d+", stop=\'it\\\'s\')'
    assert token_at(line, 29) == Token("string", "\\d+", 26, 32, "pattern")
    assert token_at(line, 41) == Token("string", "it\\'s", 39, 46, "stop")
    assert token_at('x = "a" # "comment"', 12) is None


def test_a_unicode_digit_is_no_reference():
    assert token_at("QS: [a] #\u0661", 9) is None
