"""The `soft_prompt=FILE` option of the `prompt` and `score` kinds: a trained soft prompt
(`decomp.handlers.soft_prompts`) that the local model reads before the rendered prompt.

The file resolves like `file=` (from the handler's folder, never outside the program's allowed
folders) and is read once per handler, by `decomp check` / load (`soft_prompt_problems`), or at
its first call. A handler whose model is known to be an endpoint (its `model=`, or the module's
`model default`, declares a scheme other than `local:`) is a check error: only the local model
takes embeddings as input. While `decomp tune` loads the program whose soft prompt it trains
(`pending_soft_prompts`), a file not written yet is no error: it is what the command writes.
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Iterator

import hashlib

from decomp.dsl.errors import CheckError, CheckWarning, HandlerError
from decomp.handlers.base import Handler
from decomp.handlers.soft_prompts import SoftPrompt, SoftPromptError, read_soft_prompt
from decomp.handlers.sandbox.trust import PathRefused

__all__ = ["endpoint_spec", "handler_soft_prompt", "pending_soft_prompts", "soft_prompt_problems",
           "soft_prompt_warnings"]

_READ = "_soft_prompt_read"
_PENDING: ContextVar[bool] = ContextVar("decomp_pending_soft_prompts", default=False)


@contextlib.contextmanager
def pending_soft_prompts() -> Iterator[None]:
    """Within: a `soft_prompt=` file that does not exist yet passes the check (its path must
    still lie in the allowed folders); one that exists must still be a soft prompt."""
    token = _PENDING.set(True)
    try:
        yield
    finally:
        _PENDING.reset(token)


def soft_prompt_problems(handler: Handler) -> list[CheckError]:
    """The check of `soft_prompt=`: a file in the allowed folders that is a soft prompt, for a
    handler whose model is not known to be an endpoint; each error at the option. Keeps the
    soft prompt read on the handler (see `handler_soft_prompt`)."""
    if not getattr(handler.options, "soft_prompt", None):
        return []
    span = handler.error_span("soft_prompt")
    spec = endpoint_spec(handler)
    if spec is not None:
        return [CheckError(f"[{handler.name}] has soft_prompt= but its model is {spec!r}, an endpoint: an endpoint "
                           "model cannot take a soft prompt, only a local: model", span,
                           expected='model="local:..." (or no model=, with no endpoint as the default)')]
    try:
        if _PENDING.get() and not handler.ctx.resolve(handler.options.soft_prompt).exists():
            return []
        _read(handler)
    except (PathRefused, SoftPromptError) as err:
        return [CheckError(getattr(err, "message", None) or str(err), span)]
    return []


def soft_prompt_warnings(handler: Handler, source: str) -> list[CheckWarning]:
    """A soft prompt trained for another prompt than the handler's `source` now (its template,
    few-shot text or score prefix, edited since `decomp tune` ran), or for a handler of another
    name or kind: it still serves, but what it learned was for other text (`decomp check`)."""
    if not getattr(handler.options, "soft_prompt", None) or _READ not in handler.__dict__:
        return []
    trained = handler.__dict__[_READ].meta.get("handler") or {}
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    if trained.get("template_sha256") == digest and trained.get("kind") == handler.kind:
        return []
    what = f"[{trained.get('name')}] of {trained.get('program')}" if trained.get("name") else "another handler"
    return [CheckWarning(f"the soft prompt of [{handler.name}] was trained for another prompt than its own now "
                         f"({what}, prompt sha256 {str(trained.get('template_sha256'))[:12]})",
                         handler.error_span("soft_prompt"),
                         expected="the prompt it was trained for, or a soft prompt trained again for this one "
                                  "(decomp tune)")]


def handler_soft_prompt(handler: Handler) -> SoftPrompt | None:
    """The handler's soft prompt (None without `soft_prompt=`), read from its file once; a file
    that is missing or not a soft prompt is a `HandlerError` (a handler built without a check)."""
    if not getattr(handler.options, "soft_prompt", None):
        return None
    try:
        return _read(handler)
    except (PathRefused, SoftPromptError) as err:
        raise HandlerError(getattr(err, "message", None) or str(err), handler.error_span("soft_prompt")) from None


def _read(handler: Handler) -> SoftPrompt:
    found = handler.__dict__.get(_READ)
    if found is None:
        found = read_soft_prompt(handler.ctx.resolve(handler.options.soft_prompt))
        setattr(handler, _READ, found)
    return found


def endpoint_spec(handler: Handler) -> str | None:
    """The spec of the handler's model when it is known, before any run, to be an endpoint: its
    `model=` or the module's `model default`, through the module's model declarations, with a
    scheme other than `local`. None when it is a local model or not known here (a `--model`
    given to the run, the session's default)."""
    name = handler.options.model or handler.ctx.default_model
    if not name:
        return None
    module = handler.ctx.module
    models = getattr(module, "models", None) or {}
    spec = models.get(name, name)
    scheme, colon, _ = spec.partition(":")
    return spec if colon and scheme != "local" else None
