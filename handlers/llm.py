"""Shared by the model-backed kinds (prompt, decomposer): few-shot loading and one model call."""
from __future__ import annotations

import time

from ..dsl import ast
from ..dsl.errors import CheckError, DecompError, HandlerError
from ..dsl.parser import parse_fewshot, read_fewshot
from .base import Call, Handler
from .models.base import ModelError, Request


def load_fewshot(handler: Handler) -> ast.FewShot | None:
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


async def ask(handler: Handler, call: Call, prompt: str, *, stop: tuple[str, ...], max_tokens: int,
              temperature: float = 0.0, n: int = 1) -> list[str]:
    """Send one request to the handler's model; record prompt and raw output in the trace."""
    model = call.session.resolve_model(getattr(handler.options, "model", None), handler.ctx.default_model)
    node = call.trace.child("model", handler=handler.name, prompt=prompt) if call.trace else None
    request = Request(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, n=n)
    started = time.perf_counter()
    try:
        completion = await call.session.complete(model, request, handler.name)
    except ModelError as err:
        if node:
            node.error = str(err)
            node.seconds = time.perf_counter() - started
        raise HandlerError(f"[{handler.name}] model {model.name!r}: {err}", call.span) from err
    texts = [_cut(t, stop) for t in completion.texts]
    if node:
        node.raw_output = texts[0] if len(texts) == 1 else "\n---\n".join(texts)
        node.seconds = time.perf_counter() - started
        node.prompt_tokens, node.completion_tokens = completion.prompt_tokens, completion.completion_tokens
        node.cache_hit = completion.cache_hits == len(texts)
    return texts


def _cut(text: str, stop: tuple[str, ...]) -> str:
    """Apply stop sequences ourselves too: not every backend honours them."""
    cut = len(text)
    for s in stop:
        found = text.find(s)
        if s and found != -1:
            cut = min(cut, found)
    return text[:cut]


def fewshot_error(handler: Handler, err: Exception) -> list[CheckError]:
    if isinstance(err, DecompError):
        return [CheckError(f"in the examples of [{handler.name}]: {err.message}", err.span,
                           expected=err.expected, line_text=err.line_text)]
    return [CheckError(f"cannot read the examples of [{handler.name}]: {err}", handler.error_span("file"))]

