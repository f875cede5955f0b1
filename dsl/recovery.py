"""Error recovery: after Lark fails, the best positioned, worded error for what broke the parse.

Lark's exception is put in the language's own words (`syntax_error`). In a module, a string left
open is reported where it starts, and a bracket left open gets a note where it was opened
(`UnclosedError`), found by a small lexer of its own (`_unclosed`) that skips strings, comments
and `QS:` lines. A file with several broken declarations reports each of them: after a failure
the text is re-parsed one top-level chunk at a time, each chunk alone (`all_errors`), and each
error moved down to its lines (`shifted`). `open_operator` finds a `QS:` line's `(operator`
left open. The patterns are `dsl.lexicon`'s.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from decomp.dsl import lexicon, nodes
from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics, UnclosedError
from decomp.dsl.grammar import describe_expected, describe_terminal, parser
from decomp.dsl.text import shorten


def shifted(error: DecompError, offset: int) -> DecompError:
    """`error` (just made, for a text read on its own) moved down `offset` lines in its file."""
    if not offset:
        return error
    parts = error.errors if isinstance(error, Diagnostics) else [error]
    for err in parts:
        err.span = _down(err.span, offset)
        if isinstance(err, UnclosedError):
            err.opened = err.note.span = _down(err.opened, offset)
    if isinstance(error, Diagnostics):
        error.span = parts[0].span if parts else None
    return error


def _down(span: nodes.Span | None, offset: int) -> nodes.Span | None:
    if span is None:
        return None
    return nodes.Span(span.file, span.line + offset, span.column, span.end_line + offset, span.end_column)


def all_errors(lines: list[str], path: str, start: str, chunker, first: DecompError) -> DecompError:
    """The first error, plus those found by parsing each later chunk on its own (alone, then
    moved down to its lines: each line is read once more at most, whatever the chunk count).

    Chunks up to the one holding the first error are not re-parsed: an unclosed bracket is
    often reported at the start of the next declaration, and would otherwise count twice."""
    if chunker is None:
        return first
    errors = [first]
    for offset, chunk in chunker(lines):
        if offset + 1 <= first.span.line:
            continue
        try:
            parser().parse(chunk, start=start)
        except UnexpectedInput as exc:
            error = syntax_error(exc, path, chunk.split("\n"), chunk if start == "module" else None)
            errors.append(shifted(error, offset))
    return errors[0] if len(errors) == 1 else Diagnostics(errors)


def module_chunks(lines: list[str]):
    """Top-level declarations: chunks start at lines that begin with a keyword."""
    return _chunks(lines, [i for i, line in enumerate(lines) if lexicon.DECLARATION_START.match(line)])


def blank_chunks(lines: list[str]):
    """Examples: chunks start at a non-blank line after a blank one."""
    starts = [i for i, line in enumerate(lines) if line.strip() and (i == 0 or not lines[i - 1].strip())]
    return _chunks(lines, starts)


def _chunks(lines: list[str], bounds: list[int]):
    """(line offset, text) pieces of the text, one starting at each of `bounds`."""
    if not bounds or bounds[0] != 0:
        bounds.insert(0, 0)
    bounds.append(len(lines))
    for begin, end in zip(bounds, bounds[1:]):
        chunk = "\n".join(lines[begin:end]).rstrip("\n") + "\n"
        if chunk.strip():
            yield begin, chunk


def syntax_error(exc: UnexpectedInput, path: str, lines: list[str], source: str | None = None) -> DecompSyntaxError:
    """Lark's exception in plain words. With `source` (a module's text, as parsed), a string
    left open is reported where it starts, and a bracket left open gets a note where it was
    opened when it is what broke the parse: at the end of the file, at a closing bracket of
    another kind, or at the next declaration (a keyword at the start of a line)."""
    line, column = max(exc.line, 1), max(exc.column, 1)
    line_text = lines[line - 1] if 0 < line <= len(lines) else ""
    width = 1
    token = exc.token if isinstance(exc, UnexpectedToken) and exc.token.type != "$END" else None
    if token is not None:
        message = f"unexpected {_token_words(exc.token)}"
        expected = describe_expected(exc.accepts or exc.expected)
        width = max(1, len(str(exc.token).split("\n")[0]))
    elif isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character {line_text[column - 1:column]!r}"
        expected = describe_expected(exc.allowed or ())
    else:
        message = "unexpected end of the file"
        expected = describe_expected(getattr(exc, "expected", ()) or ())
    span = nodes.Span(path, line, column, line, column + width)
    if source is not None:
        found = _open_string(token, source, path, lines, expected) if token is not None else None
        found = found or _open_bracket(exc, token, source, path, lines, span, message, expected or None, line_text)
        if found is not None:
            return found
    return DecompSyntaxError(message, span, expected=expected or None, line_text=line_text)


def _open_string(token: Token, source: str, path: str, lines: list[str], expected: str) -> DecompSyntaxError | None:
    """A token that starts with a quote and does not close on its line: the string left open,
    reported at its opening quote (a `\"\"\"` left open reads as `""` and then the rest)."""
    text = str(token)
    quote = text[:1]
    if quote not in ('"', "'") or token.type in ("STRING", "LONG_STRING") or lexicon.STRING.match(text):
        return None
    start, line, column = token.start_pos, token.line, token.column
    if source[max(0, start - 2):start] == quote * 2:
        opener, column = quote * 3, column - 2
        message, wanted = f"unclosed string: no closing {opener} before the end of the file", f"a closing {opener}"
    else:
        opener = quote
        message = f"unclosed string: no closing {quote} on this line"
        wanted = (f"the closing {quote} of a string on the same line "
                  f"(a string over several lines is written {quote * 3}...{quote * 3})")
    span = nodes.Span(path, line, column, line, column + len(opener))
    return DecompSyntaxError(message, span, expected=wanted, line_text=lines[line - 1] if line <= len(lines) else "")


def _open_bracket(exc, token, source, path, lines, span, message, expected, line_text) -> UnclosedError | None:
    """The error with a note at the bracket left open, when that bracket is what broke the parse."""
    if token is None and not isinstance(exc, UnexpectedCharacters):
        end = len(source)                       # the end of the file
    elif token is not None and (str(token) in _CLOSERS or exc.column == 1 and lexicon.DECLARATION_START.match(line_text)):
        end = token.start_pos                   # a closing bracket, or the next declaration
    else:
        return None
    closer = str(token) if token is not None and str(token) in _CLOSERS else None
    found = _unclosed(source, end, closer)
    if found is None:
        return None
    bracket, offset = found
    line = source.count("\n", 0, offset) + 1
    column = offset - (source.rfind("\n", 0, offset) + 1) + 1
    if line >= span.line and not (token is not None and str(token) in _CLOSERS):
        return None                             # on the line of the caret already
    opened = nodes.Span(path, line, column, line, column + len(bracket))
    return UnclosedError(message, span, opened=opened, opener=bracket, expected=expected, line_text=line_text,
                         opened_line=lines[line - 1] if line <= len(lines) else "")


_CLOSERS = {")": "(", "]": "[", "}": "{"}
_INDENT = re.compile(r"[ \t]*")
_CONDITION_LINE = re.compile(r"[ \t]*(?:\}[ \t]*else[ \t]+)?if\b")


@lru_cache(maxsize=1)
def open_operator() -> re.Pattern:
    """`(name` with no `)` before a `[` or the end of the line: an operator left open."""
    return re.compile(rf"\({lexicon.terminal('NAME')}{lexicon.terminal('WS')}?(?:\[|$)")


def _unclosed(source: str, end: int, closer: str | None = None) -> tuple[str, int] | None:
    """The bracket a module's text leaves open at offset `end`, as (bracket, offset), or None.
    With `closer` (the closing bracket found at `end`), only a bracket that it skips over: one
    opened inside an open bracket of its own kind (`[` in `stop=["a")`), not a stray closer.

    Strings, comments, `#` references of conditions and `QS:` lines (whose text runs to the end
    of the line) are skipped. The innermost open bracket is the one named, except that a block
    closed by a `}` less indented than its `{` line, when an outer `{` line has exactly that
    indentation, is taken to be the block left open (the `}` belongs to the outer one)."""
    stack: list[tuple[str, int]] = []
    indents: list[int] = []                     # the indentation of each open bracket's line
    braces: Counter[int] = Counter()            # how many open `{` lines have each indentation
    suspect = None
    bol, leading = 0, True                      # where the line starts; only blanks on it so far
    i, n = 0, min(end, len(source))
    while i < n:
        c = source[i]
        if c == "\n":
            bol, leading = i + 1, True
            i += 1
            continue
        if c in " \t\r":
            i += 1
            continue
        first, leading = leading, False
        if c == "Q" and first and lexicon.QS_LINE.match(source, i) or c == "#" and not (
                lexicon.REF.match(source, i) and _CONDITION_LINE.match(source, bol)):
            eol = source.find("\n", i)         # a QS line's text, or a comment: to the end of the line
            i = len(source) if eol < 0 else eol
        elif c == "#":
            i = lexicon.REF.match(source, i).end()  # a reference in a condition
        elif c in "\"'":
            if source.startswith(c * 3, i):
                close = source.find(c * 3, i + 3)
                if close < 0:
                    return c * 3, i
                bol = source.rfind("\n", 0, close) + 1 if source.find("\n", i, close) >= 0 else bol
                i = close + 3
                continue
            string = lexicon.STRING.match(source, i)
            if string is None:
                return c, i
            i = string.end()
        elif c in "([{":
            stack.append((c, i))
            indents.append(len(_INDENT.match(source, bol).group()))
            braces[indents[-1]] += c == "{"
            i += 1
        elif c in _CLOSERS:
            if stack and stack[-1][0] == _CLOSERS[c]:
                opener, indent = stack.pop(), indents.pop()
                braces[indent] -= c == "}"
                # a `}` less indented than its `{` line, lined up with an outer `{` line instead
                if c == "}" and first and suspect is None and i - bol < indent and braces[i - bol] > 0:
                    suspect = opener
            i += 1
        else:
            i += 1
    if closer is not None:
        inner = stack[-1] if stack else None
        if inner is None or inner[0] == _CLOSERS[closer] or all(b != _CLOSERS[closer] for b, _ in stack):
            return None
        return inner
    if suspect is not None and stack and stack[-1][0] == "{":
        return suspect
    return stack[-1] if stack else None


def _token_words(token: Token) -> str:
    if token.type in ("_EOL", "_BLANKS"):
        return "end of the line"
    text = repr(shorten(str(token), 40, ellipsis="...", one_line=False))
    if token.type == "REST":
        return text
    if token.type in _NOUNS:
        return f"{_NOUNS[token.type]} {text}"
    return describe_terminal(token.type)


_NOUNS = {"NAME": "name", "NUMBER": "number", "STRING": "string", "LONG_STRING": "string", "REF": "reference",
          "HANDLER_REF": "handler reference", "OPERATOR": "operator"}
