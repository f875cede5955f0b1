"""What a model backend is: an async `complete(Request) -> Completion`, and optionally
`score(prompt, continuation)`. Transport lives here; prompt rendering lives in the handlers
and retry/concurrency policy in the scheduler (DSPy's split).

A model is an outbound `Service` of kind "model". Backends raise `TransientModelError` for
failures worth retrying (rate limits, 5xx, timeouts, garbage replies) and `ModelError` for final
ones (unknown model, bad key, context too long); both are `Failure`s of the one error hierarchy.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from decomp.dsl.errors import ModelError, TransientModelError
from decomp.handlers.service import CURRENT_SLOT, Service, Slot

__all__ = ["CURRENT_SLOT", "Completion", "Model", "ModelError", "ModelSettings", "Request", "Score", "Slot",
           "TransientModelError", "sendable"]


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def sendable(text: str) -> str:
    """`text` as it can leave the process for a model: each lone surrogate (text no encoding can
    write, such as "\\ud800" from a data row or a model reply) replaced by U+FFFD, as a UTF-8
    decoder replaces bytes it cannot read. One character for one, so offsets into the text hold
    (`score` counts the continuation's tokens by offset); text without one is returned as is."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


@dataclass(frozen=True, slots=True)
class Request:
    """One completion request: everything that affects the output, and nothing secret."""

    prompt: str
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None


@dataclass(frozen=True)
class ModelSettings:
    """How to reach a model, beyond its name: from `--base-url`, the environment or a
    `model NAME = "scheme:name" (option=value, ...)` declaration."""

    base_url: str | None = None
    timeout: float = 60.0
    api: str = "auto"  # openai: "chat", "completions" or "auto"
    transport: str = "auto"  # openai: "aiohttp", "openai" (the official client) or "auto" (aiohttp)
    options: tuple[tuple[str, object], ...] = ()

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)


@dataclass(frozen=True, slots=True)
class Completion:
    texts: tuple[str, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0  # how many of `texts` came from the step cache (set by the session)

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


@dataclass(frozen=True)
class Score:
    """Log-likelihood (natural log) of a continuation given a prompt, and its token count."""

    logprob: float
    tokens: int


class Model(Service):
    """Base of model backends.

    `name` is the spec users wrote (`openai:gpt-4o-mini`); `endpoint` names the server whose
    concurrency limit the call counts against (two model names on one server share it).
    """

    name: str = "model"
    endpoint: str = "model"
    kind: ClassVar[str] = "model"
    error: ClassVar[type[ModelError]] = ModelError

    def cache_identity(self) -> str:
        """What stands for this model in the step cache's keys of its samples and scores: its
        name by default. A backend whose answers depend on more than its name (a file's content,
        a weights file) adds that here, so an edit of it misses the cache."""
        return self.name

    def named_secrets(self) -> dict[str, str]:
        """Each of `secrets()` with what it is, `{secret: label}`: the engine masks a secret that
        a reply of the model repeats as `[redacted: LABEL]` (runtime/engine/run_secrets.py). By
        default each is `a secret of NAME`; a backend that knows better says `OPENAI_API_KEY`.
        Never put the values in a repr."""
        return {secret: f"a secret of {self.name}" for secret in self.secrets()}

    async def complete(self, request: Request) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError

    async def score(self, prompt: str, continuation: str) -> Score:
        raise ModelError(f"model {self.name!r} cannot score text (no log-likelihoods)")
