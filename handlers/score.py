"""Kind `score`: the log-likelihood of the sub-query text under a model.

    handler fluency = score(prefix="Steps to make tea:\n", per_token=true)
    QS: [fluency] #2        -> a float (natural log; higher is more likely)

`prefix` is the text the continuation follows (a sandboxed Jinja template when it contains
`{{`, seeing the named inputs). Needs a model that offers log-likelihoods: the local model, or
an OpenAI-compatible completions endpoint that echoes prompt logprobs.
"""
from __future__ import annotations

import time
from typing import Any

from jinja2 import TemplateError

from ..dsl.errors import HandlerError
from .base import Call, Handler, Options
from .models.base import ModelError
from .prompt import _JINJA
from .registry import handler_kind


class ScoreOptions(Options):
    prefix: str = ""
    model: str | None = None
    per_token: bool = False


@handler_kind("score")
class ScoreHandler(Handler):
    """Log-likelihood (sum, or mean per token) of the sub-query after `prefix`."""

    Options = ScoreOptions
    cacheable = False  # the session caches the score itself, by model and text

    async def run(self, call: Call) -> Any:
        model = call.session.resolve_model(self.options.model, self.ctx.default_model)
        prefix = self._prefix(call)
        node = call.trace.child("model", handler=self.name, prompt=prefix + call.query) if call.trace else None
        started = time.perf_counter()
        try:
            result = await call.session.score(model, prefix, call.query, self.name)
        except ModelError as err:
            if node:
                node.error, node.seconds = str(err), time.perf_counter() - started
            raise HandlerError(f"[{self.name}] model {model.name!r}: {err}", call.span) from err
        if node:
            node.raw_output = f"logprob {result.logprob:.4f} over {result.tokens} tokens"
            node.seconds, node.prompt_tokens = time.perf_counter() - started, result.tokens
        if self.options.per_token:
            return result.logprob / max(1, result.tokens)
        return result.logprob

    def _prefix(self, call: Call) -> str:
        text = self.options.prefix
        if "{{" not in text:
            return text
        try:
            return _JINJA.from_string(text).render(**call.inputs, query=call.query)
        except TemplateError as err:
            raise HandlerError(f"[{self.name}] prefix template: {err}", call.span) from err
