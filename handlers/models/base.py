"""What a model backend is: an async `complete(Request) -> Completion`, and optionally
`score(prompt, continuation)`. Transport lives here; prompt rendering lives in the handlers
and retry/concurrency policy in the scheduler (DSPy's split).

Backends raise `TransientModelError` for failures worth retrying (rate limits, 5xx, timeouts,
garbage replies) and `ModelError` for final ones (unknown model, bad key, context too long).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Awaitable, Callable


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


class Slot:
    """A scheduler slot held while a request is at the server.

    A backend that can tell when its request leaves and when the reply comes back (an HTTP
    client's event hooks) sets `defers_slot = True` and calls `acquire()` just before sending
    and `release()` as soon as the reply's headers arrive: building the request and reading the
    reply then happen outside the slot, and the limit counts exactly what the server is serving.
    Both are idempotent; the scheduler releases a slot the backend never released.
    """

    def __init__(self, acquire: Callable[[], Awaitable[None]], release: Callable[[], None]):
        self._acquire, self._release = acquire, release
        self.held = False
        self.done = False

    async def acquire(self) -> None:
        if not self.held and not self.done:
            await self._acquire()
            self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._release()
        self.done = True


#: The slot of the request being made in this task (set by the scheduler around each attempt).
CURRENT_SLOT: contextvars.ContextVar[Slot | None] = contextvars.ContextVar("decomp_slot", default=None)


class Model:
    """Base of model backends.

    `name` is the spec users wrote (`openai:gpt-4o-mini`); `endpoint` names the server whose
    concurrency limit the call counts against (two model names on one server share it).
    """

    name: str = "model"
    endpoint: str = "model"
    #: True when the backend takes and gives back its scheduler slot itself (see `Slot`).
    defers_slot: bool = False

    async def complete(self, request: Request) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError

    async def score(self, prompt: str, continuation: str) -> Score:
        raise ModelError(f"model {self.name!r} cannot score text (no log-likelihoods)")

    async def aclose(self) -> None:
        """Release connections or weights; the session calls it at the end of a run."""


class ModelError(Exception):
    """A model could not answer (unknown spec, unreachable endpoint, no scripted answer...)."""


class TransientModelError(ModelError):
    """A failure worth retrying; `retry_after` is the server's hint in seconds, if it gave one."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after
