"""Hover, go to definition and document symbols of `decomp lsp`, from a document's index and
its current lines. Positions are 0-based lines and code-point columns; the server converts
them to what the client counts (UTF-16 by default).

Each function returns plain values (`Place`, markdown text) so that it can be tested without a
client; the server turns them into protocol types.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import PydanticUndefined

from decomp.dsl import nodes
from decomp.dsl.operators import OperatorError, describe
from decomp.handlers.plugins import load as kinds_table
from decomp.editors.lsp.hover_types import ref_type
from decomp.editors.lsp.index import Decl, Index, example_steps, numbered_steps
from decomp.editors.lsp.tokens import KEYWORDS, Token, token_at


@dataclass(frozen=True)
class Place:
    """A range in a file: 0-based lines, code-point columns, end exclusive."""

    path: Path
    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def of(cls, span: nodes.Span) -> "Place":
        end_line, end_col = span.end_line - 1, span.end_column - 1
        if (end_line, end_col) <= (span.line - 1, span.column - 1):
            end_line, end_col = span.line - 1, span.column
        return cls(Path(span.file), span.line - 1, span.column - 1, end_line, end_col)

    @classmethod
    def start_of(cls, path: Path) -> "Place":
        return cls(path, 0, 0, 0, 0)


# ------------------------------------------------------------------ hover
def hover(index: Index | None, lines: list[str], line: int, col: int) -> tuple[str, Token] | None:
    """Markdown about what is at (line, col), and the token it is about; None: nothing to say."""
    if line >= len(lines):
        return None
    token = token_at(lines[line], col, fewshot=index is not None and index.fewshot is not None)
    if token is None:
        return None
    text = _hover_text(index, token, line + 1)
    return (text, token) if text else None


def _hover_text(index: Index | None, token: Token, line: int) -> str | None:
    if token.kind == "operator":
        try:
            return escape(describe(token.text))
        except OperatorError as err:
            return escape(str(err))
    if token.kind == "kind":
        return kind_markdown(token.text)
    if token.kind == "keyword":
        return KEYWORDS[token.text]
    if index is None:
        return None
    if token.kind == "ref":
        return _ref_markdown(index, token.text, line)
    if token.kind == "option":
        return _option_markdown(index, token.text, line)
    decl = index.decls.get(token.text)
    if token.kind in ("handler", "name", "word", "string") and decl is not None:
        return decl_markdown(decl)
    if token.kind == "handler" and token.text == "EOQ":
        return "`[EOQ]`: ends the program; the answer is the query with its references filled in."
    return None


def decl_markdown(decl: Decl) -> str:
    """A declaration as hover text: its line, where it is, and its kind's options."""
    where = f"{decl.span.file}:{decl.span.line}"
    text = f"```decomp\n{decl.line}\n```\n{decl.what} `{decl.name}` ({where})"
    if decl.what == "handler":
        written = ", ".join(f"`{o.name}={_plain(o.value.plain())}`" for o in decl.options)
        text += f"\n\nkind `{decl.kind}`" + (f"; options: {written}" if written else "")
        doc = _kind_doc(decl.kind)
        text += f"\n\n{escape(doc)}" if doc else ""
    elif decl.what == "program" and isinstance(decl.node, nodes.Program):
        params = ", ".join(p.name for p in decl.node.params)
        steps = sum(1 for n, _ in numbered_steps(decl.node.body) if n is not None)
        text += f"\n\nparameters: {params or 'none'}; {steps} step(s)"
    return text


def kind_markdown(kind: str) -> str:
    """A handler kind: what it does, and each option with its type and default."""
    cls = kinds_table().kind(kind)
    if cls is None:
        known = ", ".join(sorted(kinds_table().kinds))
        return f"unknown handler kind `{kind}` (known: {known})"
    lines = [f"handler kind `{kind}`", "", escape(_kind_doc(kind)), ""]
    lines += [f"- `{name}`: `{type_name(f.annotation)}{_default(f)}`" for name, f in cls.Options.written_options().items()]
    return "\n".join(lines).rstrip()


_MARKDOWN = re.compile(r"([\\*_\[\]<>])")


def escape(text: str) -> str:
    """Plain text as markdown that shows it as written (brackets, backslashes, stars kept);
    `code` spans are left as they are."""
    parts = re.split(r"(`[^`\n]*`)", text)
    return "".join(part if i % 2 else _MARKDOWN.sub(r"\\\1", part) for i, part in enumerate(parts))


def _kind_doc(kind: str) -> str:
    cls = kinds_table().kind(kind)
    doc = (cls.__doc__ or "") if cls is not None else ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def type_name(annotation: Any) -> str:
    """A type as a user reads it: `str | None`, `list[str]`, `float`."""
    name = getattr(annotation, "__name__", None)
    return name if name and not getattr(annotation, "__args__", None) else str(annotation).replace("typing.", "")


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return " (required)"
    value = field.default_factory() if field.default is PydanticUndefined else field.default
    return f" = {_plain(value)}"


def _plain(value: Any) -> str:
    import json
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _option_markdown(index: Index, name: str, line: int) -> str | None:
    decl = index.handler_decl_at(line)
    cls = kinds_table().kind(decl.kind) if decl is not None else None
    if cls is None or name not in cls.Options.written_options():
        return None
    field = cls.Options.written_options()[name]
    return f"option `{name}` of kind `{decl.kind}`: `{type_name(field.annotation)}{_default(field)}`"


def _ref_markdown(index: Index, ref: str, line: int) -> str | None:
    target = ref_target(index, ref, line)
    if target is None:
        return None
    program = index.program_at(line)
    typed = f"\n\ntype `{ref_type(index, program, ref).text}`" if program is not None else ""
    if isinstance(target, nodes.Param):
        where = f"parameter `{target.name}` of program `{program.name}` (line {target.span.line})" + typed
        if index.module is not None and index.module.main is not None and index.module.main.target == program.name:
            where += (f"; as `main`, taken from each row's field `{target.name}` (`decomp run --input`, "
                      f"`--field {target.name}=...`)")
        return where
    number, step = target
    text = f"```decomp\nQS: {step.text}\n```\nstep {number} (line {step.span.line}){typed}"
    if step.operator:
        try:
            text += "\n\n" + escape(describe(step.operator))
        except OperatorError:
            pass
    decl = index.decls.get(step.handler or "")
    if decl is not None:
        text += "\n\n---\n" + decl_markdown(decl)
    return text


def ref_target(index: Index, ref: str, line: int) -> tuple[int, nodes.Step] | nodes.Param | None:
    """What `#n` or `#name` on `line` (1-based) reads: (n, its step) or the parameter."""
    name = ref[1:]
    program = index.program_at(line)
    if program is not None and not name.isdigit():
        return next((p for p in program.params if p.name == name), None)
    if not name.isdigit():
        return None
    steps = numbered_steps(program.body) if program is not None else (
        example_steps(example) if (example := index.example_at(line)) is not None else [])
    return next(((n, step) for n, step in steps if n == int(name)), None)


# ------------------------------------------------------------------ definition
def definition(index: Index | None, lines: list[str], line: int, col: int) -> list[Place]:
    """Where the name, reference or path at (line, col) is defined."""
    if index is None or line >= len(lines):
        return []
    token = token_at(lines[line], col, fewshot=index.fewshot is not None)
    if token is None:
        return []
    if token.kind == "ref":
        target = ref_target(index, token.text, line + 1)
        if target is None:
            return []
        return [Place.of(target.span if isinstance(target, nodes.Param) else target[1].span)]
    if token.kind == "string":
        path = _path_target(index, token)
        if path is not None:
            return [Place.start_of(path)]
    decl = index.decls.get(token.text)
    return [Place.of(decl.name_span)] if decl is not None and token.kind != "option" else []


def _path_target(index: Index, token: Token) -> Path | None:
    """The file an `import` or `file=` string names (from the document's folder), when it exists."""
    if token.context not in ("import", "file") or not token.text:
        return None
    path = (index.path.parent / token.text)
    return path.resolve() if path.is_file() else None


# ------------------------------------------------------------------ document symbols
@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str  # "model" | "handler" | "program" | "step" | "main" | "metric" | "example"
    detail: str
    place: Place
    selection: Place
    children: tuple["Symbol", ...] = ()


def symbols(index: Index | None) -> list[Symbol]:
    """The outline: models, handlers, programs with their steps, main, metric; or a few-shot
    file's examples with their steps."""
    if index is None:
        return []
    if index.fewshot is not None:
        return [_example_symbol(i, e) for i, e in enumerate(index.fewshot.examples, 1)]
    module = index.module
    if module is None:
        return []
    found = [Symbol(m.name, "model", m.spec, Place.of(m.span), Place.of(m.span)) for m in module.models]
    found += [Symbol(h.name, "handler", h.kind, Place.of(h.span), Place.of(h.name_span or h.span))
              for h in module.handlers]
    found += [Symbol(p.name, "program", "(" + ", ".join(q.name for q in p.params) + ")", Place.of(p.span),
                     Place.of(p.name_span or p.span), _step_symbols(numbered_steps(p.body))) for p in module.programs]
    found += [Symbol(m.target, "main", "main", Place.of(m.span), Place.of(m.span)) for m in module.mains]
    found += [Symbol(m.name, "metric", "metric", Place.of(m.span), Place.of(m.name_span or m.span))
              for m in module.metrics]
    return sorted(found, key=lambda s: (s.place.line, s.place.column))


def _step_symbols(steps) -> tuple[Symbol, ...]:
    return tuple(Symbol(f"#{n}" if n is not None else "end", "step", step.text[:80], Place.of(step.span),
                        Place.of(step.span)) for n, step in steps)


def _example_symbol(number: int, example: nodes.Example) -> Symbol:
    title = (example.question or "").strip()[:60] or f"example {number}"
    return Symbol(title, "example", f"example {number}", Place.of(example.span), Place.of(example.span),
                  _step_symbols(example_steps(example)))
