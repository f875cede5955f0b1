"""The run's own secrets, masked in what its models say.

A model that repeats its API key (a careless proxy, a prompt injection asking for it) must not
get it into results, traces or the step cache. The session learns the secrets of every model it
makes or is given and of every service a handler calls (`Service.secrets`, labelled by
`Model.named_secrets`), and masks them in each completion as it comes back from the scheduler,
before the step cache stores it: everything downstream (cache, trace, answers, error messages
that quote a reply) only ever sees `[redacted: LABEL]`. A cache hit is masked too (an entry
written before a secret was known, or by an older decomp). Secrets shorter than
`decomp.dsl.redact.MIN_MASKED` characters are not masked; a secret only partly repeated is not
either.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

from decomp.dsl.redact import SecretMask
from decomp.handlers.service import Service
from decomp.runtime.models.base import Completion, Model, ToolCall


def labelled(service: Service) -> dict[str, str]:
    """`{secret: label}` of a service: a model's `named_secrets`, else each of its `secrets()` as
    `a secret of NAME`."""
    if isinstance(service, Model):
        return service.named_secrets()
    return {secret: f"a secret of {service.name}" for secret in service.secrets()}


class RunSecrets:
    """The secrets of the models and services a session has used, and the mask that hides them."""

    __slots__ = ("_mask", "_seen")

    def __init__(self) -> None:
        self._mask = SecretMask()
        self._seen: dict[int, Service] = {}  # held, so that an id is never reused by another service

    def learn(self, service: Service) -> None:
        """Add the secrets of `service` (once per service)."""
        if id(service) not in self._seen:
            self._seen[id(service)] = service
            self._mask.add(labelled(service))

    def mask(self, text: str) -> str:
        """`text` with every secret learnt so far as `[redacted: LABEL]`."""
        return self._mask(text)

    def mask_all(self, texts: Iterable[str]) -> tuple[str, ...]:
        return tuple(self._mask(text) for text in texts)

    def masked(self, completion: Completion) -> Completion:
        """`completion` with its texts and its tool calls' arguments masked (the same object
        when none holds a secret)."""
        texts = self.mask_all(completion.texts)
        calls = tuple(self.mask_calls(found) for found in completion.tool_calls)
        if texts == completion.texts and calls == completion.tool_calls:
            return completion
        return dataclasses.replace(completion, texts=texts, tool_calls=calls)

    def mask_calls(self, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
        """Tool calls with every secret taken out of their arguments (and names)."""
        return tuple(ToolCall(c.id, self._mask(c.name), self._mask(c.arguments)) for c in calls)

    def __len__(self) -> int:
        return len(self._mask)

    def __repr__(self) -> str:
        return f"RunSecrets({len(self._mask)} secrets of {len(self._seen)} services)"
