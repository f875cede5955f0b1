"""Shared by the model-backed kinds (prompt, decomposer): reading and checking few-shot examples."""
from __future__ import annotations

from decomp.dsl import nodes
from decomp.dsl.errors import CheckError, DecompError
from decomp.dsl.parser import parse_fewshot, read_fewshot
from decomp.handlers.base import Handler


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
        return parse_fewshot("\n" * (decl.value.span.line - 1) + inline, decl.value.span.file)
    return None


def check_file(handler: Handler, option: str = "file") -> list[CheckError]:
    """A missing prompt file is a check error at the option's position."""
    path = getattr(handler.options, option, None)
    try:
        missing = bool(path) and not handler.ctx.resolve(path).is_file()
    except (OSError, ValueError):
        missing = True
    if missing:
        return [CheckError(f"prompt file not found: {handler.ctx.resolve(path)}", handler.error_span(option))]
    return []


def fewshot_error(handler: Handler, err: Exception) -> list[CheckError]:
    if isinstance(err, DecompError):
        return [CheckError(f"in the examples of [{handler.name}]: {err.message}", err.span,
                           expected=err.expected, line_text=err.line_text)]
    return [CheckError(f"cannot read the examples of [{handler.name}]: {err}", handler.error_span("file"))]

