"""One error hierarchy for the language and its runtime; every error can carry a span.

`DecompError.format()` prints ``file:line:col: message``, the source line, a caret under the
offending text and, when known, what was expected.
"""
from __future__ import annotations

from .ast import Span


class DecompError(Exception):
    """Base of every error the language or the runtime reports to a user."""

    kind = "error"

    def __init__(self, message: str, span: Span | None = None, *, expected: str | None = None,
                 line_text: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.expected = expected
        self.line_text = line_text

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}{self.message}"

    def format(self) -> str:
        """The full diagnostic: location, message, the line, a caret, what was expected."""
        lines = [str(self)]
        text = self.line_text if self.line_text is not None else _read_line(self.span)
        if text is not None and self.span is not None:
            lines.append("    " + text.rstrip("\n"))
            lines.append("    " + _caret_pad(text, self.span.column) + "^" * _caret_width(self.span, text))
        if self.expected:
            lines.append(f"    expected {self.expected}")
        return "\n".join(lines)


class DecompSyntaxError(DecompError):
    """The text does not follow the grammar."""

    kind = "syntax error"


class CheckError(DecompError):
    """A static problem found by the checker before any handler runs."""

    kind = "check error"


class DecompRuntimeError(DecompError):
    """A failure while running a program (bad reference, depth exceeded, ...)."""

    kind = "runtime error"


class HandlerError(DecompRuntimeError):
    """A handler failed on its input (bad option at run time, regex timeout, ...)."""

    kind = "handler error"


class DepthExceeded(DecompRuntimeError):
    """A recursive program or decomposer went deeper than its declared bound."""


class Diagnostics(DecompError):
    """Several errors at once (a file with more than one problem)."""

    def __init__(self, errors: list[DecompError]):
        self.errors = sorted(errors, key=_position)
        super().__init__(f"{len(self.errors)} problem(s) found", self.errors[0].span if self.errors else None)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)

    def format(self) -> str:
        return "\n".join(e.format() for e in self.errors)


def _position(err: DecompError) -> tuple:
    s = err.span
    return (s.file, s.line, s.column) if s else ("", 0, 0)


def _caret_width(span: Span, text: str, most: int = 60) -> int:
    """Underline the span on its first line, at most `most` characters."""
    end = span.end_column if span.end_line == span.line else len(text.rstrip("\n")) + 1
    return max(1, min(end - span.column, len(text.rstrip("\n")) - span.column + 1, most))


def _caret_pad(text: str, column: int) -> str:
    """Spaces (tabs kept) up to `column`, so the caret lines up under tabs too."""
    return "".join(ch if ch == "\t" else " " for ch in text[: max(0, column - 1)])


def _read_line(span: Span | None) -> str | None:
    if span is None or span.line < 1:
        return None
    try:
        with open(span.file, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if number == span.line:
                    return line
    except OSError:
        return None
    return None
