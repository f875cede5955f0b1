"""Outbound services: anything a handler reaches over a connection (a model endpoint, a search
engine, an HTTP tool).

A service names the `endpoint` whose concurrency limit its calls count against (two models on
one server share it) and the `kind` of call it makes (budgets and usage count calls per kind).
Handlers never call a service directly: they pass it to `Call.request` (or `Call.complete` for
models), and the engine gives every call the scheduler's slots, rate limits and retries, the
budgets, the step cache, a trace node and redaction of the service's secrets.

A service raises `TransientServiceError` for failures worth retrying and `ServiceError` (or a
subclass, such as `ModelError`) for final ones. A service whose requests may hang bounds each
attempt itself (a total deadline, not only a per-read timeout) and may set `call_deadline`,
which the scheduler holds over all the attempts of one call together.
"""
from __future__ import annotations

import contextvars
from typing import Awaitable, Callable, ClassVar

from decomp.dsl.errors import ServiceError


class Service:
    """Base of outbound services (model backends subclass it too)."""

    #: What users wrote to name it (`openai:gpt-4o-mini`, `elasticsearch:http://...`).
    name: str = "service"
    #: The server whose concurrency limit calls count against.
    endpoint: str = "service"
    #: The kind of call, for budgets, usage and trace nodes ("model", "search", ...).
    kind: ClassVar[str] = "service"
    #: The error raised when the last retry failed.
    error: ClassVar[type[ServiceError]] = ServiceError
    #: True when the service takes and gives back its scheduler slot itself (see `Slot`).
    defers_slot: bool = False
    #: Seconds one call may take in all, its retries and the waits between them included,
    #: counted from when its first request leaves (its slot taken); None: no limit. The
    #: scheduler holds it, and the call then fails with the last attempt's error.
    call_deadline: float | None = None

    def deadline_hint(self, deadline: str) -> str:
        """How to raise this service's `deadline` ("call" or "attempt"), said in its errors."""
        return f"raise the {deadline} deadline of {self.name}"

    def secrets(self) -> tuple[str, ...]:
        """Texts (API keys, passwords) the engine removes from every message it records."""
        return ()

    async def aclose(self) -> None:
        """Release connections; the session calls it when a run ends."""


class Slot:
    """A scheduler slot held while a request is at the server.

    A service that can tell when its request leaves and when the reply comes back (an HTTP
    client's event hooks) sets `defers_slot = True` and calls `acquire()` just before sending
    and `release()` as soon as the reply's headers arrive: building the request and reading the
    reply then happen outside the slot, and the limit counts exactly what the server is serving.
    Both are idempotent; the scheduler releases a slot the service never released.
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
