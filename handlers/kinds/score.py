"""Kind `score`: the log-likelihood of the sub-query text under a model.

    handler fluency = score(prefix="Steps to make tea:\n", per_token=true)
    QS: [fluency] #2        -> a float (natural log; higher is more likely)

`prefix` is the text the continuation follows (a sandboxed Jinja template when it contains
`{{`, seeing the named inputs). Needs a model that offers log-likelihoods: the local model, or
an OpenAI-compatible completions endpoint that echoes prompt logprobs. `soft_prompt=FILE` puts a
trained soft prompt before the prefix (local model only: see
`decomp.handlers.kinds.soft_prompt_option`).
"""
from __future__ import annotations

from typing import Any

from jinja2 import TemplateError

from decomp.dsl.errors import CheckError, CheckWarning, HandlerError
from decomp.handlers.base import Call, Handler, Options
from decomp.handlers.kinds.prompt import template_warnings
from decomp.handlers.kinds.soft_prompt_option import handler_soft_prompt, soft_prompt_problems, soft_prompt_warnings
from decomp.handlers.sandbox.templates import JINJA, RENDER_GRACE


class ScoreOptions(Options):
    prefix: str = ""
    model: str | None = None
    per_token: bool = False
    soft_prompt: str | None = None


class ScoreHandler(Handler):
    """Log-likelihood (sum, or mean per token) of the sub-query after `prefix`."""

    kind = "score"

    Options = ScoreOptions
    cacheable = False  # the engine caches the score itself, by model and text
    reads_inputs = True  # the prefix template sees them

    def check(self) -> list[CheckError]:
        return soft_prompt_problems(self)

    def warnings(self) -> list[CheckWarning]:
        soft = soft_prompt_warnings(self, self.options.prefix)
        return (template_warnings(self, self.options.prefix, "prefix") if "{{" in self.options.prefix else []) + soft

    async def run(self, call: Call) -> Any:
        prefix = await self.offload(call, self._prefix, call, what="the prefix template", grace=RENDER_GRACE) \
            if "{{" in self.options.prefix else self.options.prefix
        logprob, tokens = await call.score(prefix, call.query, model=self.options.model,
                                           soft_prompt=handler_soft_prompt(self))
        return logprob / max(1, tokens) if self.options.per_token else logprob

    def _prefix(self, call: Call) -> str:
        text = self.options.prefix
        if "{{" not in text:
            return text
        try:
            return JINJA.from_string(text).render_within(self.time_limit(call), **call.inputs, query=call.query)
        except TemplateError as err:  # TemplateLimitError too: a render that would build too much
            raise HandlerError(f"prefix template: {err}", call.span) from err
