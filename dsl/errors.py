"""One error hierarchy for the language and its runtime; every error can carry a span.

`DecompError.format()` prints ``file:line:col: message``, the source line, a caret under the
offending text and, when known, what was expected.

Every error a user can see derives from `DecompError`: the command line prints it as a worded
message and takes anything else for a bug (its traceback, then a line asking for a report).
Errors that Python callers have long caught as a builtin keep it as a mixin (`InputError`,
`decomp.runtime.scoring.compare.CompareError`, ... are `ValueError`s too);
tests/dsl/test_error_root.py lists every exception class of the package and which side it is on.
"""
from __future__ import annotations

from decomp.dsl.nodes import Span


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
        text = self.line_text if self.line_text is not None else read_line(self.span)
        if text is not None and self.span is not None:
            lines.append("    " + text.rstrip("\n"))
            lines.append("    " + _caret_pad(text, self.span.column) + "^" * _caret_width(self.span, text))
        if self.expected:
            lines.append(f"    expected {self.expected}")
        return "\n".join(lines)


class InputError(DecompError, ValueError):
    """Something a user gave that cannot be used: an option's value, a metric's name, a line of a
    dataset or a prices file. A `ValueError` too, for callers that catch it as one."""


class DecompSyntaxError(DecompError):
    """The text does not follow the grammar."""

    kind = "syntax error"


class UnclosedError(DecompSyntaxError):
    """A syntax error caused by a bracket left open: positioned where the parser stopped (the end
    of the file, a closing bracket of the wrong kind, the next declaration), with a note at the
    bracket itself, printed as its own ``file:line:col: note: unclosed `{` opened here``."""

    def __init__(self, message: str, span: Span | None = None, *, opened: Span, opener: str,
                 opened_line: str | None = None, expected: str | None = None, line_text: str | None = None):
        super().__init__(message, span, expected=expected, line_text=line_text)
        self.opened, self.opener = opened, opener
        self.note = DecompError(f"note: unclosed `{opener}` opened here", opened, line_text=opened_line)

    def format(self) -> str:
        return super().format() + "\n" + self.note.format()


class CheckError(DecompError):
    """A static problem found by the checker before any handler runs."""

    kind = "check error"


class CheckWarning(DecompError):
    """Accepted, but probably not what was meant (a `# comment` after a QS line, which is part
    of the query). Printed as ``file:line:col: warning: ...``; never stops a check or a run."""

    kind = "warning"

    def __str__(self) -> str:
        where = f"{self.span}: " if self.span else ""
        return f"{where}warning: {self.message}"


class RunError(DecompError):
    """Something that went wrong while a program ran: a `Failure` or an `Abort`.

    The engine names the handler it happened in (`locate`), once, at the innermost call, so every
    message starts the same way: ``[name] kind, file:line:col: message``.
    """

    kind = "runtime error"

    def __init__(self, message: str, span: Span | None = None, *, expected: str | None = None,
                 line_text: str | None = None, handler: str | None = None, handler_kind: str | None = None,
                 details: str | None = None):
        super().__init__(message, span, expected=expected, line_text=line_text)
        self.handler = handler
        self.handler_kind = handler_kind
        #: More than the message, for the trace: e.g. the traceback of a Python handler's own code.
        self.details = details

    def locate(self, handler: str, handler_kind: str, span: Span | None) -> "RunError":
        """Name the handler call this happened in, unless an inner call already did."""
        if self.handler is None:
            self.handler, self.handler_kind = handler, handler_kind
            if self.span is None:
                self.span = span
        return self

    def __str__(self) -> str:
        head = f"[{self.handler}] {self.handler_kind}" if self.handler else ""
        where = ", ".join(part for part in (head, str(self.span) if self.span else "") if part)
        return f"{where}: {self.message}" if where else self.message


class Failure(RunError):
    """A handler could not answer this sub-query: a model's last retry failed, a regex found
    nothing, a Python function raised, a step named an answer that does not exist.

    A failure ends the row, with the handler named (the scheduler retries the transient kinds
    first). A failure a program is meant to handle is an answer instead: `decomp.dsl.values.Failed`,
    a step whose outcome is failed, which `ok(#n)` reads."""

    kind = "failure"


class HandlerError(Failure):
    """A handler's own failure on its input (no match, bad arithmetic, a function that raised)."""

    kind = "handler error"


class ServiceError(Failure):
    """An outbound service (a model endpoint, a search engine, an HTTP tool) could not answer."""

    kind = "service error"


class TransientServiceError(ServiceError):
    """A service failure worth retrying (429, 5xx, timeouts, garbled replies); `retry_after` is
    the server's hint in seconds, if it gave one. The scheduler retries these; only the last one
    reaches a program, as the service's final error."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ModelError(ServiceError):
    """A model could not answer (unknown spec, unreachable endpoint, no scripted answer, ...)."""

    kind = "model error"


class TransientModelError(ModelError, TransientServiceError):
    """A model failure worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None):
        TransientServiceError.__init__(self, message, retry_after)


class Abort(RunError):
    """Ends the row; no language construct can catch it: a spent budget, a replay-cache miss,
    a depth bound exceeded, a bug in the interpreter. (Cancellation is asyncio's
    `CancelledError`, which is no `Exception` at all, so nothing catches it either.)"""

    kind = "abort"


class BudgetExceeded(Abort):
    """A row (or the run) used up one of its budgets."""


class CacheMiss(Abort):
    """Replay mode found no stored result for a call."""


class DepthExceeded(Abort):
    """A recursive program or decomposer went deeper than its declared bound."""


class InternalError(Abort):
    """A bug: a handler or the interpreter raised something that is not a `DecompError`."""

    @classmethod
    def of(cls, err: BaseException) -> "InternalError":
        """The bug `err` as an abort: "internal error: TypeError: ..." (raise it `from err`)."""
        return cls(f"internal error: {type(err).__name__}: {err}")


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


def read_line(span: Span | None) -> str | None:
    if span is None or span.line < 1:
        return None
    try:  # universal newlines: `\r` and `\r\n` end lines here as in the parser
        with open(span.file, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                if number == span.line:
                    return line
    except (OSError, ValueError):  # unreadable, or a name no file can have (a NUL in it)
        return None
    return None
