"""The TextMate grammars of the VS Code extension (editors/vscode) on the bundled programs.

They are read by textmate-grammar-python, a TextMate tokenizer on Oniguruma (VS Code's regex
engine), as VS Code reads them: the few-shot grammar `text.decomp.fewshot` is loaded first and
`source.decomp` includes its rules (`text.decomp.fewshot#step`; the whole grammar for the
triple-quoted `examples=` of a handler). The tests check that

- every character of every bundled file is highlighted (the strongest check a good grammar
  passes; see the two `test_..._highlighted` tests for what it means in each language);
- the grammar agrees with the language's own parser (dsl.parser) wherever the parser's tree
  records a position: handler, program and option names, kinds, parameters, values, steps
  (operator, handler, query, references), conditions, answers; and a `QS:` line is marked
  invalid exactly when the parser refuses it;
- every scope the grammars declare appears in the bundled files or in the two fixtures written
  for the rest (tests/fixtures/editors/), and every keyword of grammar.lark is highlighted;
- package.json holds together (paths, scope names, languages, the server setting).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

from decomp.dsl import lexicon, nodes
from decomp.dsl.errors import DecompError
from decomp.dsl.grammar import parser as lark_parser
from decomp.dsl.parser import parse_fewshot, parse_module

REPO = Path(__file__).resolve().parents[2]
EXTENSION = REPO / "editors" / "vscode"
SYNTAXES = EXTENSION / "syntaxes"
FIXTURES = REPO / "tests" / "fixtures" / "editors"

MODULE, FEWSHOT = "source.decomp", "text.decomp.fewshot"
GRAMMAR_FILES = {MODULE: SYNTAXES / "decomp.tmLanguage.json", FEWSHOT: SYNTAXES / "decomp-fewshot.tmLanguage.json"}
# set by a QS: line the parser refuses; checked on such lines (test_unclosed_brackets_...), never
# present in a valid file
INVALID = "invalid.illegal.unclosed.decomp"


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


BUNDLED_MODULES = sorted((REPO / "programs").rglob("*.decomp"))
BUNDLED_PROMPTS = sorted((REPO / "programs").glob("**/prompts/*.txt"))
# the official DecomP prompt files (tests/fixtures/README.md): few-shot files written by others
OFFICIAL_PROMPTS = sorted((REPO / "tests" / "fixtures" / "decomp" / "prompts").rglob("*.txt"))
MODULE_FILES = [*BUNDLED_MODULES, FIXTURES / "tokens.decomp"]
FEWSHOT_FILES = [*BUNDLED_PROMPTS, *OFFICIAL_PROMPTS, FIXTURES / "tokens.fewshot"]


# ------------------------------------------------------------------ tokenizing
class Grammars:
    """Both grammars, loaded; `scopes` tokenizes a text."""

    def __init__(self, language_parser, registry):
        self.parsers = {}
        for scope in (FEWSHOT, MODULE):  # the few-shot grammar first: source.decomp includes it
            self.parsers[scope] = language_parser(json.loads(GRAMMAR_FILES[scope].read_text()))
            # "scope#rule" includes (a rule of another grammar's repository, as VS Code reads
            # them): textmate-grammar-python looks includes up by their whole name
            for rule, rule_parser in self.parsers[scope].repository.items():
                registry[f"{scope}#{rule}"] = rule_parser

    @lru_cache(maxsize=None)
    def scopes(self, scope: str, text: str) -> dict[tuple[int, int], tuple[str, ...]]:
        """(line, column), both from 0 -> the scopes on that character, outermost first (a name
        holding several scopes, space-separated, counts as each of them, as in VS Code)."""
        element = self.parsers[scope].parse_string(text)
        return {pos: tuple(s for name in names for s in name.split())
                for pos, names in element._token_by_index().items()}


@pytest.fixture(scope="module")
def grammars(tmp_path_factory):
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("textmate"))  # importing textmate_grammar makes ./.textmate_cache
    try:
        from textmate_grammar.parsers.base import LANGUAGE_PARSERS, LanguageParser
    finally:
        os.chdir(here)
    log = logging.getLogger("textmate_grammar")
    level = log.level
    log.setLevel(logging.ERROR)  # it warns about every stretch of text no rule names: most strings
    yield Grammars(LanguageParser, LANGUAGE_PARSERS)
    log.setLevel(level)


def _language(path: Path) -> str:
    return MODULE if path.suffix == ".decomp" else FEWSHOT


def _file_scopes(grammars: Grammars, path: Path):
    text = path.read_text(encoding="utf-8")
    return text.split("\n"), grammars.scopes(_language(path), text)


def _visible(lines: list[str]):
    """Every non-whitespace character: (line, column) from 0, and the character."""
    for ln, line in enumerate(lines):
        for col, char in enumerate(line):
            if not char.isspace():
                yield (ln, col), char


def _where(path_or_text, pos, char) -> str:
    return f"{path_or_text}:{pos[0] + 1}:{pos[1] + 1} {char!r}"


def test_the_bundled_files_are_found():
    """(An empty list would make the parametrized tests below skip.)"""
    assert len(BUNDLED_MODULES) >= 20 and len(BUNDLED_PROMPTS) >= 20 and len(OFFICIAL_PROMPTS) >= 20
    assert all(path.is_file() for path in [*MODULE_FILES, *FEWSHOT_FILES])


# ------------------------------------------------------------------ every character
@pytest.mark.parametrize("path", MODULE_FILES, ids=_rel)
def test_every_character_of_a_module_is_highlighted(grammars, path):
    """Every non-whitespace character of a .decomp file gets a scope that themes colour: one that
    is neither the root scope `source.decomp` nor a `meta.*` scope (so a comment, keyword,
    name, kind, parameter, string, number, constant, reference or punctuation), and none is
    `invalid.*`. The grammar has no catch-all: a statement, option, value, condition or step
    it does not know would be left with the root scope (or a bare meta scope) and fail here."""
    lines, scopes = _file_scopes(grammars, path)
    bare = [_where(_rel(path), pos, char) for pos, char in _visible(lines)
            if not [s for s in scopes.get(pos, ()) if s != MODULE and not s.startswith("meta.")]]
    invalid = [_where(_rel(path), pos, char) for pos, char in _visible(lines)
               if any(s.startswith("invalid.") for s in scopes.get(pos, ()))]
    assert not bare, f"{len(bare)} characters without a token scope: {bare[:10]}"
    assert not invalid, f"marked invalid: {invalid[:10]}"


@pytest.mark.parametrize("path", FEWSHOT_FILES, ids=_rel)
def test_every_line_of_a_fewshot_file_is_highlighted(grammars, path):
    """Every non-whitespace character of a few-shot file gets a scope beyond the root scope
    `text.decomp.fewshot`: its line is a metadata line, a question (QC:/Q:), a step (QS:), an
    answer (A:), a plan line or a context paragraph. Context paragraphs are prose, so they are a
    meta scope only (`meta.paragraph.context.decomp`, as Markdown's paragraphs are), not a
    coloured one; that its lines are told apart as the parser tells them apart is checked by
    test_grammar_agrees_with_the_parser_on_fewshot_files. None is `invalid.*`."""
    lines, scopes = _file_scopes(grammars, path)
    bare = [_where(_rel(path), pos, char) for pos, char in _visible(lines)
            if not [s for s in scopes.get(pos, ()) if s != FEWSHOT]]
    invalid = [_where(_rel(path), pos, char) for pos, char in _visible(lines)
               if any(s.startswith("invalid.") for s in scopes.get(pos, ()))]
    assert not bare, f"{len(bare)} characters without a scope: {bare[:10]}"
    assert not invalid, f"marked invalid: {invalid[:10]}"


# ------------------------------------------------------------------ the parser's positions
def _walk(node):
    yield node
    if isinstance(node, tuple):
        for item in node:
            yield from _walk(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, (type, nodes.Span)):
        for field in dataclasses.fields(node):
            yield from _walk(getattr(node, field.name))


def _cut(span: nodes.Span, first: int | None = None, last: int | None = None) -> nodes.Span:
    """The first `first` (or last `last`) characters of a one-line span."""
    if first is not None:
        return dataclasses.replace(span, end_line=span.line, end_column=span.column + first)
    return dataclasses.replace(span, line=span.end_line, column=span.end_column - last)


def _literal_scope(value) -> str:
    if isinstance(value, bool):
        return "constant.language.boolean.decomp"
    if value is None:
        return "constant.language.null.decomp"
    if isinstance(value, str):
        return "string.quoted."
    return "constant.numeric.decomp"


_VALUE_SCOPES = {"number": "constant.numeric.decomp", "bool": "constant.language.boolean.decomp",
                 "null": "constant.language.null.decomp", "ident": "variable.other.ident.decomp",
                 "string": "string.quoted.",
                 # a type: its names, brackets, literals and field names (one_of("a"), {name: str})
                 "type": ("support.type.decomp", "punctuation.", "string.quoted.", "constant.",
                          "variable.other.property.decomp", "variable.other.ident.decomp")}


def _step_expectations(step: nodes.Step):
    yield _cut(step.span, first=3), "keyword.control.marker.qs.decomp"
    yield step.span, "meta.step.decomp"
    if step.operator_span is not None:
        yield _cut(step.operator_span, first=1), "punctuation.definition.operator.begin.decomp"
        yield dataclasses.replace(step.operator_span, column=step.operator_span.column + 1,
                                  end_column=step.operator_span.end_column - 1), "support.function.operator.decomp"
        yield _cut(step.operator_span, last=1), "punctuation.definition.operator.end.decomp"
    if step.handler_span is not None:
        yield _cut(step.handler_span, first=1), "punctuation.definition.handler.begin.decomp"
        yield (dataclasses.replace(step.handler_span, column=step.handler_span.column + 1,
                                   end_column=step.handler_span.end_column - 1),
               "keyword.control.eoq.decomp" if step.handler == "EOQ" else "entity.name.function.handler.decomp")
        yield _cut(step.handler_span, last=1), "punctuation.definition.handler.end.decomp"
    if step.query_span is not None:
        yield step.query_span, "string.unquoted.query.decomp"


def _line_span(lines: list[str], number: int) -> nodes.Span:
    return nodes.Span("", number, 1, number, len(lines[number - 1]) + 1)


def _example_expectations(example: nodes.Example, lines: list[str]):
    """An example's question line (QC: or Q:), its metadata lines and its context lines, which the
    parser keeps as text only; a context line may be an ADaPT plan line (a plan's, not a few-shot
    file's, syntax: the few-shot grammar reads it as context)."""
    numbers = range(example.span.line, min(example.span.end_line, len(lines)) + 1)  # a missing last \n: one line more
    if example.question_kind in ("QC", "Q"):
        number = next(n for n in numbers if lines[n - 1].lstrip().startswith(example.question_kind + ":"))
        yield _line_span(lines, number), "meta.question.decomp"
    meta_mark = re.compile(next(t for t in lark_parser().terminals if t.name == "META_MARK").pattern.value)
    for number in numbers:
        if meta_mark.match(lines[number - 1].lstrip()):
            yield _line_span(lines, number), "meta.metadata.decomp"
    context = {line.strip() for line in example.context.split("\n") if line.strip()}
    for number in numbers:
        if lines[number - 1].strip() in context:
            yield _line_span(lines, number), ("meta.paragraph.context.decomp", "meta.plan.")


def _expectations(tree, lines):
    """(span, scope) for every position the parser's tree records; a scope ending in "." is a
    prefix (any string.quoted.* scope), a tuple is any one of them."""
    for node in _walk(tree):
        if isinstance(node, nodes.HandlerDecl):
            yield node.name_span, "entity.name.function.handler.decomp"
            yield node.kind_span, "support.type.kind.decomp"
        elif isinstance(node, nodes.Program):
            yield node.name_span, "entity.name.function.program.decomp"
        elif isinstance(node, nodes.Param):
            yield node.span, "variable.parameter.program.decomp"
        elif isinstance(node, nodes.Option):
            yield _cut(node.span, first=len(node.name)), "variable.parameter.option.decomp"
        elif isinstance(node, nodes.Value) and node.kind == "list":
            yield _cut(node.span, first=1), "punctuation.section.list.begin.decomp"
            yield _cut(node.span, last=1), "punctuation.section.list.end.decomp"
        elif isinstance(node, nodes.Value):
            yield node.span, _VALUE_SCOPES[node.kind]
        elif isinstance(node, nodes.Literal):
            yield node.span, _literal_scope(node.value)
        elif isinstance(node, nodes.Step):
            yield from _step_expectations(node)
        elif isinstance(node, nodes.Ref):
            yield _cut(node.span, first=1), "punctuation.definition.reference.decomp"
            yield node.span, ("variable.other.reference.step.decomp" if node.index is not None
                              else "variable.other.reference.input.decomp")
        elif isinstance(node, (nodes.Len, nodes.Ok, nodes.Depth)):
            yield _cut(node.span, first=len(type(node).__name__)), "support.function.builtin.decomp"
        elif isinstance(node, nodes.If):
            yield _cut(node.span, first=2), "keyword.control.conditional.if.decomp"
        elif isinstance(node, nodes.Import):
            yield _cut(node.span, last=len(node.path) + 2), "string.quoted."
        elif isinstance(node, nodes.Main):
            yield _cut(node.span, last=len(node.target)), "entity.name.function.main.decomp"
        elif isinstance(node, nodes.Metric):
            yield node.name_span, "support.function.metric.decomp"
        elif isinstance(node, nodes.Answer):
            yield node.span, "meta.answer.decomp"
        elif isinstance(node, nodes.Example):
            yield from _example_expectations(node, lines)


def _span_chars(span: nodes.Span, lines: list[str]):
    for line in range(span.line, span.end_line + 1):
        text = lines[line - 1]
        start = span.column - 1 if line == span.line else 0
        end = span.end_column - 1 if line == span.end_line else len(text)
        for col in range(start, end):
            if not text[col].isspace():
                yield (line - 1, col), text[col]


def _disagreements(tree, lines, scopes, name):
    checked, wrong = 0, []
    for span, expected in _expectations(tree, lines):
        wanted = expected if isinstance(expected, tuple) else (expected,)
        for pos, char in _span_chars(span, lines):
            checked += 1
            found = scopes.get(pos, ())
            if not any(s == e or (e.endswith(".") and s.startswith(e)) for s in found for e in wanted):
                wrong.append(f"{_where(name, pos, char)}: {expected} not in {found}")
    return checked, wrong


@pytest.mark.parametrize("path", MODULE_FILES, ids=_rel)
def test_grammar_agrees_with_the_parser_on_modules(grammars, path):
    lines, scopes = _file_scopes(grammars, path)
    tree = parse_module(path.read_text(encoding="utf-8"), _rel(path))
    checked, wrong = _disagreements(tree, lines, scopes, _rel(path))
    assert checked > 10
    assert not wrong, f"{len(wrong)} of {checked} characters: {wrong[:10]}"


@pytest.mark.parametrize("path", FEWSHOT_FILES, ids=_rel)
def test_grammar_agrees_with_the_parser_on_fewshot_files(grammars, path):
    lines, scopes = _file_scopes(grammars, path)
    tree = parse_fewshot(path.read_text(encoding="utf-8"), _rel(path))
    checked, wrong = _disagreements(tree, lines, scopes, _rel(path))
    assert checked > 10
    assert not wrong, f"{len(wrong)} of {checked} characters: {wrong[:10]}"


# QS: lines, and whether the parser accepts them (in a few-shot file, as in a program)
STEP_LINES = [
    ("QS: [split what", False),             # unclosed [handler
    ("QS: (foreach) [split what", False),
    ("QS: [", False),
    ("QS: []", False),                      # empty handler reference
    ("QS: (foreach [split] x", False),      # unclosed (operator
    ("QS: (foreach", False),
    ("QS: (a b) text", True),               # not an operator: text
    ("QS: [split] (foreach x", True),       # after the handler: text
    ("QS: (foreach) (select [x", True),
    ("QS: (foreach) text [y", True),
    ("QS: text [a] b", True),
    ("QS:[a]#1", True),
    ("QS: (foreach)  [a] [b] #1", True),
    ("  QS: [a] # text, not a comment", True),
]


@pytest.mark.parametrize(("line", "accepted"), STEP_LINES)
def test_unclosed_brackets_are_invalid_exactly_when_the_parser_refuses_the_step(grammars, line, accepted):
    text = f"QC: q\n{line}\nA: 1\n"
    try:
        parse_fewshot(text)
    except DecompError:
        parsed = False
    else:
        parsed = True
    assert parsed == accepted
    scopes = grammars.scopes(FEWSHOT, text)
    invalid = [col for (ln, col), found in scopes.items() if ln == 1 and INVALID in found]
    if accepted:
        assert invalid == []
    else:
        assert len(invalid) == 1 and line[invalid[0]] in "[("
    in_program = f"program p(x) {{\n    {line.strip()}\n}}\n"
    try:
        parse_module(in_program)
    except DecompError:
        assert not accepted
    else:
        assert accepted
    module_scopes = grammars.scopes(MODULE, in_program)
    assert any(INVALID in found for (ln, _), found in module_scopes.items() if ln == 1) is not accepted


# ------------------------------------------------------------------ every scope, every keyword
def _declared(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("name", "contentName") and isinstance(value, str):
                found.update(value.split())
            else:
                found |= _declared(value)
    elif isinstance(node, list):
        for item in node:
            found |= _declared(item)
    return found


def _corpus_scopes(grammars) -> set[str]:
    produced = set()
    for path in [*MODULE_FILES, *FEWSHOT_FILES]:
        lines, scopes = _file_scopes(grammars, path)
        for pos, _ in _visible(lines):
            produced.update(scopes.get(pos, ()))
    return produced


def test_every_declared_scope_appears_in_the_bundled_files_or_the_fixtures(grammars):
    declared = set()
    for path in GRAMMAR_FILES.values():
        declared |= _declared(json.loads(path.read_text())["repository"])
    produced = _corpus_scopes(grammars)
    assert INVALID in declared  # it appears on refused lines only: see the test above
    assert sorted(declared - produced - {INVALID}) == []
    assert sorted(produced - declared - {MODULE, FEWSHOT}) == []
    # the bundled files alone show most of them; the fixtures add what they lack
    bundled = set()
    for path in [*BUNDLED_MODULES, *BUNDLED_PROMPTS]:
        lines, scopes = _file_scopes(grammars, path)
        bundled.update(s for pos, _ in _visible(lines) for s in scopes.get(pos, ()))
    assert len(bundled & declared) > len(declared) * 2 // 3


_KEYWORD_SCOPES = ("keyword.", "constant.language.", "support.function.builtin.")


# highlighted as keywords, though not among the lexicon's words: the handler that ends a program,
# and the words of an ADaPT plan and of a few-shot file's metadata line (terminals by pattern)
_OTHER_KEYWORDS = {"EOQ", "Step", "Execution", "Order", "AND", "OR", "METADATA"}


def test_the_keywords_of_grammar_lark_are_the_highlighted_ones(grammars):
    """The words of grammar.lark as `dsl.lexicon` reads them (import, model, ..., if, else, and,
    or, not, len, ok, depth, true, false, null, and `in` of COMPARE) and the step markers: each
    is highlighted as a keyword, constant or built-in somewhere in the bundled files or the
    fixtures, and no other word is, but for `_OTHER_KEYWORDS`."""
    words = {*lexicon.KEYWORDS, *lexicon.MARKERS}
    assert {"import", "model", "handler", "program", "main", "metric", "with", "if", "else", "and",
            "or", "not", "len", "ok", "depth", "true", "false", "null", "in", "QC:", "QS:", "Q:", "A:"} <= words
    seen, others = set(), set()
    for path in [*MODULE_FILES, *FEWSHOT_FILES]:
        lines, scopes = _file_scopes(grammars, path)
        for ln, line in enumerate(lines):
            for match in re.finditer(r"[A-Za-z]+:?", line):
                word = match.group() if match.group() in words else match.group().rstrip(":")
                if any(s.startswith(_KEYWORD_SCOPES) for s in scopes.get((ln, match.start()), ())):
                    (seen if word in words else others).add(word)
    assert sorted(words - seen) == []
    assert sorted(others - _OTHER_KEYWORDS) == []


def test_the_fixtures_are_valid_decomp():
    """The fixtures are real inputs: the language's parser reads them."""
    parse_module((FIXTURES / "tokens.decomp").read_text(encoding="utf-8"), "tokens.decomp")
    fewshot = parse_fewshot((FIXTURES / "tokens.fewshot").read_text(encoding="utf-8"), "tokens.fewshot")
    assert fewshot.examples[0].metadata and fewshot.examples[0].steps


# ------------------------------------------------------------------ specific lines
def _scopes_of(grammars, scope: str, text: str, needle: str, nth: int = 0) -> list[tuple[str, ...]]:
    """The scopes of each character of the `nth` occurrence of `needle` in `text` (a needle that
    starts or ends with a letter, digit or _ not inside a longer word: `and` is not in `handler`)."""
    pattern = re.escape(needle)
    if re.match(r"\w", needle):
        pattern = r"(?<!\w)" + pattern
    if re.search(r"\w$", needle):
        pattern += r"(?!\w)"
    at = [m.start() for m in re.finditer(pattern, text)][nth]
    line = text.count("\n", 0, at)
    col = at - (text.rfind("\n", 0, at) + 1)
    scopes = grammars.scopes(scope, text)
    return [scopes.get((line, col + i), ()) for i in range(len(needle))]


def _all_have(grammars, scope, text, needle, expected, nth=0) -> bool:
    return all(expected in found for found in _scopes_of(grammars, scope, text, needle, nth))


def _none_has(grammars, scope, text, needle, prefix, nth=0) -> bool:
    return not any(s.startswith(prefix) for found in _scopes_of(grammars, scope, text, needle, nth) for s in found)


PROGRAM = """\
program answer(question) {
    QS: (foreach) [qa] What is #1? # asked as written
    QS: [EOQ]
}
"""


@pytest.mark.parametrize(("scope", "text"), [(FEWSHOT, "QC: q\nQS: (foreach) [qa] What is #1? # asked as written\n"),
                                             (MODULE, PROGRAM)], ids=["fewshot", "program"])
def test_a_step_line(grammars, scope, text):
    assert _all_have(grammars, scope, text, "QS:", "keyword.control.marker.qs.decomp")
    operator = _scopes_of(grammars, scope, text, "(foreach)")
    assert "punctuation.definition.operator.begin.decomp" in operator[0]
    assert "punctuation.definition.operator.end.decomp" in operator[-1]
    assert _all_have(grammars, scope, text, "foreach", "support.function.operator.decomp")
    handler = _scopes_of(grammars, scope, text, "[qa]")
    assert "punctuation.definition.handler.begin.decomp" in handler[0]
    assert "punctuation.definition.handler.end.decomp" in handler[-1]
    assert _all_have(grammars, scope, text, "qa", "entity.name.function.handler.decomp")
    assert "punctuation.definition.reference.decomp" in _scopes_of(grammars, scope, text, "#1")[0]
    assert _all_have(grammars, scope, text, "#1", "variable.other.reference.step.decomp")
    assert _all_have(grammars, scope, text, "What is #1? # asked as written", "string.unquoted.query.decomp")
    # a # after a blank on a QS: line is text (the checker warns about it), not a comment
    assert _none_has(grammars, scope, text, "# asked", "comment.")
    assert not _all_have(grammars, scope, text, "foreach", "string.unquoted.query.decomp")


def test_eoq_and_named_references(grammars):
    assert _all_have(grammars, MODULE, PROGRAM, "EOQ", "keyword.control.eoq.decomp")
    text = "program p(question) {\n    QS: [split] #question\n}\n"
    assert _all_have(grammars, MODULE, text, "#question", "variable.other.reference.input.decomp")
    assert _all_have(grammars, MODULE, text, "question", "variable.parameter.program.decomp")


def test_declarations_and_keywords(grammars):
    text = ('import "lib.decomp"\n'
            'model default = "fake:answers.json"\n'
            'handler split = python(function="m:split", max_tokens=8)  # a comment\n'
            'program letters(question, word) with max_depth = 4 {\n'
            '    if ok(#1) and not len(#1) > 2 or depth() >= 3 {\n'
            '        QS: [EOQ]\n'
            '    } else {\n'
            '        QS: [split] #word\n'
            '    }\n'
            '}\n'
            'metric em\n'
            'main letters\n')
    for word, scope in [("import", "keyword.control.import.decomp"), ("model", "keyword.other.model.decomp"),
                        ("handler", "keyword.other.handler.decomp"), ("program", "keyword.other.program.decomp"),
                        ("with", "keyword.other.with.decomp"), ("if", "keyword.control.conditional.if.decomp"),
                        ("else", "keyword.control.conditional.else.decomp"), ("metric", "keyword.other.metric.decomp"),
                        ("main", "keyword.other.main.decomp"), ("and", "keyword.operator.logical.decomp"),
                        ("not", "keyword.operator.logical.decomp"), ("or", "keyword.operator.logical.decomp"),
                        (">=", "keyword.operator.comparison.decomp"), ("ok", "support.function.builtin.decomp"),
                        ("len", "support.function.builtin.decomp"), ("depth", "support.function.builtin.decomp"),
                        ("default", "variable.other.constant.model.decomp"),
                        ("split", "entity.name.function.handler.decomp"), ("python", "support.type.kind.decomp"),
                        ("function", "variable.parameter.option.decomp"), ("max_tokens", "variable.parameter.option.decomp"),
                        ("8", "constant.numeric.decomp"), ("letters", "entity.name.function.program.decomp"),
                        ("word", "variable.parameter.program.decomp"), ("max_depth", "variable.parameter.option.decomp"),
                        ("em", "support.function.metric.decomp"), ("{", "punctuation.section.block.begin.decomp"),
                        ("(", "punctuation.section.options.begin.decomp")]:
        assert _all_have(grammars, MODULE, text, word, scope), (word, scope)  # its first occurrence
    assert _all_have(grammars, MODULE, text, "# a comment", "comment.line.number-sign.decomp")
    assert _all_have(grammars, MODULE, text, "#", "punctuation.definition.comment.decomp", nth=0)
    assert _all_have(grammars, MODULE, text, "letters", "entity.name.function.main.decomp", nth=1)
    # a keyword inside a name is not one
    text = 'handler importer = python(function="m:f")\n'
    assert _all_have(grammars, MODULE, text, "importer", "entity.name.function.handler.decomp")
    assert _none_has(grammars, MODULE, text, "importer", "keyword.")


def test_strings(grammars):
    text = ('handler h = prompt(stop=["\\n\\n", "Task:"], pattern=r"\\d+\\"", quote=\'it\\\'s\', '
            'none=null, all=true, prefix="""one\n"two" \\t\n""", bare=word)\n')
    assert _all_have(grammars, MODULE, text, "\\n", "constant.character.escape.decomp")
    assert _all_have(grammars, MODULE, text, '"\\n\\n"', "string.quoted.double.decomp")
    assert _all_have(grammars, MODULE, text, '"', "punctuation.definition.string.begin.decomp")
    # raw strings: no escapes, and \" does not end them (grammar.lark's STRING)
    assert _all_have(grammars, MODULE, text, 'r"\\d+\\""', "string.quoted.double.raw.decomp")
    assert "storage.type.string.decomp" in _scopes_of(grammars, MODULE, text, 'r"')[0]
    assert _none_has(grammars, MODULE, text, '\\d+\\"', "constant.character.escape")
    assert _all_have(grammars, MODULE, text, "\\'", "constant.character.escape.decomp")
    assert _all_have(grammars, MODULE, text, "'it\\'s'", "string.quoted.single.decomp")
    assert _all_have(grammars, MODULE, text, "null", "constant.language.null.decomp")
    assert _all_have(grammars, MODULE, text, "true", "constant.language.boolean.decomp")
    assert _all_have(grammars, MODULE, text, "word", "variable.other.ident.decomp")
    # a triple-quoted string spans lines, quotes and escapes included
    for part in ('"""', "one", '"two"', "\\t"):
        assert _all_have(grammars, MODULE, text, part, "string.quoted.triple.decomp"), part
    assert _all_have(grammars, MODULE, text, "\\t", "constant.character.escape.decomp")
    assert _all_have(grammars, MODULE, text, "bare", "variable.parameter.option.decomp")


def test_a_triple_quoted_string_ends_at_its_first_closing_quotes(grammars):
    text = 'handler h = prompt(text="""a\\""", file="x")\n'  # grammar.lark: """(?:.|\\n)*?"""
    assert _all_have(grammars, MODULE, text, "file", "variable.parameter.option.decomp")
    assert _none_has(grammars, MODULE, text, "file", "string.")


def test_inline_examples_are_fewshot_text(grammars):
    text = ('handler dec = decomposer(examples="""QC: Reverse it.\n'
            'QS: (foreach) [rev] #1\n'
            'A: ["b", "a"]""", max_steps=4)\n')
    parse_module(text)
    assert _all_have(grammars, MODULE, text, "QC:", "keyword.control.marker.qc.decomp")
    assert _all_have(grammars, MODULE, text, "rev", "entity.name.function.handler.decomp")
    assert _all_have(grammars, MODULE, text, "#1", "variable.other.reference.step.decomp")
    assert _all_have(grammars, MODULE, text, '"b"', "string.quoted.double.decomp")
    assert _all_have(grammars, MODULE, text, "Reverse it.", "meta.embedded.block.fewshot.decomp")
    # the string ends at its """, at the end of an A: line too: the options go on
    assert _all_have(grammars, MODULE, text, '"""', "punctuation.definition.string.end.decomp", nth=1)
    assert _all_have(grammars, MODULE, text, "max_steps", "variable.parameter.option.decomp")


def test_fewshot_lines(grammars):
    text = ('Some context about Rosalind.\n'
            '# METADATA: {"id": 7, "ok": true}\n'
            'QC: Who is Rosalind?\n'
            'QS: [qa] Who is Rosalind?\n'
            'A: ["a scientist", 1953, null]\n'
            'QS: [EOQ]\n'
            '\n'
            'Q: A question?\n'
            'A: an answer in words\n'
            'Step 1: get 1 oak log\n'
            'Execution Order: (Step 1 AND Step 2) OR Step 3.\n')
    assert _all_have(grammars, FEWSHOT, text, "Some context about Rosalind.", "meta.paragraph.context.decomp")
    assert _all_have(grammars, FEWSHOT, text, "# METADATA:", "keyword.other.metadata.decomp")
    assert _all_have(grammars, FEWSHOT, text, "7", "constant.numeric.decomp")
    assert _all_have(grammars, FEWSHOT, text, "QC:", "keyword.control.marker.qc.decomp")
    assert _all_have(grammars, FEWSHOT, text, "Who is Rosalind?", "markup.heading.question.decomp")
    assert _all_have(grammars, FEWSHOT, text, "A:", "keyword.control.marker.a.decomp")
    assert _all_have(grammars, FEWSHOT, text, '"a scientist"', "string.quoted.double.decomp")
    assert _all_have(grammars, FEWSHOT, text, "[", "punctuation.section.list.begin.decomp", nth=1)
    assert _all_have(grammars, FEWSHOT, text, "1953", "constant.numeric.decomp")
    assert _all_have(grammars, FEWSHOT, text, "null", "constant.language.null.decomp")
    assert _all_have(grammars, FEWSHOT, text, "Q:", "keyword.control.marker.q.decomp")
    assert _all_have(grammars, FEWSHOT, text, "an answer in words", "meta.answer.decomp")
    assert _all_have(grammars, FEWSHOT, text, "answer", "string.unquoted.answer.decomp")
    assert _all_have(grammars, FEWSHOT, text, "Step 1:", "keyword.other.plan.step.decomp")
    assert _all_have(grammars, FEWSHOT, text, "Execution Order:", "keyword.other.plan.order.decomp")
    assert _all_have(grammars, FEWSHOT, text, "Step 1", "variable.other.reference.plan.decomp", nth=1)
    assert _all_have(grammars, FEWSHOT, text, "AND", "keyword.operator.logical.decomp")
    # the markers count at the start of a line only
    assert _none_has(grammars, FEWSHOT, "He said Q: no\n", "Q:", "keyword.")


# ------------------------------------------------------------------ the extension's package.json
@pytest.fixture(scope="module")
def package() -> dict:
    return json.loads((EXTENSION / "package.json").read_text())


def test_package_json_languages_and_grammars(package):
    contributes = package["contributes"]
    languages = {lang["id"]: lang for lang in contributes["languages"]}
    assert set(languages) == {"decomp", "decomp-fewshot"}
    assert languages["decomp"]["extensions"] == [".decomp"]
    assert ".fewshot" in languages["decomp-fewshot"]["extensions"]
    for lang in languages.values():
        configuration = json.loads((EXTENSION / lang["configuration"]).read_text())
        assert {"brackets", "autoClosingPairs"} <= set(configuration)
    module_config = json.loads((EXTENSION / languages["decomp"]["configuration"]).read_text())
    comment = next(t for t in lark_parser().terminals if t.name == "COMMENT").pattern.value
    assert module_config["comments"]["lineComment"] == comment[0] == "#"
    first_line = re.compile(languages["decomp-fewshot"]["firstLine"])  # a JavaScript regex, Python-compatible
    assert all(first_line.search(line) for line in ["QC: What?", "Q: What?", "# METADATA: {}"])
    assert not any(first_line.search(line) for line in ["QS: [a] b", "A: 1", "movie: Hobbleford ; year: 1974."])

    grammars = {g["scopeName"]: g for g in contributes["grammars"]}
    assert set(grammars) == {MODULE, FEWSHOT}
    assert {g["language"] for g in grammars.values()} == set(languages)
    assert grammars[MODULE]["language"] == "decomp" and grammars[FEWSHOT]["language"] == "decomp-fewshot"
    for scope, entry in grammars.items():
        path = (EXTENSION / entry["path"]).resolve()
        assert path == GRAMMAR_FILES[scope].resolve()
        assert json.loads(path.read_text())["scopeName"] == scope
    for embedded_scope, language in grammars[MODULE].get("embeddedLanguages", {}).items():
        assert language in languages
        assert embedded_scope in _declared(json.loads(GRAMMAR_FILES[MODULE].read_text()))


def _includes(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "include":
                yield value
            else:
                yield from _includes(value)
    elif isinstance(node, list):
        for item in node:
            yield from _includes(item)


def test_every_include_resolves():
    """VS Code drops an include it cannot resolve without a word: each one names a rule of its
    own grammar's repository (#rule), or a grammar of the extension (scope, scope#rule)."""
    grammars = {scope: json.loads(path.read_text()) for scope, path in GRAMMAR_FILES.items()}
    for scope, grammar in grammars.items():
        for include in _includes(grammar):
            target, _, rule = include.partition("#")
            target = target or scope
            assert target in grammars, include
            assert not rule or rule in grammars[target]["repository"], include


def test_package_json_extension_and_server_setting(package):
    assert package["name"] == "decomp-lang" and package["publisher"] == "decomp-lang"
    assert package["version"] == "0.1.0" and package["license"] == "Apache-2.0"
    assert package["engines"]["vscode"].startswith("^1.")
    assert package["dependencies"]["vscode-languageclient"].startswith("^9")
    assert (EXTENSION / package["main"]).is_file()
    assert {"onLanguage:decomp", "onLanguage:decomp-fewshot"} >= set(package["activationEvents"])
    setting = package["contributes"]["configuration"]["properties"]["decomp.server.command"]
    assert setting["type"] == "array" and setting["items"] == {"type": "string"}
    assert setting["default"] == ["decomp", "lsp"]
    assert "decomp.server.command" in package["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    source = (EXTENSION / package["main"]).read_text()
    assert "'decomp.server.command'" in source
    assert "vscode-languageclient/node" in source and "TransportKind.stdio" in source
    assert "'decomp'" in source and "'decomp-fewshot'" in source
    assert "scheme: 'file'" in source and "scheme: 'untitled'" in source
    assert re.search(r"function deactivate\(\)[^}]*stop\(\)", source)
    for name in ("README.md", "LICENSE", ".vscodeignore"):
        assert (EXTENSION / name).is_file()
    ignored = (REPO / ".gitignore").read_text().split()
    assert "editors/vscode/node_modules/" in ignored and "*.vsix" in ignored
