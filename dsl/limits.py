"""How long and how deep a source text may be, and how its lines end.

Every entry point of the parser checks these first, so that no input, however hostile, takes
more than seconds to read or makes any later walk (checker, `check --json`, interpreter,
traces) run out of stack:

- `MAX_SOURCE_CHARS`: a module, few-shot file, plan or step line holds at most this many
  characters (a file at most this many bytes; a larger one is refused before it is read).
- `MAX_NESTING`: `if` blocks, option lists, condition operators (`not`, `and`, `or`,
  comparisons) and plan groups inside each other, all kinds counted together along one path
  (an `if`'s condition sits on its `if`'s level); the construct one level deeper is the
  error, at its first line. A JSON answer (`A:` lines, model replies) nested deeper stays text.
- `\\r\\n` and a lone `\\r` end a line as `\\n` does, wherever lines or positions are counted.
"""
from __future__ import annotations

import re

from lark import Tree

from decomp.dsl import nodes
from decomp.dsl.errors import DecompSyntaxError

#: Characters in one source text (bytes in one file). Lark reads about 0.3 MB a second on a
#: busy 2-core machine, so a text at the limit parses in a few seconds (10 MB took minutes);
#: the bundled files are all under 20 KB.
MAX_SOURCE_CHARS = 1_000_000
#: Levels of `if` blocks, lists, condition operators and plan groups inside each other.
MAX_NESTING = 100

#: Lark rules that nest, and how a message names each.
NESTING_RULES = {
    "if_stmt": "`if` block", "list": "list", "not_cond": "`not` condition", "or_cond": "`or` condition",
    "and_cond": "`and` condition", "comparison": "comparison", "plan_and": "AND group", "plan_or": "OR group",
}

_LINE_END = re.compile(r"\r\n?")


def normalize_newlines(text: str) -> str:
    """`text` with every `\\r\\n` and lone `\\r` written as `\\n`."""
    return _LINE_END.sub("\n", text) if "\r" in text else text


def source_lines(text: str) -> list[str]:
    """The lines of `text` (without their ends), counted as the parser counts them."""
    return normalize_newlines(text).split("\n")


def too_long(length: int, path: str, unit: str = "characters") -> DecompSyntaxError | None:
    """The error for a source of `length` characters (or bytes), or None when it is short enough."""
    if length <= MAX_SOURCE_CHARS:
        return None
    what = "file" if unit == "bytes" else "text"
    return DecompSyntaxError(f"the {what} is too long to read: more than {MAX_SOURCE_CHARS:,} {unit}",
                             nodes.Span(path, 1, 1, 1, 2), line_text="",
                             expected=f"at most {MAX_SOURCE_CHARS:,} {unit} (split it into files that import each other)")


def too_deep(tree: Tree, path: str, lines: list[str]) -> DecompSyntaxError | None:
    """The error at the first construct nested more than `MAX_NESTING` deep, or None.

    One pass over Lark's tree with an explicit stack, in text order (Lark parses without
    recursion; this runs before anything that recurses over the tree)."""
    stack = [(tree, 0, True)]
    while stack:
        node, level, counts = stack.pop()
        if counts and node.data in NESTING_RULES:
            level += 1
            if level > MAX_NESTING:
                return _nesting_error(node, path, lines)
        # an `if`'s condition is on its level: only what nests inside the condition adds one
        counts = node.data != "if_stmt"
        stack.extend((child, level, counts) for child in reversed(node.children) if isinstance(child, Tree))
    return None


def _nesting_error(node: Tree, path: str, lines: list[str]) -> DecompSyntaxError:
    meta = node.meta
    line, column = (meta.line, meta.column) if not getattr(meta, "empty", True) else (1, 1)
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    end = len(text) + 1 if meta.empty or meta.end_line != line else meta.end_column
    return DecompSyntaxError(
        f"{NESTING_RULES[node.data]} nested too deeply: more than {MAX_NESTING} levels of `if` blocks, "
        "lists and conditions inside each other", nodes.Span(path, line, column, line, max(column + 1, end)),
        expected=f"at most {MAX_NESTING} levels (move the inner part into a program of its own)", line_text=text)


def json_too_deep(text: str) -> bool:
    """Whether JSON `text` nests more than `MAX_NESTING` arrays and objects (one linear scan;
    brackets inside its strings do not count)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    depth = 0
    for match in _JSON_BRACKETS.finditer(text):
        bracket = match.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return True
        elif bracket in "]}":
            depth -= 1
    return False


_JSON_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)
