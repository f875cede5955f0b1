"""What a model backend is: an async `complete(Request) -> Completion`, nothing more.

Prompt rendering lives in the handlers; transport lives here (DSPy's split).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One completion request: everything that affects the output, and nothing secret."""

    prompt: str
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    n: int = 1


@dataclass(frozen=True)
class Completion:
    texts: tuple[str, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


class Model:
    """Base of model backends."""

    name: str = "model"

    async def complete(self, request: Request) -> Completion:  # pragma: no cover - interface
        raise NotImplementedError


class ModelError(Exception):
    """A model could not answer (unknown spec, unreachable endpoint, no scripted answer...)."""
