"""dsl.lexicon: the grammar's words, read from grammar.lark, agree with what Lark reads."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lark import Token, Tree

from decomp.dsl import lexicon, nodes
from decomp.dsl.grammar import parser
from decomp.dsl.limits import normalize_newlines
from decomp.dsl.parser import find_refs

REPO = Path(__file__).resolve().parents[2]
SAMPLE = '''import "lib.decomp"
model default = "fake" (temperature=0.5)
handler split = prompt(file='prompts/split.txt', stop=["\\n", r"\\d+\\"", 'it\\'s'], max_tokens=64)
program reverse(seq: list[str], n) -> str with max_depth = 8 {
    QS: [items] #seq
    if len(#1) < 4 and not ok(#seq) or #n == "x" {
        QS:(foreach)[reverse_short]#1 and #n
        QS: [EOQ]
    } else {
        QS:   (select)   [ spaced ]   (not an operator) #2
    }
}
metric my_metrics.close:score
main reverse
'''
MODULES = [SAMPLE, *(p.read_text(encoding="utf-8") for p in sorted((REPO / "programs").rglob("*.decomp")))]
FEWSHOTS = [p for p in sorted((REPO / "programs").glob("**/prompts/*.txt")) if "QS:" in p.read_text(encoding="utf-8")]
PATTERNS = ("NAME", "REF", "STRING", "OPERATOR", "HANDLER_REF")


def _tokens(tree: Tree) -> list[Token]:
    return list(tree.scan_values(lambda v: isinstance(v, Token)))


@pytest.mark.parametrize("text", MODULES, ids=["sample", *(str(i) for i in range(1, len(MODULES)))])
def test_patterns_match_exactly_the_parsers_tokens(text):
    """Wherever Lark reads a NAME, REF, STRING, OPERATOR or HANDLER_REF, the lexicon's pattern
    of that name, matched at the token's start, ends where the token ends."""
    text = normalize_newlines(text)
    tokens = [t for t in _tokens(parser().parse(text, start="module")) if t.type in PATTERNS]
    assert tokens
    for token in tokens:
        match = getattr(lexicon, token.type).match(text, token.start_pos)
        assert match is not None and match.end() == token.end_pos, (token.type, str(token))


def test_the_sample_holds_every_kind_of_token():
    tokens = _tokens(parser().parse(SAMPLE, start="module"))
    assert {t.type for t in tokens} >= {*PATTERNS, "QS_MARK", "REST"}


@pytest.mark.parametrize("text", MODULES[:1] + MODULES[1::4])
def test_declaration_start_is_where_lark_starts_a_statement(text):
    """The lines `DECLARATION_START` matches (where error recovery cuts a module) are the
    first lines of the module's top-level statements, and only those."""
    text = normalize_newlines(text)
    starts = {child.meta.line - 1 for child in parser().parse(text, start="module").children}
    matched = {i for i, line in enumerate(text.split("\n")) if lexicon.DECLARATION_START.match(line)}
    assert matched == starts


@pytest.mark.parametrize("path", FEWSHOTS[::3], ids=lambda p: p.name)
def test_step_head_ends_where_lark_starts_the_text(path):
    """On every step line of the bundled few-shot files (and the sample's), `QS_LINE` matches
    and `STEP_HEAD` ends where Lark's REST (the step's text) starts."""
    text = normalize_newlines(path.read_text(encoding="utf-8"))
    _check_steps(text, parser().parse(text, start="fewshot"))


def test_step_head_on_the_sample():
    _check_steps(SAMPLE, parser().parse(SAMPLE, start="module"))


def _check_steps(text: str, tree: Tree) -> None:
    lines = text.split("\n")
    steps = list(tree.find_data("step"))
    assert steps
    for step in steps:
        mark, *_, last = step.children
        line = lines[mark.line - 1]
        assert mark.type == "QS_MARK" and lexicon.QS_LINE.match(line) is not None, line
        head = lexicon.STEP_HEAD.match(line).end()
        if last.type == "REST":
            assert head == last.column - 1, line
        else:
            assert line[head:].strip() == "", line


def test_keywords_and_markers_are_grammar_larks():
    assert lexicon.DECLARATIONS == ("import", "model", "handler", "program", "main", "metric")
    assert set(lexicon.KEYWORDS) == {"import", "model", "handler", "program", "main", "metric", "with", "if",
                                     "else", "and", "or", "not", "len", "ok", "depth", "true", "false", "null", "in"}
    assert set(lexicon.MARKERS) == {"QC:", "QS:", "Q:", "A:"}
    with pytest.raises(AttributeError, match="no attribute 'NOPE'"):
        lexicon.NOPE  # noqa: B018


def test_a_reference_is_what_the_grammar_calls_one():
    """`#` and ASCII digits, or `#` and a name: a digit of another script is not an index."""
    span = nodes.Span("p", 1, 1, 1, 1)
    refs = find_refs("#1 #name #\u0661 #2x #_a", span)
    assert [(r.index, r.name) for r in refs] == [(1, None), (None, "name"), (2, None), (None, "_a")]


def test_importing_the_lexicon_builds_no_parser():
    """`import decomp` stays lazy: the patterns, and Lark's parser, are built on first use."""
    code = ("import decomp.dsl.lexicon, decomp.dsl.parser, decomp.dsl.grammar as g;"
            "assert g.parser.cache_info().currsize == 0;"
            "from decomp.dsl import lexicon; lexicon.REF; assert g.parser.cache_info().currsize == 1")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
