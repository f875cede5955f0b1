"""Shared by the model-backed kinds (prompt, decomposer): reading and checking few-shot examples."""
from __future__ import annotations

import re

from decomp.dsl import nodes
from decomp.dsl.errors import CheckError, DecompError, Diagnostics
from decomp.dsl.parser import not_read, parse_fewshot, read_fewshot
from decomp.handlers.base import Handler
from decomp.handlers.sandbox.trust import PathRefused


def load_fewshot(handler: Handler) -> nodes.FewShot | None:
    """The handler's examples from `file=` or inline `examples=`/`text=`; None when it has none."""
    opts = handler.options
    path = getattr(opts, "file", None)
    if path:
        return read_fewshot(handler.ctx.resolve(path))
    option = "examples" if getattr(opts, "examples", None) else "text"
    inline = getattr(opts, option, None)
    if inline:
        decl = handler.decl.option(option) if handler.decl is not None else None
        if decl is None:
            return parse_fewshot(inline, f"<{handler.name}>")
        # parse in place: errors then point at the lines of the .decomp file
        return parse_fewshot(inline, decl.value.span.file, line=decl.value.span.line)
    return None


def check_file(handler: Handler, option: str = "file") -> list[CheckError]:
    """A missing prompt file, one that is no regular file (a FIFO, a device), or one outside the
    program's allowed folders, is a check error at the option's position."""
    path = getattr(handler.options, option, None)
    if not path:
        return []
    try:
        found = handler.ctx.resolve(path)
    except PathRefused as err:  # outside the program's folders: named as written, never read
        return [CheckError(err.message, handler.error_span(option))]
    try:
        missing = not found.is_file()
    except (OSError, ValueError):
        missing = True
    if missing:
        return [CheckError(not_read(found, "prompt file"), handler.error_span(option))]
    return []


def fewshot_error(handler: Handler, err: Exception) -> list[CheckError]:
    if isinstance(err, Diagnostics):  # each problem of the file at its own line
        return [e for part in err.errors for e in fewshot_error(handler, part)]
    if isinstance(err, DecompError):
        return [CheckError(f"in the examples of [{handler.name}]: {err.message}", err.span,
                           expected=err.expected, line_text=err.line_text)]
    return [CheckError(f"cannot read the examples of [{handler.name}]: {err}", handler.error_span("file"))]



_WORD = re.compile(r"\w+")


def nearest_examples(examples: tuple[nodes.Example, ...], question: str, k: int) -> list[nodes.Example]:
    """The `k` examples whose questions share the most words with `question` (Jaccard overlap of
    lower-cased word sets; ties keep file order), ordered least to most similar: a small model
    copies the example just before the question most, so the closest one goes last."""
    wanted = set(_WORD.findall(question.lower()))

    def overlap(example: nodes.Example) -> float:
        words = set(_WORD.findall((example.question or "").lower()))
        return len(words & wanted) / len(words | wanted) if words or wanted else 0.0

    ranked = sorted(range(len(examples)), key=lambda i: (-overlap(examples[i]), i))[:k]
    return [examples[i] for i in reversed(ranked)]


def examples_text(examples: list[nodes.Example]) -> str:
    """The examples as written in their file, blank-line separated, ending in a blank line."""
    blocks = ["\n".join(e.lines).strip("\n") for e in examples]
    return "".join(block + "\n\n" for block in blocks if block.strip())
