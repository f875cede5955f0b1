"""Text -> typed AST. `parse_module`, `parse_fewshot`, `parse_step_line`, `parse_plan`.

Syntax errors come back as `DecompSyntaxError` (or `Diagnostics` for several), positioned,
in the language's own words; what is said after Lark fails is `dsl.recovery`'s (each broken
declaration of a file, a bracket or string left open where it was opened). A `QS:` line whose
`[handler` or `(operator` is never closed is an error at its `[` or `(`, not a step without a
handler.

Reading is linear in the text and never recursive (`Transformer_NonRecursive`); the limits on
size and nesting, and the line ends (`\r\n` and a lone `\r` end a line), are `dsl.limits`'.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedInput, VisitError

from decomp.dsl import lexicon, nodes
from decomp.dsl.checker import misspelt_marker
from decomp.dsl.errors import DecompError, DecompSyntaxError, Diagnostics
from decomp.dsl.grammar import parser
from decomp.dsl.limits import MAX_SOURCE_CHARS, json_too_deep, normalize_newlines, source_lines, too_deep, too_long
from decomp.dsl.recovery import all_errors, blank_chunks, module_chunks, open_operator, shifted, syntax_error


def parse_module(text: str, path: str = "<string>") -> nodes.Module:
    """Parse a .decomp module. Memoised (the last few texts): `decomp check` and `decomp run`
    read a file twice (to load it, then for its warnings), and the AST is immutable."""
    return _parse_module(text, path)


@lru_cache(maxsize=8)
def _parse_module(text: str, path: str) -> nodes.Module:
    return _parse(text, path, "module", module_chunks)


def parse_fewshot(text: str, path: str = "<string>", *, line: int = 1) -> nodes.FewShot:
    """Parse a DecomP few-shot file (QC/QS/A programs, Q/A pairs, context paragraphs). `line`:
    the line of `path` the text starts on (examples written inside a .decomp file), so that
    spans and errors point into that file."""
    return _parse(text, path, "fewshot", blank_chunks, line - 1)


def parse_plan(text: str, path: str = "<plan>") -> nodes.Plan:
    """Parse ADaPT planner output into steps and an AND/OR execution order."""
    return _parse(text, path, "plan", None)


@lru_cache(maxsize=4096)
def parse_step_line(text: str, path: str = "<model output>") -> nodes.Step:
    """Parse one `QS: (op) [handler] text` line (the `QS:` marker may be omitted).

    Memoised: decomposers emit the same lines again and again, and the AST is immutable. A
    line without line breaks is read by `lexicon.STEP_LINE`, a regular expression made of the
    grammar's own terminals: the same `Step` as Lark's (a property test compares them on
    random lines) at a fifth of the cost. Anything else goes through Lark."""
    line = text.strip("\r\n")
    if not line.strip():
        line = "QS:"
    if "\n" not in line and "\r" not in line:
        step = _fast_step(lexicon.STEP_LINE.fullmatch(line), path)
        if step is not None:
            return step
    return _parse(line, path, "step_line", None)


def _fast_step(match: re.Match | None, path: str) -> nodes.Step | None:
    """The `Step` of a `lexicon.STEP_LINE` match (None when there is none, or it holds no token)."""
    groups = [g for g in ("mark", "op", "handler", "rest") if match and match.start(g) >= 0]
    if not groups:
        return None
    first, last = match.start(groups[0]), match.end(groups[-1])

    def span(start: int, end: int) -> nodes.Span:
        return nodes.Span(path, 1, start + 1, 1, end + 1)

    def part(name: str):
        return (match.group(name), span(match.start(name), match.end(name))) if match.start(name) >= 0 else None

    return _step_node(span(first, last), part("op"), part("handler"), part("rest"))


#: Files whose reading could wait for ever or never end, by their `stat` mode.
_SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def special_file(path: str | Path) -> str | None:
    """What the file at `path` is when it is a FIFO, a device or a socket ("a FIFO (named
    pipe)"), which no source is read from; None for a regular file, a folder or no file."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((what for test, what in _SPECIAL_FILES if test(mode)), None)


def not_read(path: str | Path, what: str) -> str:
    """Why the `what` ("imported file") at `path`, which is no regular file, is not read."""
    special = special_file(path) or ("a folder" if os.path.isdir(path) else None)
    return f"{what} {path} is {special}, not a regular file: it is not read" if special else f"{what} not found: {path}"


def _open_regular(path: str | Path):
    """`path` opened to be read, refused (`DecompError`) when it is a FIFO, a device or a socket:
    looked at before it is opened, opened without waiting (`O_NONBLOCK`) and looked at again
    before a byte is read, so that no file put there in between can block the reader. A folder
    is the `IsADirectoryError` it always was; whatever is refused, its descriptor is closed."""
    special = special_file(path)
    if special is None:
        fd = os.open(path, _READ_FLAGS)
        try:
            special = _not_regular(os.fstat(fd).st_mode, path)
            if special is None:
                return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    raise DecompError(f"{path} is {special}, not a regular file: it is not read",
                      nodes.Span(str(path), 1, 1, 1, 2), line_text="")


def _not_regular(mode: int, path: str | Path) -> str | None:
    """What an opened file of `mode` is when it is a FIFO, a device or a socket; a folder raises
    `IsADirectoryError`; None for a regular file."""
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return next((what for test, what in _SPECIAL_FILES if test(mode)), None)


def read_text(path: str | Path) -> str:
    """A source file's text; a file that is not UTF-8, or longer than `MAX_SOURCE_CHARS` bytes
    (refused after reading one byte more, whatever its size), is a `DecompSyntaxError`; a name
    no file can have, a FIFO, a device or a socket a `DecompError` (never waited on); a missing
    file is the `OSError` it always was."""
    try:
        with _open_regular(path) as handle:
            data = handle.read(MAX_SOURCE_CHARS + 1)
    except ValueError:  # a NUL or a lone surrogate in the name: no file is called that
        raise DecompError("no file can have this name (it holds a NUL or text that is not Unicode)",
                          nodes.Span(str(path), 1, 1, 1, 2), line_text="") from None
    error = too_long(len(data), str(path), "bytes")
    if error is not None:
        raise error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        before = source_lines(data[: err.start].decode("utf-8"))
        line, column = len(before), len(before[-1]) + 1
        raise DecompSyntaxError(f"the file is not UTF-8 text (byte {data[err.start]:#04x})",
                                nodes.Span(str(path), line, column, line, column + 1), line_text="") from None


def read_module(path: str | Path) -> nodes.Module:
    return parse_module(read_text(path), str(path))


def read_fewshot(path: str | Path) -> nodes.FewShot:
    return parse_fewshot(read_text(path), str(path))


# ------------------------------------------------------------------ driver
def _parse(text: str, path: str, start: str, chunker, offset: int = 0):
    """Parse `text` from the grammar's `start` rule; `offset`: lines of `path` before it."""
    error = too_long(len(text), path)
    if error is not None:
        raise error
    source = normalize_newlines(text)
    source = source if source.endswith("\n") else source + "\n"
    lines = source.split("\n")
    try:
        tree = parser().parse(source, start=start)
    except UnexpectedInput as exc:
        first = syntax_error(exc, path, lines, source if start == "module" else None)
        raise shifted(all_errors(lines, path, start, chunker, first), offset) from None
    error = too_deep(tree, path, lines)
    if error is not None:
        raise shifted(error, offset)
    builder = _Builder(path, source, lines, strict_steps=start in ("module", "fewshot"), offset=offset)
    try:
        built = builder.transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, DecompError):  # made by the builder, at its (shifted) spans
            raise exc.orig_exc from None
        span = _visit_span(exc, path)
        raise shifted(DecompSyntaxError(f"cannot read this: {exc.orig_exc}", span,
                                         line_text=lines[span.line - 1] if span.line <= len(lines) else None),
                       offset) from None
    if builder.errors:
        raise builder.errors[0] if len(builder.errors) == 1 else Diagnostics(builder.errors)
    return built


def _visit_span(exc: VisitError, path: str) -> nodes.Span:
    meta = getattr(exc.obj, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return nodes.Span(path, meta.line, meta.column, meta.end_line, meta.end_column)
    return nodes.Span(path, 1, 1, 1, 2)


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
    Infinity are not JSON; arrays and objects nested more than `MAX_NESTING` deep stay text too)."""
    stripped = text.strip()
    if json_too_deep(stripped):  # more than MAX_NESTING levels: no later walk could take it
        return stripped, False
    try:
        return _JSON.decode(stripped), True
    except (ValueError, RecursionError):
        return stripped, False


def find_refs(text: str, span: nodes.Span) -> tuple[nodes.Ref, ...]:
    """The `#n` and `#name` references in a query text that starts at `span`."""
    refs = []
    for m in lexicon.REF.finditer(text):
        sub, word = span.at(m.start(), m.end() - m.start()), m.group()[1:]
        refs.append(nodes.Ref(sub, index=int(word)) if word[0].isdigit() else nodes.Ref(sub, name=word))
    return tuple(refs)


def _type_arg_text(item) -> str:
    """A literal inside a type (`one_of("a", 1, true)`) as the canonical type text writes it."""
    if isinstance(item, nodes.Value):
        return json.dumps(item.value)
    if item.type in ("STRING", "LONG_STRING"):
        return json.dumps(decode_string(str(item)), ensure_ascii=False)
    return str(item)


class _Builder(Transformer_NonRecursive):
    """Turns Lark's parse tree into the frozen dataclasses of `nodes` (bottom-up, with a stack
    of its own rather than recursion: no tree is too deep for it)."""

    def __init__(self, path: str, source: str, lines: list[str], strict_steps: bool = False, offset: int = 0):
        super().__init__(visit_tokens=False)  # no terminal has a callback: skip a call per token
        self.path = path
        self.source = source
        self.lines = lines  # the source's lines, split once
        #: lines of the file before the text (examples inside a .decomp file): added to spans
        self.offset = offset
        #: in files people write (modules, few-shot files), a `QS:` line whose `[` or `(` is
        #: never closed is a syntax error; a model's line (step_line) is read as it comes
        self.strict_steps = strict_steps
        self.errors: list[DecompError] = []

    def _span(self, item) -> nodes.Span:
        if isinstance(item, Token):
            return nodes.Span(self.path, item.line + self.offset, item.column, item.end_line + self.offset,
                              item.end_column)
        if getattr(item, "empty", True):
            return nodes.Span(self.path, 1 + self.offset, 1, 1 + self.offset, 1)
        return nodes.Span(self.path, item.line + self.offset, item.column, item.end_line + self.offset,
                          item.end_column)

    def _line(self, span: nodes.Span) -> str:
        """The source line `span` starts on."""
        index = span.line - 1 - self.offset
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    # ---------------- module
    @v_args(meta=True)
    def module(self, meta, items):
        groups: dict[type, list] = {}
        for item in items:
            groups.setdefault(type(item), []).append(item)
        mains = tuple(groups.get(nodes.Main, ()))
        metrics = tuple(groups.get(nodes.Metric, ()))
        return nodes.Module(
            self._span(meta), self.path,
            imports=tuple(groups.get(nodes.Import, ())),
            models=tuple(groups.get(nodes.ModelDecl, ())),
            handlers=tuple(groups.get(nodes.HandlerDecl, ())),
            programs=tuple(groups.get(nodes.Program, ())),
            main=mains[-1] if mains else None,
            mains=mains,
            metric=metrics[-1] if metrics else None,
            metrics=metrics,
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
        result = rest.pop(0) if rest and isinstance(rest[0], nodes.Value) else None
        options = rest[0] if len(rest) == 2 else ()
        return nodes.Program(self._span(meta), str(name), params, rest[-1], options, name_span=self._span(name),
                             result=result)

    def params(self, items):
        return tuple(items)

    @v_args(meta=True)
    def param(self, meta, items):
        return nodes.Param(self._span(items[0]), str(items[0]), items[1] if len(items) > 1 else None)

    def result_type(self, items):
        return items[0]

    # types: each is kept as its canonical text (dsl/answer_types.py reads it), with its span
    @v_args(meta=True)
    def type_name(self, meta, items):
        return nodes.Value(self._span(meta), str(items[0]), "type")

    @v_args(meta=True)
    def type_apply(self, meta, items):
        return nodes.Value(self._span(meta), f"{items[0]}[{items[1].value}]", "type")

    @v_args(meta=True)
    def type_call(self, meta, items):
        args = ", ".join(_type_arg_text(a) for a in items[1:])
        return nodes.Value(self._span(meta), f"{items[0]}({args})", "type")

    def type_field(self, items):
        return f"{items[0]}: {items[1].value}"

    @v_args(meta=True)
    def type_object(self, meta, items):
        return nodes.Value(self._span(meta), "{" + ", ".join(items) + "}", "type")

    def program_options(self, items):
        return tuple(items)

    def options(self, items):
        return tuple(items)

    @v_args(meta=True)
    def main_stmt(self, meta, items):
        return nodes.Main(self._span(meta), str(items[0]))

    @v_args(meta=True)
    def metric_stmt(self, meta, items):
        first, last = self._span(items[0]), self._span(items[-1])
        span = nodes.Span(self.path, first.line, first.column, last.end_line, last.end_column)
        written = self._line(first)[first.column - 1:last.end_column - 1]
        name = "".join(written.split())
        if name != written:  # `metric mod : close`
            self.errors.append(DecompSyntaxError(f"a metric function is written without spaces: {name}", span,
                                                 expected="module:function", line_text=self._line(first)))
        return nodes.Metric(self._span(meta), name, name_span=span)

    @v_args(meta=True)
    def option(self, meta, items):
        value = self._value(items[1])
        if str(items[0]) == "returns" and value.kind == "ident":  # `returns=str`: a type's name
            value = nodes.Value(value.span, value.value, "type")
        return nodes.Option(self._span(meta), str(items[0]), value)

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

    @v_args(meta=True)
    def ok_operand(self, meta, items):
        return nodes.Ok(self._span(meta), self._ref(items[0]))

    @v_args(meta=True)
    def depth_operand(self, meta, items):
        if items:  # read, so that the error is this one, not "#1) {" taken for a comment
            at = self._span(items[0])
            self.errors.append(DecompSyntaxError("depth() takes no argument: it is the depth of the running program",
                                                 at, expected="depth()", line_text=self._line(at)))
        return nodes.Depth(self._span(meta))

    def _ref(self, token: Token) -> nodes.Ref:
        return find_refs(str(token), self._span(token))[0]

    # ---------------- DecomP lines
    @v_args(meta=True)
    def step(self, meta, items):
        parts = {t.type: (str(t), self._span(t)) for t in items}
        if self.strict_steps and "HANDLER_REF" not in parts and "REST" in parts:
            self._open_step(parts["REST"], "OPERATOR" in parts)
        return _step_node(self._span(meta), parts.get("OPERATOR"), parts.get("HANDLER_REF"), parts.get("REST"))

    @v_args(meta=True)
    def bare_step(self, meta, items):
        parts = {t.type: (str(t), self._span(t)) for t in items}
        return _step_node(self._span(meta), parts.get("OPERATOR"), parts.get("HANDLER_REF"), parts.get("REST"))

    def _open_step(self, rest: Part, has_operator: bool) -> None:
        """`QS: [split What ...` (no `]`) or `QS: (foreach [split] ...` (no `)`): an error at the
        bracket, not a step without a handler whose query starts with it."""
        text, span = rest
        at = nodes.Span(self.path, span.line, span.column, span.line, span.column + 1)
        if text.startswith("[]"):
            message, expected = "empty handler reference []", "a handler such as [split]"
            at = nodes.Span(self.path, span.line, span.column, span.line, span.column + 2)
        elif text.startswith("["):
            message = "unclosed `[`: a handler reference needs its `]` on the same line"
            expected = "a handler such as [split]"
        elif not has_operator and open_operator().match(text):
            message = "unclosed `(`: an operator needs its `)`"
            expected = "an operator such as (foreach)"
        else:
            return
        self.errors.append(DecompSyntaxError(message, at, expected=expected, line_text=self._line(span)))

    def step_line(self, items):
        return items[0]

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
        span = self._span(meta)
        lines = self.lines[span.line - 1 - self.offset: span.end_line - self.offset]
        return _ExampleReader(span, lines, self.errors).read(items)

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

    Adds to `errors`, each at its line: a question with no answer (and no steps), such as one
    followed by another question; an answer with no question before it, or a second answer to
    one question. Where a context line looks like the marker that is missing (`A "x"`, `Q.`,
    `a:`: `decomp.dsl.checker.misspelt_marker`), the error is at that line and names the marker.
    """

    def __init__(self, span: nodes.Span, lines: list[str], errors: list[DecompError]):
        self.span = span
        self.lines = lines
        self.errors = errors
        self.examples: list[nodes.Example] = []
        self.texts: list[tuple[str, nodes.Span]] = []  # context lines since the last question or answer
        self._reset([])

    def _reset(self, context):
        self.context, self.question, self.kind, self.asked = context, None, "none", None
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
            self.texts.append(item[1:])
        elif item[0] == "meta":
            self.metadata.append(item[1])
        else:
            self._question(item)

    def _question(self, item):
        if self.question is not None and (self.answer is not None or self.steps or self.pending):
            context = list(self.context)
            self._flush()
            self._reset(context)
        elif self.question is not None:
            self._unanswered(item[2])
        self.question, self.kind, self.asked = item[1], item[0], item[2]
        self.texts = []

    def _answer(self, answer):
        if self.pending is not None:
            self.steps.append(nodes.ExampleStep(self.pending, answer))
            self.pending = None
        elif self.answer is not None or (self.question is None and not self.steps):
            self._unasked(answer)
        else:
            self.answer = answer
        self.texts = []

    def _close_pending(self):
        if self.pending is not None:
            self.steps.append(nodes.ExampleStep(self.pending, None))
            self.pending = None

    def _flush(self):
        self._close_pending()
        if self.question is None and self.steps and self.context:
            self.question, self.kind = self.context.pop(), "implicit"
        elif self.asked is not None and not self.steps and self.answer is None:
            self._unanswered()
        answer = self.answer
        if answer is None and self.steps:
            answered = [s.answer for s in self.steps if s.answer is not None]
            answer = answered[-1] if answered else None
        self.examples.append(nodes.Example(
            self.span, self.question, self.kind, "\n".join(self.context), tuple(self.steps), answer,
            tuple(self.metadata), tuple(self.lines), self.asked,
        ))

    # ---- what is missing, said where it is
    def _unanswered(self, next_question: nodes.Span | None = None) -> None:
        """The question (`self.asked`) has no answer: the next line is `next_question`, or its
        example ends."""
        wanted = ("A:", "QS:") if self.kind == "QC" else ("A:",)
        if self._misspelt(wanted, f"the question at line {self.asked.line} has no answer"):
            return
        where = (f"another question follows it at line {next_question.line}" if next_question is not None
                 else "no A: line follows it in its example")
        if self.kind == "QC":
            self._error(f"this question has no steps and no answer: {where}", self.asked,
                        "QS: steps or an A: line after each QC: line")
        else:
            self._error(f"this question has no answer: {where}", self.asked, "an A: line after each Q: line")

    def _unasked(self, answer: nodes.Answer) -> None:
        """`answer` answers no question: none came before it, or its question has its answer."""
        if self._misspelt(("Q:", "QC:"), f"the answer at line {answer.span.line} has no question"):
            return
        line = self._text(answer.span.line)
        mark = nodes.Span(answer.span.file, answer.span.line, line.find("A:") + 1, answer.span.line,
                          line.find("A:") + 3)
        if self.answer is not None:
            self._error(f"this answer has no question: the question at line {self._asked_line()} already "
                        f"has its answer at line {self.answer.span.line}", mark,
                        "one A: line after each Q: line (a new example starts with Q:)")
        else:
            self._error("this answer has no question: no Q: line comes before it in its example", mark,
                        "a Q: line before each A: line")

    def _asked_line(self) -> int:
        return self.asked.line if self.asked is not None else self.span.line

    def _misspelt(self, wanted: tuple[str, ...], what: str) -> bool:
        """Report the first context line since the last marker that looks like one of the
        `wanted` markers misspelt; False when there is none."""
        for text, span in self.texts:
            meant = misspelt_marker(text)
            if meant is not None and meant[0] in wanted:
                self._error(f"this line is read as context, so {what}: did you mean `{meant[0]}`?", span, meant[1])
                return True
        return False

    def _error(self, message: str, span: nodes.Span, expected: str) -> None:
        self.errors.append(DecompSyntaxError(message, span, expected=expected, line_text=self._text(span.line)))

    def _text(self, line: int) -> str:
        index = line - self.span.line
        return self.lines[index] if 0 <= index < len(self.lines) else ""
