"""The `regex` handler kind: pull an answer out of the sub-query with a regular expression.

    handler words  = regex(pattern=r"\\S+", all=true)
    handler year   = regex(pattern=r"(\\d{4})", default=null)
    handler items  = regex(pattern=r"\\[.*?\\]", json=true)

Matching uses the third-party `regex` package (re-compatible syntax) with its `timeout=`
argument, so a catastrophic pattern fails the call instead of hanging the run; the matching
runs off the event loop (`Handler.offload`), so even a long timeout holds up its own row only.
"""
from __future__ import annotations

import json as jsonlib
from typing import Any

import regex as rx
from pydantic import Field

from decomp.dsl.nodes import Span
from decomp.dsl.errors import CheckError, HandlerError, read_line
from decomp.dsl.answer_types import ANY, ListOf, Str, Type
from decomp.dsl.text import shorten
from decomp.handlers.base import Call, Handler
from decomp.handlers.base import Options as BaseOptions

_NO_MATCH = object()
_FLAGS = {"i": rx.IGNORECASE, "m": rx.MULTILINE, "s": rx.DOTALL, "x": rx.VERBOSE}


class RegexHandler(Handler):
    """Searches the sub-query for `pattern` and answers with one group of the match.

    Options:
      pattern  the regular expression (required).
      group    which group answers: a number or a group name. When not given it is 1 if the
               pattern has at least one capturing group, else 0 (the whole match).
      all      false: the first match only (`search`); true: a list with the group of every
               non-overlapping match, in order (`finditer`) - one value per match, never the
               tuples `re.findall` gives for patterns with several groups.
      flags    letters among i (ignore case), m (multiline), s (dot matches newline), x (verbose).
      timeout  seconds one call may take (the whole scan when `all`); must be > 0. Not
               written: 1 s, or the run's `--handler-timeout` when that is shorter.
      max_matches  with `all`: the most matches one call may answer (default 1000); more is
               a `HandlerError` (never a silently cut list).
      default  the answer when nothing matches (with `all`: when no match at all). Only a
               default that is written counts, so `default=null` answers null; without one,
               no match is a `HandlerError`.
      json     parse each matched text as JSON when it is valid JSON, else keep the text.
    A group that did not take part in the match answers null.
    """

    kind = "regex"

    class Options(BaseOptions):
        pattern: str
        group: int | str | None = None
        all: bool = False
        flags: str = ""
        timeout: float | None = None
        max_matches: int = 1000
        default: Any = None
        #: written `json=` in .decomp files (`json` would shadow a pydantic BaseModel method)
        parse_json: bool = Field(default=False, alias="json")

    #: A search that takes a second is a runaway pattern: stop it sooner than the run's limit.
    default_timeout = 1.0

    def __init__(self, name, options, decl, ctx):
        super().__init__(name, options, decl, ctx)
        self._compiled: rx.Pattern | None = None

    # ---- static checks
    def check(self) -> list[CheckError]:
        errors = []
        bad = sorted(set(self.options.flags) - set(_FLAGS))
        if bad:
            errors.append(CheckError(f"unknown regex flag(s) {''.join(bad)!r}; use letters among "
                                     f"i, m, s, x", self.error_span("flags")))
        errors += self.timeout_problems()
        if self.options.max_matches < 1:
            errors.append(CheckError(f"max_matches must be at least 1, got {self.options.max_matches}",
                                     self.error_span("max_matches")))
        if bad:
            return errors
        try:
            pattern = self._pattern()
        except rx.error as err:
            return errors + [self._compile_error(err)]
        group_error = self._group_problem(pattern)
        if group_error:
            errors.append(CheckError(group_error, self.error_span("group")))
        return errors

    def _compile_error(self, err: rx.error) -> CheckError:
        pos = getattr(err, "pos", None)
        where = f" at position {pos}" if pos is not None else ""
        return CheckError(f"invalid pattern {self.options.pattern!r}: {err.msg}{where}",
                          self._pattern_span(pos))

    def _pattern_span(self, pos: int | None) -> Span | None:
        """The option's span, narrowed to the offending character when the source shows it verbatim."""
        span = self.error_span("pattern")
        if span is None or pos is None or span.line != span.end_line:
            return span
        line = read_line(span) or ""
        start = line.find(self.options.pattern, span.column - 1, span.end_column - 1)
        if start < 0:
            return span
        return span.at(start - (span.column - 1) + pos, 1)

    def _group_problem(self, pattern: rx.Pattern) -> str | None:
        group = self.options.group
        if isinstance(group, str) and group not in pattern.groupindex:
            names = ", ".join(pattern.groupindex) or "none"
            return f"pattern has no group named {group!r} (named groups: {names})"
        if isinstance(group, int) and not 0 <= group <= pattern.groups:
            return f"group {group} out of range: pattern has {pattern.groups} group(s)"
        return None

    def inferred_type(self) -> Type:
        """A match's text (`str`), or with all=true the list of them; `any` when json=true or a
        `default=` answers for no match."""
        if self.options.parse_json or self.options.default is not None:
            return ANY
        return ListOf(Str()) if self.options.all else Str()

    # ---- running
    def _pattern(self) -> rx.Pattern:
        if self._compiled is None:
            flags = 0
            for letter in self.options.flags:
                flags |= _FLAGS[letter]
            self._compiled = rx.compile(self.options.pattern, flags)
        return self._compiled

    def _group(self, pattern: rx.Pattern) -> int | str:
        if self.options.group is not None:
            return self.options.group
        return 1 if pattern.groups else 0

    async def run(self, call: Call) -> Any:
        pattern = self._compiled_or_fail(call)
        limit = self.time_limit(call)
        # the regex package stops the search itself at `limit` (its thread is then free); the
        # offload's own limit, a little later, is only the backstop
        found = await self.offload(call, self._search, pattern, call.query, limit, call.span, what="the match", grace=1.0)
        if found is _NO_MATCH or (self.options.all and not found):
            return self._no_match(call)
        return found

    def _search(self, pattern: rx.Pattern, text: str, limit: float, span) -> Any:
        """The answer found in `text` (run in a worker thread), or `_NO_MATCH`."""
        group = self._group(pattern)
        try:
            if not self.options.all:
                match = pattern.search(text, timeout=limit)
                return _NO_MATCH if match is None else self._value(match, group)
            found = []
            for match in pattern.finditer(text, timeout=limit):
                if len(found) == self.options.max_matches:
                    raise HandlerError(f"more than max_matches ({self.options.max_matches}) matches: raise "
                                       "max_matches=N to take them all, or match less", span)
                found.append(self._value(match, group))
            return found
        except TimeoutError as err:
            raise HandlerError(f"timed out after {limit:g} s (raise it with the handler's timeout=SECONDS option "
                               "or the run's --handler-timeout SECONDS)", span) from err

    def _compiled_or_fail(self, call: Call) -> rx.Pattern:
        try:
            pattern = self._pattern()
        except (rx.error, KeyError) as err:
            raise HandlerError(f"invalid pattern or flags: {err}",
                               call.span) from err
        problem = self._group_problem(pattern)
        if problem:
            raise HandlerError(problem, call.span)
        return pattern

    def _value(self, match: rx.Match, group: int | str) -> Any:
        text = match.group(group)
        if text is None or not self.options.parse_json:
            return text
        try:
            return jsonlib.loads(text)
        except ValueError:
            return text

    def _no_match(self, call: Call) -> Any:
        if "default" in self.options.model_fields_set:
            return self.options.default
        raise HandlerError(f"pattern {self.options.pattern!r} did not match "
                           f"{shorten(call.query, 80, ellipsis='...', one_line=False)!r}", call.span)
