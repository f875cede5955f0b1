"""What sits at a place in a line of `.decomp` or few-shot text, read from the line alone (the
document may not parse while it is typed): a `#n`/`#name` reference, a step's `[handler]` or
`(operator)`, a string, a word, and what the word is in its line (a handler's kind, an option's
name, a declared name).

Columns are 0-based code points within the line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from decomp.dsl import lexicon

HANDLER_HEAD = re.compile(r"^\s*handler\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*([A-Za-z_][A-Za-z0-9_]*)?")
_MAIN = re.compile(r"^\s*main\s+([A-Za-z_][A-Za-z0-9_]*)")
_PROGRAM = re.compile(r"^\s*program\s+([A-Za-z_][A-Za-z0-9_]*)")
_IF_LINE = re.compile(r"^\s*(?:}\s*else\s*)?if\b")
_IMPORT = re.compile(r"^\s*import\s")


@dataclass(frozen=True)
class Token:
    """A piece of a line: its kind, its text (a string's content, a handler's name without
    brackets), and where it sits (start inclusive, end exclusive, the whole piece)."""

    kind: str  # "ref" | "handler" | "operator" | "string" | "kind" | "option" | "name" | "keyword" | "word"
    text: str
    start: int
    end: int
    #: For an option, a string value or a word after `=`: the option's name; for an import path: "import".
    context: str | None = None


def reads_refs(line: str, fewshot: bool) -> bool:
    """Whether `#...` on this line is a reference (a step or an `if` condition; any line of a
    few-shot file) rather than a comment."""
    return fewshot or bool(lexicon.QS_LINE.match(line) or _IF_LINE.match(line))


def token_at(line: str, col: int, fewshot: bool = False) -> Token | None:
    """The token of `line` that holds column `col` (or ends just before it), or None."""
    if reads_refs(line, fewshot):
        for match in lexicon.REF.finditer(line):
            if match.start() <= col <= match.end():
                return Token("ref", match.group(), match.start(), match.end())
    step = lexicon.QS_LINE.match(line)
    if step:
        op = lexicon.OPERATOR.match(line, step.end())
        if op and op.start() <= col <= op.end():
            return Token("operator", op.group()[1:-1], op.start(), op.end())
        for match in lexicon.HANDLER_REF.finditer(line):
            if match.start() <= col <= match.end():
                return Token("handler", match.group()[1:-1].strip(), match.start(), match.end())
        return None
    if _comment_before(line, col):
        return None
    for match in lexicon.STRING.finditer(line):
        if match.start() <= col < match.end():
            content = match.group().lstrip("rR")[1:-1]
            return Token("string", content, match.start(), match.end(), _string_context(line, match))
    for match in lexicon.NAME.finditer(line):
        if match.start() <= col <= match.end():
            return _word(line, match)
    return None


def _comment_before(line: str, col: int) -> bool:
    """Whether a `#` comment starts before `col` (outside strings)."""
    masked = lexicon.STRING.sub(lambda m: " " * len(m.group()), line)
    hash_at = masked.find("#")
    return 0 <= hash_at <= col


def _string_context(line: str, match: re.Match) -> str | None:
    if _IMPORT.match(line):
        return "import"
    before = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?:\[[^\]]*)?$", line[:match.start()])
    return before.group(1) if before else None


def _word(line: str, match: re.Match) -> Token:
    word, start, end = match.group(), match.start(), match.end()
    head = HANDLER_HEAD.match(line)
    if head and head.start(1) == start:
        return Token("name", word, start, end, "handler")
    if head and head.group(2) and head.start(2) == start:
        return Token("kind", word, start, end)
    for pattern, what in ((_MAIN, "main"), (_PROGRAM, "program")):
        found = pattern.match(line)
        if found and found.start(1) == start:
            return Token("name", word, start, end, what)
    if re.match(r"\s*=", line[end:]) and not line[end:].lstrip().startswith("=="):
        return Token("option", word, start, end)
    if re.search(r"=\s*$", line[:start]) and not re.search(r"[=!<>]=\s*$", line[:start]):
        option = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*$", line[:start])
        return Token("word", word, start, end, option.group(1) if option else None)
    if line[:start].strip() == "" and word in KEYWORDS:
        return Token("keyword", word, start, end)
    return Token("word", word, start, end)


KEYWORDS = {
    "import": "`import \"file.decomp\"`: the declarations of another file, by path from this file's folder.",
    "model": "`model NAME = \"scheme:spec\" (options)`: a model handlers name with `model=\"NAME\"`.",
    "handler": "`handler NAME = kind(options)`: a handler steps call as `[NAME]`.",
    "program": "`program NAME(params) with options { QS: ... }`: a fixed program, usable as a handler.",
    "main": "`main NAME`: the program or handler `decomp run` calls on each row.",
    "metric": ("`metric NAME`: how `decomp run --input` scores rows with gold answers (em, exact, set_em, f1, a plugin's, "
               "or `module:function`)."),
    "if": "`if CONDITION { ... } else { ... }`: run the steps of one branch; its answers are not "
          "visible after the `if`.",
}
