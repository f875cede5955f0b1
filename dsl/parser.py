"""Text -> typed AST. `parse_module`, `parse_fewshot`, `parse_step_line`, `parse_plan`.

Syntax errors come back as `DecompSyntaxError` (or `Diagnostics` for several), positioned,
in the language's own words. A file with several broken declarations reports each of them:
after a failure the text is re-parsed one top-level chunk at a time.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from decomp.dsl import nodes
from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.grammar import describe_expected, describe_terminal, parser
from decomp.dsl.text import shorten

REF_RE = re.compile(r"#(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*))")
_MODULE_CHUNK = re.compile(r"^(import|model|handler|program|main)\b")


def parse_module(text: str, path: str = "<string>") -> nodes.Module:
    """Parse a .decomp module."""
    return _parse(text, path, "module", _module_chunks)


def parse_fewshot(text: str, path: str = "<string>") -> nodes.FewShot:
    """Parse a DecomP few-shot file (QC/QS/A programs, Q/A pairs, context paragraphs)."""
    return _parse(text, path, "fewshot", _blank_chunks)


def parse_plan(text: str, path: str = "<plan>") -> nodes.Plan:
    """Parse ADaPT planner output into steps and an AND/OR execution order."""
    return _parse(text, path, "plan", None)


@lru_cache(maxsize=4096)
def parse_step_line(text: str, path: str = "<model output>") -> nodes.Step:
    """Parse one `QS: (op) [handler] text` line (the `QS:` marker may be omitted).

    Memoised: decomposers emit the same lines again and again, and the AST is immutable. A
    line without line breaks is read by `_step_line()`, a regular expression made of the
    grammar's own terminals: the same `Step` as Lark's (a property test compares them on
    random lines) at a fifth of the cost. Anything else goes through Lark."""
    line = text.strip("\n")
    if not line.strip():
        line = "QS:"
    if "\n" not in line and "\r" not in line:
        step = _fast_step(_step_line().fullmatch(line), path)
        if step is not None:
            return step
    return _parse(line, path, "step_line", None)


@lru_cache(maxsize=1)
def _step_line() -> re.Pattern:
    """One step line, from grammar.lark's terminals: `step` / `bare_step`, blanks ignored.

    Lark's contextual lexer tries the terminals a state allows by priority, and REST takes
    the rest of the line, so the greedy optional groups below split a line as Lark does."""
    def term(name: str) -> str:
        return f"(?:{parser().get_terminal(name).pattern.to_regexp()})"
    ws = term("WS") + "?"
    return re.compile(f"{ws}(?P<mark>{term('QS_MARK')})?{ws}(?P<op>{term('OPERATOR')})?{ws}"
                      f"(?P<handler>{term('HANDLER_REF')})?{ws}(?P<rest>{term('REST')})?{ws}")


def _fast_step(match: re.Match | None, path: str) -> nodes.Step | None:
    """The `Step` of a `_step_line()` match (None when there is none, or it holds no token)."""
    groups = [g for g in ("mark", "op", "handler", "rest") if match and match.start(g) >= 0]
    if not groups:
        return None
    first, last = match.start(groups[0]), match.end(groups[-1])

    def span(start: int, end: int) -> nodes.Span:
        return nodes.Span(path, 1, start + 1, 1, end + 1)

    def part(name: str):
        return (match.group(name), span(match.start(name), match.end(name))) if match.start(name) >= 0 else None

    return _step_node(span(first, last), part("op"), part("handler"), part("rest"))


def read_text(path: str | Path) -> str:
    """A source file's text; a file that is not UTF-8 is a `DecompSyntaxError`, not a crash."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DecompSyntaxError(f"the file is not UTF-8 text (byte {data[err.start]:#04x})",
                                nodes.Span(str(path), line, column, line, column + 1), line_text="") from None


def read_module(path: str | Path) -> nodes.Module:
    return parse_module(read_text(path), str(path))


def read_fewshot(path: str | Path) -> nodes.FewShot:
    return parse_fewshot(read_text(path), str(path))


# ------------------------------------------------------------------ driver
def _parse(text: str, path: str, start: str, chunker):
    source = text.replace("\r\n", "\n")
    source = source if source.endswith("\n") else source + "\n"
    lines = source.split("\n")
    try:
        tree = parser().parse(source, start=start)
    except UnexpectedInput as exc:
        first = _syntax_error(exc, path, lines)
        raise _all_errors(source, path, start, chunker, first) from None
    except RecursionError:
        raise DecompSyntaxError("the text is nested too deeply to read", nodes.Span(path, 1, 1, 1, 2)) from None
    try:
        return _Builder(path, source).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, DecompError):
            raise exc.orig_exc from None
        span = _visit_span(exc, path)
        raise DecompSyntaxError(f"cannot read this: {exc.orig_exc}", span,
                                line_text=lines[span.line - 1] if span.line <= len(lines) else None) from None
    except RecursionError:
        raise DecompSyntaxError("the text is nested too deeply to read", nodes.Span(path, 1, 1, 1, 2)) from None


def _visit_span(exc: VisitError, path: str) -> nodes.Span:
    meta = getattr(exc.obj, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return nodes.Span(path, meta.line, meta.column, meta.end_line, meta.end_column)
    return nodes.Span(path, 1, 1, 1, 2)


def _all_errors(source, path, start, chunker, first) -> DecompError:
    """The first error, plus those found by parsing each later chunk on its own.

    Chunks up to the one holding the first error are not re-parsed: an unclosed bracket is
    often reported at the start of the next declaration, and would otherwise count twice."""
    if chunker is None:
        return first
    errors = [first]
    chunks = list(chunker(source))
    for offset, chunk in chunks:
        if offset + 1 <= first.span.line:
            continue
        try:
            parser().parse("\n" * offset + chunk, start=start)
        except UnexpectedInput as exc:
            errors.append(_syntax_error(exc, path, source.split("\n")))
    return errors[0] if len(errors) == 1 else Diagnostics(errors)


def _module_chunks(source: str):
    """Top-level declarations: chunks start at lines that begin with a keyword."""
    lines = source.split("\n")
    return _chunks(lines, [i for i, line in enumerate(lines) if _MODULE_CHUNK.match(line)])


def _blank_chunks(source: str):
    """Examples: chunks start at a non-blank line after a blank one."""
    lines = source.split("\n")
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


def _syntax_error(exc: UnexpectedInput, path: str, lines: list[str]) -> DecompSyntaxError:
    line, column = max(exc.line, 1), max(exc.column, 1)
    line_text = lines[line - 1] if 0 < line <= len(lines) else ""
    width = 1
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
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
    return DecompSyntaxError(message, span, expected=expected or None, line_text=line_text)


def _token_words(token: Token) -> str:
    if token.type in ("_EOL", "_BLANKS"):
        return "end of the line"
    text = repr(shorten(str(token), 40, ellipsis="...", one_line=False))
    if token.type == "REST":
        return text
    if token.type in _NOUNS:
        return f"{_NOUNS[token.type]} {text}"
    return describe_terminal(token.type)


_NOUNS = {"NAME": "name", "NUMBER": "number", "STRING": "string", "LONG_STRING": "string", "REF": "reference"}


# ------------------------------------------------------------------ tree -> AST
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0"}
_ESCAPE_RE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)


def decode_string(token: str) -> str:
    """The value of a string literal: quotes removed, escapes decoded unless raw (r"...")."""
    raw = token[:1] in "rR"
    body = token[1:] if raw else token
    quote = 3 if body[:3] in ('"""', "'''") else 1
    inner = body[quote:-quote]
    if raw:
        return inner
    return _ESCAPE_RE.sub(_unescape, inner)


def _unescape(match: re.Match) -> str:
    code = match.group(1)
    if code.startswith("u") and len(code) == 5:
        return chr(int(code[1:], 16))
    return _ESCAPES.get(code, "\\" + code)


def _no_constants(name: str):
    raise ValueError(f"{name} is not JSON")


_JSON = json.JSONDecoder(parse_constant=_no_constants)


def parse_answer_text(text: str) -> tuple[Any, bool]:
    """JSON value of an answer, or the stripped text itself when it is not JSON (NaN and
    Infinity are not JSON; nesting too deep to read stays text too)."""
    stripped = text.strip()
    try:
        return _JSON.decode(stripped), True
    except (ValueError, RecursionError):
        return stripped, False


def find_refs(text: str, span: nodes.Span) -> tuple[nodes.Ref, ...]:
    """The `#n` and `#name` references in a query text that starts at `span`."""
    refs = []
    for m in REF_RE.finditer(text):
        sub = span.at(m.start(), m.end() - m.start())
        if m.group(1) is not None:
            refs.append(nodes.Ref(sub, index=int(m.group(1))))
        else:
            refs.append(nodes.Ref(sub, name=m.group(2)))
    return tuple(refs)


class _Builder(Transformer):
    """Turns Lark's parse tree into the frozen dataclasses of `nodes`."""

    def __init__(self, path: str, source: str):
        super().__init__(visit_tokens=False)  # no terminal has a callback: skip a call per token
        self.path = path
        self.source = source

    def _span(self, item) -> nodes.Span:
        if isinstance(item, Token):
            return nodes.Span(self.path, item.line, item.column, item.end_line, item.end_column)
        if getattr(item, "empty", True):
            return nodes.Span(self.path, 1, 1, 1, 1)
        return nodes.Span(self.path, item.line, item.column, item.end_line, item.end_column)

    # ---------------- module
    @v_args(meta=True)
    def module(self, meta, items):
        groups: dict[type, list] = {}
        for item in items:
            groups.setdefault(type(item), []).append(item)
        mains = tuple(groups.get(nodes.Main, ()))
        return nodes.Module(
            self._span(meta), self.path,
            imports=tuple(groups.get(nodes.Import, ())),
            models=tuple(groups.get(nodes.ModelDecl, ())),
            handlers=tuple(groups.get(nodes.HandlerDecl, ())),
            programs=tuple(groups.get(nodes.Program, ())),
            main=mains[-1] if mains else None,
            mains=mains,
        )

    @v_args(meta=True)
    def import_stmt(self, meta, items):
        return nodes.Import(self._span(meta), decode_string(items[0]))

    @v_args(meta=True)
    def model_stmt(self, meta, items):
        name, spec, *rest = items
        return nodes.ModelDecl(self._span(meta), str(name), decode_string(spec), rest[0] if rest else ())

    @v_args(meta=True)
    def handler_stmt(self, meta, items):
        name, kind, *rest = items
        return nodes.HandlerDecl(self._span(meta), str(name), str(kind), rest[0] if rest else (),
                               name_span=self._span(name), kind_span=self._span(kind))

    @v_args(meta=True)
    def program_stmt(self, meta, items):
        name, params, *rest = items
        options = rest[0] if len(rest) == 2 else ()
        return nodes.Program(self._span(meta), str(name), params, rest[-1], options, name_span=self._span(name))

    def params(self, items):
        return tuple(nodes.Param(self._span(t), str(t)) for t in items)

    def program_options(self, items):
        return tuple(items)

    def options(self, items):
        return tuple(items)

    @v_args(meta=True)
    def main_stmt(self, meta, items):
        return nodes.Main(self._span(meta), str(items[0]))

    @v_args(meta=True)
    def option(self, meta, items):
        return nodes.Option(self._span(meta), str(items[0]), self._value(items[1]))

    def _value(self, item) -> nodes.Value:
        if isinstance(item, nodes.Value):
            return item
        span = self._span(item)
        if item.type in ("STRING", "LONG_STRING"):
            return nodes.Value(span, decode_string(str(item)), "string")
        return nodes.Value(span, _number(str(item)), "number")

    @v_args(meta=True)
    def true(self, meta, _):
        return nodes.Value(self._span(meta), True, "bool")

    @v_args(meta=True)
    def false(self, meta, _):
        return nodes.Value(self._span(meta), False, "bool")

    @v_args(meta=True)
    def null(self, meta, _):
        return nodes.Value(self._span(meta), None, "null")

    @v_args(meta=True)
    def ident(self, meta, items):
        return nodes.Value(self._span(meta), str(items[0]), "ident")

    @v_args(meta=True)
    def list(self, meta, items):
        return nodes.Value(self._span(meta), tuple(self._value(i) for i in items), "list")

    def block(self, items):
        return tuple(items)

    @v_args(meta=True)
    def if_stmt(self, meta, items):
        condition, then, *rest = items
        return nodes.If(self._span(meta), self._expr(condition), then, rest[0] if rest else ())

    # ---------------- conditions
    def _expr(self, item):
        if isinstance(item, nodes.Value):
            return nodes.Literal(item.span, item.value)
        return item

    @v_args(meta=True)
    def or_cond(self, meta, items):
        return nodes.BoolOp(self._span(meta), "or", tuple(self._expr(i) for i in items))

    @v_args(meta=True)
    def and_cond(self, meta, items):
        return nodes.BoolOp(self._span(meta), "and", tuple(self._expr(i) for i in items))

    @v_args(meta=True)
    def not_cond(self, meta, items):
        return nodes.Not(self._span(meta), self._expr(items[0]))

    @v_args(meta=True)
    def comparison(self, meta, items):
        left, op, right = items
        return nodes.Compare(self._span(meta), str(op), self._expr(left), self._expr(right))

    def ref_operand(self, items):
        return nodes.RefOperand(self._span(items[0]), self._ref(items[0]))

    def literal(self, items):
        return nodes.Literal(self._span(items[0]), self._value(items[0]).value)

    @v_args(meta=True)
    def len_operand(self, meta, items):
        return nodes.Len(self._span(meta), self._ref(items[0]))

    def _ref(self, token: Token) -> nodes.Ref:
        return find_refs(str(token), self._span(token))[0]

    # ---------------- DecomP lines
    @v_args(meta=True)
    def step(self, meta, items):
        parts = {t.type: (str(t), self._span(t)) for t in items}
        return _step_node(self._span(meta), parts.get("OPERATOR"), parts.get("HANDLER_REF"), parts.get("REST"))

    def step_line(self, items):
        return items[0]

    bare_step = step

    def qc_line(self, items):
        return self._tagged("QC", items)

    def q_line(self, items):
        return self._tagged("Q", items)

    def text_line(self, items):
        return ("text", str(items[0]).rstrip(), self._span(items[0]))

    def meta_line(self, items):
        mark, *rest = items
        text = str(rest[0]) if rest else ""
        value, ok = parse_answer_text(text)
        return ("meta", value if ok else {"text": value}, self._span(mark))

    def a_line(self, items):
        mark, *rest = items
        text = str(rest[0]).rstrip() if rest else ""
        value, ok = parse_answer_text(text)
        span = self._span(rest[0]) if rest else self._span(mark)
        return nodes.Answer(span, text, value, ok)

    def _tagged(self, tag, items):
        mark, *rest = items
        return (tag, str(rest[0]).rstrip() if rest else "", self._span(mark))

    @v_args(meta=True)
    def example(self, meta, items):
        return _ExampleReader(self._span(meta), self.source).read(items)

    @v_args(meta=True)
    def fewshot(self, meta, items):
        examples = tuple(e for group in items for e in group)
        return nodes.FewShot(self._span(meta), self.path, examples, self.source)

    # ---------------- plans
    @v_args(meta=True)
    def plan(self, meta, items):
        steps = tuple(i for i in items if isinstance(i, nodes.PlanStep))
        orders = [i for i in items if not isinstance(i, (nodes.PlanStep, tuple))]
        text = tuple(i[1] for i in items if isinstance(i, tuple))
        return nodes.Plan(self._span(meta), steps, orders[-1] if orders else None, text)

    def plan_step(self, items):
        mark, *rest = items
        number = int(re.search(r"\d+", str(mark)).group())
        return nodes.PlanStep(self._span(mark), number, str(rest[0]).strip() if rest else "")

    def plan_order(self, items):
        return next(i for i in items if not isinstance(i, Token))

    def plan_ref(self, items):
        return nodes.PlanRef(self._span(items[0]), int(re.search(r"\d+", str(items[0])).group()))

    @v_args(meta=True)
    def plan_and(self, meta, items):
        return nodes.PlanAnd(self._span(meta), tuple(items))

    @v_args(meta=True)
    def plan_or(self, meta, items):
        return nodes.PlanOr(self._span(meta), tuple(items))


Part = tuple[str, nodes.Span]  # a token's text and where it is


def _step_node(span: nodes.Span, op: Part | None, handler: Part | None, rest: Part | None) -> nodes.Step:
    """The `Step` of a line from its tokens (operator, handler reference, the rest)."""
    query = rest[0].rstrip() if rest else ""
    query_span = rest[1] if rest else None
    return nodes.Step(
        span,
        operator=op[0][1:-1] if op else None,
        handler=handler[0][1:-1].strip() if handler else None,
        query=query,
        refs=find_refs(query, query_span) if query_span else (),
        operator_span=op[1] if op else None,
        handler_span=handler[1] if handler else None,
        query_span=query_span,
    )


def _number(text: str):
    return float(text) if any(c in text for c in ".eE") else int(text)


class _ExampleReader:
    """Groups the lines of one blank-line-separated block into examples.

    Copes with the quirks of the official files: a first example whose question has no
    `QC:` marker (the last context line before the first `QS:` is taken as the question),
    several `Q:`/`A:` pairs in one block (one example each, sharing the context).
    """

    def __init__(self, span: nodes.Span, source: str):
        self.span = span
        self.lines = source.split("\n")[span.line - 1: span.end_line]
        self.examples: list[nodes.Example] = []
        self._reset([])

    def _reset(self, context):
        self.context, self.question, self.kind = context, None, "none"
        self.steps, self.pending, self.answer, self.metadata = [], None, None, []

    def read(self, items) -> list[nodes.Example]:
        for item in items:
            self._take(item)
        self._flush()
        return self.examples

    def _take(self, item):
        if isinstance(item, nodes.Step):
            self._close_pending()
            self.pending = item
        elif isinstance(item, nodes.Answer):
            self._answer(item)
        elif item[0] == "text":
            self.context.append(item[1])
        elif item[0] == "meta":
            self.metadata.append(item[1])
        else:
            self._question(item)

    def _question(self, item):
        if self.question is not None and (self.answer is not None or self.steps or self.pending):
            context = list(self.context)
            self._flush()
            self._reset(context)
        self.question, self.kind = item[1], item[0]

    def _answer(self, answer):
        if self.pending is not None:
            self.steps.append(nodes.ExampleStep(self.pending, answer))
            self.pending = None
        else:
            self.answer = answer

    def _close_pending(self):
        if self.pending is not None:
            self.steps.append(nodes.ExampleStep(self.pending, None))
            self.pending = None

    def _flush(self):
        self._close_pending()
        if self.question is None and self.steps and self.context:
            self.question, self.kind = self.context.pop(), "implicit"
        answer = self.answer
        if answer is None and self.steps:
            answered = [s.answer for s in self.steps if s.answer is not None]
            answer = answered[-1] if answered else None
        self.examples.append(nodes.Example(
            self.span, self.question, self.kind, "\n".join(self.context), tuple(self.steps), answer,
            tuple(self.metadata), tuple(self.lines),
        ))
