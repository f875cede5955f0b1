"""What `decomp lsp` knows of a document's structure: its syntax tree, read even when part of
it does not parse, and the declarations it sees (its own and its imports').

    index = build_index(path, text)          # never raises
    index.decls["qa"]                        # a Decl: where, what kind, which options
    index.program_at(line)                   # the program whose body holds line (1-based)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from decomp.dsl import lexicon, nodes
from decomp.dsl.errors import DecompError, Diagnostics, UnclosedError
from decomp.dsl.limits import normalize_newlines
from decomp.dsl.parser import parse_fewshot, parse_module, read_text
from decomp.dsl.walks import iter_steps, number_steps
from decomp.handlers.sandbox.trust import NO_TRUST, Trust, inside

#: Imports followed at most this deep, and this many files in all (an index stays cheap).
MAX_IMPORTED_FILES = 64


@dataclass(frozen=True)
class Decl:
    """A declared name: a handler, a program or a model, in the file that declares it."""

    name: str
    what: str  # "handler" | "program" | "model"
    span: nodes.Span
    name_span: nodes.Span
    #: A handler's kind ("program" for programs), a model's spec.
    kind: str
    options: tuple[nodes.Option, ...] = ()
    #: The declaration's first line, as written.
    line: str = ""
    node: object = None


@dataclass
class Index:
    """A document's syntax tree (`module` or `fewshot`) and the declarations it can name."""

    path: Path
    module: nodes.Module | None = None
    fewshot: nodes.FewShot | None = None
    decls: dict[str, Decl] = field(default_factory=dict)
    #: The files this document imports (resolved), readable or not.
    imports: list[Path] = field(default_factory=list)
    #: The folders the program may read files from (`Trust.program_roots`): imports and `file=`
    #: options elsewhere are never read for the index, completion or hover.
    roots: tuple[Path, ...] = ()

    def program_at(self, line: int) -> nodes.Program | None:
        """The program whose declaration spans `line` (1-based)."""
        programs = self.module.programs if self.module is not None else ()
        return next((p for p in programs if p.span.line <= line <= p.span.end_line), None)

    def example_at(self, line: int) -> nodes.Example | None:
        """The few-shot example that spans `line` (1-based)."""
        examples = self.fewshot.examples if self.fewshot is not None else ()
        return next((e for e in examples if e.span.line <= line <= e.span.end_line), None)

    def handler_decl_at(self, line: int) -> nodes.HandlerDecl | None:
        handlers = self.module.handlers if self.module is not None else ()
        return next((h for h in handlers if h.span.line <= line <= h.span.end_line), None)


def build_index(path: str | Path, text: str, fewshot: bool | None = None, trust: Trust = NO_TRUST) -> Index:
    """The index of `text`, the content of `path`; a few-shot file when `fewshot` (None: by the
    suffix, `.decomp` being a module), reading only files in the folders `trust` lets the
    program read. Parts that do not parse are left out; never raises."""
    path = Path(path)
    index = Index(path, roots=trust.program_roots(path))
    if fewshot if fewshot is not None else path.suffix != ".decomp":
        index.fewshot = _tolerant(lambda t: parse_fewshot(t, str(path)), text, _blank_starts)
        return index
    index.module = tolerant_module(text, str(path))
    if index.module is not None:
        _declare(index, index.module, text)
        _follow_imports(index, index.module, path)
    return index


def tolerant_module(text: str, path: str) -> nodes.Module | None:
    """The module in `text`; when some declarations do not parse, the module without them
    (their lines blanked, so every span stays where it is); None when even that fails."""
    return _tolerant(lambda t: parse_module(t, path), text, _chunk_starts)


def _tolerant(parse, text: str, starts, rounds: int = 6):
    """`parse(text)`, else `parse` of the text with the lines that hold errors (for a bracket
    left open, the line it opened on) blanked, then, when that is not enough, the chunks that hold them; a few
    rounds at most; None when nothing parses. Blank lines keep every span where it was."""
    lines = normalize_newlines(text).split("\n")
    for _ in range(rounds):
        try:
            return parse("\n".join(lines))
        except RecursionError:
            return None
        except DecompError as err:
            errors = err.errors if isinstance(err, Diagnostics) else [err]
            broken = {e.opened.line if isinstance(e, UnclosedError) else e.span.line for e in errors if e.span}
            if not _blank_lines(lines, broken) and not _blank(lines, broken, starts(lines)):
                return None
    return None


def _blank_lines(lines: list[str], broken: set[int]) -> bool:
    changed = False
    for line in broken:
        if 0 < line <= len(lines) and lines[line - 1].strip():
            lines[line - 1] = ""
            changed = True
    return changed


def _blank(lines: list[str], broken: set[int], bounds: list[int]) -> bool:
    """Blank the chunks (from `bounds`, 0-based starts) holding a line of `broken` (1-based);
    False when none had anything left to blank."""
    changed = False
    bounds = bounds + [len(lines)]
    for begin, end in zip(bounds, bounds[1:]):
        if any(begin < line <= end for line in broken) and any(x.strip() for x in lines[begin:end]):
            lines[begin:end] = [""] * (end - begin)
            changed = True
    return changed


def _chunk_starts(lines: list[str]) -> list[int]:
    return sorted({0, *(i for i, line in enumerate(lines) if lexicon.DECLARATION_START.match(line))})


def _blank_starts(lines: list[str]) -> list[int]:
    return sorted({0, *(i for i, line in enumerate(lines) if line.strip() and (i == 0 or not lines[i - 1].strip()))})


def _declare(index: Index, module: nodes.Module, text: str | None) -> None:
    """Add the module's declarations, those already there (the document's own) winning."""
    lines = normalize_newlines(text).split("\n") if text is not None else None

    def first_line(span: nodes.Span) -> str:
        if lines is None or span.line > len(lines):
            return ""
        return lines[span.line - 1].strip()

    for model in module.models:
        index.decls.setdefault(model.name, Decl(model.name, "model", model.span, model.span, model.spec,
                                                model.options, first_line(model.span), model))
    for handler in module.handlers:
        index.decls.setdefault(handler.name, Decl(handler.name, "handler", handler.span,
                                                  handler.name_span or handler.span, handler.kind, handler.options,
                                                  first_line(handler.span), handler))
    for program in module.programs:
        index.decls.setdefault(program.name, Decl(program.name, "program", program.span,
                                                  program.name_span or program.span, "program", program.options,
                                                  first_line(program.span), program))


def _follow_imports(index: Index, module: nodes.Module, path: Path) -> None:
    """The declarations of the files `module` imports, transitively, within the folders the
    program may read (`index.roots`): a file outside them is never read here either."""
    roots = index.roots
    seen = {path.resolve()}
    queue = [(path.parent / imp.path).resolve() for imp in module.imports]
    index.imports = list(queue)
    while queue and len(seen) <= MAX_IMPORTED_FILES:
        file = queue.pop(0)
        if file in seen or not inside(file, roots):
            continue
        seen.add(file)
        try:
            text = read_text(file)
        except (DecompError, OSError):
            continue
        imported = tolerant_module(text, str(file))
        if imported is not None:
            _declare(index, imported, text)
            queue += [(file.parent / imp.path).resolve() for imp in imported.imports]


# ------------------------------------------------------------------ steps and their numbers
def numbered_steps(body: tuple) -> list[tuple[int | None, nodes.Step]]:
    """Every step of a program body in text order with its answer number (None for `[EOQ]`)."""
    numbers = number_steps(body)
    return [(numbers.get(step.span), step) for step in iter_steps(body)]


def example_steps(example: nodes.Example) -> list[tuple[int | None, nodes.Step]]:
    """A few-shot example's steps with their answer numbers (`[EOQ]` not counted)."""
    out, n = [], 0
    for item in example.steps:
        if item.step.is_end:
            out.append((None, item.step))
        else:
            n += 1
            out.append((n, item.step))
    return out


def available_at(program: nodes.Program, line: int) -> list[int]:
    """The answer numbers a step on `line` may read: the steps before it, not those inside an
    `if` branch the line is not in (as the checker sees it)."""
    found: list[int] = []
    stack: list[tuple[tuple, bool]] = [(program.body, True)]
    numbers = number_steps(program.body)
    while stack:
        body, visible = stack.pop()
        for stmt in body:
            if stmt.span.line >= line:
                break
            if isinstance(stmt, nodes.If):
                then_end = max((s.span.end_line for s in stmt.then), default=stmt.span.line)
                inside_if = stmt.span.line <= line <= stmt.span.end_line
                in_then = inside_if and line <= then_end
                stack.append((stmt.then, visible and in_then))
                stack.append((stmt.otherwise, visible and inside_if and not in_then))
            elif visible and stmt.span in numbers:
                found.append(numbers[stmt.span])
    return sorted(found)
