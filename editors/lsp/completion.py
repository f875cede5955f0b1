"""Completion and references of `decomp lsp`: what may be typed at a place, read from the text
before the cursor (the line is usually half typed and does not parse) and the document's index.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from decomp.dsl import lexicon
from decomp.dsl.operators import KNOWN, describe
from decomp.dsl.parser import read_text
from decomp.handlers.plugins import load as kinds_table
from decomp.handlers.sandbox.trust import BUNDLED_PROGRAMS, inside
from decomp.editors.lsp.features import Place, _default, _kind_doc, type_name
from decomp.editors.lsp.index import Index, available_at, example_steps, numbered_steps


@dataclass(frozen=True)
class Item:
    """One completion: the label shown, what kind of thing it is, a detail, and the text inserted."""

    label: str
    kind: str  # "handler" | "operator" | "kind" | "option" | "ref" | "file" | "program"
    detail: str = ""
    insert: str | None = None


_OPEN_BRACKET = re.compile(r"\[([^\]\[]*)$")
_OPERATOR_TYPED = re.compile(r"\([A-Za-z0-9_]*")  # after a step's `QS:`
_REF_TYPED = re.compile(r"#([A-Za-z0-9_]*)$")
_KIND_TYPED = re.compile(r"^\s*handler\s+[A-Za-z_][A-Za-z0-9_]*\s*=\s*([A-Za-z0-9_]*)$")
_PATH_TYPED = re.compile(r"(?:^\s*import\s+|\bfile\s*=\s*)\"([^\"]*)$")
_OPTION_TYPED = re.compile(r"(?:^|[(,\s])([A-Za-z_][A-Za-z0-9_]*)?$")
#: How far back (characters) completion looks for the handler whose options are being written.
_LOOKBACK = 4000


def complete(index: Index | None, text: str, lines: list[str], line: int, col: int) -> list[Item]:
    """What may be typed at (line, col) of the document whose lines are `lines` (`text` joined)."""
    if line >= len(lines):
        return []
    before = lines[line][:col]
    fewshot = index is not None and index.fewshot is not None
    step = lexicon.QS_LINE.match(before)
    if step is not None and _OPERATOR_TYPED.fullmatch(before, step.end()) is not None:
        return [Item(name, "operator", describe(name)) for name in KNOWN]
    if step is not None and _OPEN_BRACKET.search(before):
        return _handlers(index, lines)
    if (step is not None or fewshot or before.lstrip().startswith("if")) and _REF_TYPED.search(before):
        return _refs(index, line + 1)
    if fewshot:
        return []
    if _KIND_TYPED.match(before):
        return [Item(name, "kind", _kind_doc(name)) for name in sorted(kinds_table().kinds)]
    if _PATH_TYPED.search(before) is not None and index is not None:
        return _paths(index, before.lstrip().startswith("import"))
    kind, written = _open_options(text, lines, line, col)
    if kind is not None and _OPTION_TYPED.search(before):
        return _options(kind, written)
    return []


def _handlers(index: Index | None, lines: list[str]) -> list[Item]:
    items = [Item("EOQ", "handler", "ends the program")]
    if index is not None and index.module is not None:
        items += [Item(d.name, "handler", f"{d.what} {d.kind}") for d in index.decls.values() if d.what != "model"]
    else:  # a few-shot file: the handlers its other steps name
        named = {m.group()[1:-1].strip() for line in lines if lexicon.QS_LINE.match(line)
                 for m in lexicon.HANDLER_REF.finditer(line)} - {"EOQ"}
        items += [Item(name, "handler", "named in this file") for name in sorted(named)]
    return items


def _refs(index: Index | None, line: int) -> list[Item]:
    if index is None:
        return []
    program = index.program_at(line)
    if program is not None:
        steps = {n: s for n, s in _numbered(program) if n is not None}
        items = [Item(f"#{n}", "ref", f"step {n}: {steps[n].text[:60]}", f"#{n}") for n in available_at(program, line)]
        return items + [Item(f"#{p.name}", "ref", f"parameter of {program.name}", f"#{p.name}") for p in program.params]
    example = index.example_at(line)
    if example is None:
        return []
    return [Item(f"#{n}", "ref", f"step {n}: {step.text[:60]}", f"#{n}")
            for n, step in example_steps(example) if n is not None and step.span.line < line]


def _numbered(program):
    return numbered_steps(program.body)


def _paths(index: Index, imports: bool) -> list[Item]:
    """Files next to the document (and one folder down); for `import` and `program(file=)`
    also the bundled programs, by their name, inserted as a path from here."""
    folder = index.path.parent
    found = []
    try:
        for path in sorted([*folder.glob("*"), *folder.glob("*/*")])[:500]:
            if path.is_file() and path.resolve() != index.path.resolve() and not path.name.startswith("."):
                if not imports or path.suffix == ".decomp":
                    found.append(Item(str(path.relative_to(folder)), "file", "file"))
    except OSError:
        pass
    for program in sorted(BUNDLED_PROGRAMS.rglob("*.decomp")):
        name = str(program.relative_to(BUNDLED_PROGRAMS).with_suffix(""))
        found.append(Item(name, "program", "bundled program", os.path.relpath(program, folder)))
    return found


def _open_options(text: str, lines: list[str], line: int, col: int) -> tuple[str | None, set[str]]:
    """The kind of the handler declaration whose option parentheses hold the cursor, and the
    option names already written there."""
    offset = sum(len(x) + 1 for x in lines[:line]) + col
    window = text[max(0, offset - _LOOKBACK):offset]
    heads = list(re.finditer(r"(?m)^\s*handler\s+[A-Za-z_][A-Za-z0-9_]*\s*=\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(", window))
    if not heads:
        return None, set()
    head = heads[-1]
    inside = window[head.end():]
    masked = re.sub(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'", "\"\"", inside)
    if masked.count("(") + 1 <= masked.count(")") or "\"" in masked.replace("\"\"", ""):
        return None, set()
    return head.group(1), set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*=", masked))


def _options(kind: str, written: set[str]) -> list[Item]:
    cls = kinds_table().kind(kind)
    if cls is None:
        return []
    return [Item(name, "option", type_name(f.annotation) + _default(f), f"{name}=")
            for name, f in cls.Options.written_options().items() if name not in written]


# ------------------------------------------------------------------ references
def references(index: Index | None, text: str, name: str, with_declaration: bool = True) -> list[Place]:
    """Every place that names the handler or program `name`: `[name]` in steps (this document,
    the files it imports, and the few-shot files its handlers read), `main name`, a string option
    naming it, and (with_declaration) its declaration."""
    if index is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return []
    pattern = re.compile(rf"\[\s*{name}\s*\]|(?<=[\"']){name}(?=[\"'])|^\s*main\s+({name})\b|"
                         rf"^\s*(?:handler|program)\s+({name})\b", re.M)
    places = []
    for path, source in _files(index, text):
        for match in pattern.finditer(source):
            is_decl = match.group(2) is not None
            if is_decl and not with_declaration:
                continue
            group = 2 if is_decl else 1 if match.group(1) is not None else 0
            start, end = match.span(group)
            if group == 0 and match.group().startswith("["):
                start, end = start + match.group().index(name), start + match.group().index(name) + len(name)
            places.append(_place(path, source, start, end))
    return places


def _files(index: Index, text: str):
    """The document's text, then each imported or few-shot file once (from disk; only those in
    the folders the program may read)."""
    yield index.path, text
    seen = {index.path.resolve()}
    roots = index.roots
    extra = list(index.imports)
    for decl in index.decls.values():
        file = next((o.value.plain() for o in decl.options if o.name == "file"), None)
        if isinstance(file, str):
            extra.append((Path(decl.span.file).parent / file).resolve())
    for path in extra:
        if path in seen or not inside(path, roots) or not path.is_file():
            continue
        seen.add(path)
        try:
            yield path, read_text(path)
        except Exception:
            continue


def _place(path: Path, source: str, start: int, end: int) -> Place:
    line = source.count("\n", 0, start)
    line_start = source.rfind("\n", 0, start) + 1
    return Place(path, line, start - line_start, line, end - line_start)

