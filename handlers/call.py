"""The one interface between handler kinds and the engine: the `Call` a handler receives.

Everything a kind may do goes through it: read the sub-query, the referenced values and the
named inputs; ask a model or score text; reach any other outbound service; run another
handler, one `QS:` step or a program body; open a trace child. The engine implements it
(`decomp.runtime.engine.call.EngineCall`); kinds never import the interpreter, the session,
the scheduler or the cache.

A handler reports a failure the program may handle (an executor that did not finish its task)
by returning `decomp.dsl.values.Failed(value)`: the step's answer is `value`, its outcome
failed (`ok(#n)` is false) and the row goes on.

Errors: whatever the engine raises from these methods is a `Failure` (the transient kinds
already retried) or an `Abort`; both end the row. A kind lets them pass and raises
`HandlerError` for its own failures. The engine adds the handler's name, kind and program line to the message.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from decomp.dsl.nodes import Span, Step
    from decomp.handlers.environment import Environment
    from decomp.handlers.registry import Registry
    from decomp.handlers.sandbox.offload import Limits
    from decomp.handlers.sandbox.trust import Trust
    from decomp.handlers.service import Service
    from decomp.handlers.soft_prompts import SoftPrompt
    from decomp.dsl.answer_types import Constraint
    from decomp.handlers.conversation import Message, Reply, Tool


class Call:
    """One invocation of a handler.

    query:  the sub-query after substitution of `#n` / `#name` references
    values: the values those references stood for, in order of appearance
    inputs: named inputs in scope (dataset row fields, program parameters)
    stack:  names of the programs and decomposers active above this call (recursion depth)
    span:   where the step that made this call is written
    """

    __slots__ = ()

    query: str
    values: tuple[Any, ...]
    inputs: Mapping[str, Any]
    stack: tuple[str, ...]
    span: "Span | None"

    # ---- models
    async def complete(self, prompt: str, *, model: str | None = None, stop: tuple[str, ...] = (),
                       max_tokens: int = 256, temperature: float = 0.0, n: int = 1,
                       soft_prompt: "SoftPrompt | None" = None, constraint: "Constraint | None" = None,
                       messages: "tuple[Message, ...] | None" = None) -> list[str]:
        """`n` completions of `prompt` from the handler's model (`model=`: a declared name or a
        spec; None: the module's or session's default), cut at `stop`. With `soft_prompt`, the
        model reads its embeddings before the prompt (a model that cannot is a `ModelError`).
        With `constraint`, the model decodes under it where its backend can (see
        `decomp.runtime.models.base.Constraint`); the texts still need validating. `messages`:
        the same prompt as a conversation (`decomp.handlers.conversation`), which a chat model
        is sent instead of the text (None: the text as one user message)."""
        raise NotImplementedError

    async def converse(self, prompt: str, messages: "tuple[Message, ...] | None", *, tools: "tuple[Tool, ...]" = (),
                       model: str | None = None, stop: tuple[str, ...] = (), max_tokens: int = 256,
                       temperature: float = 0.0, n: int = 1,
                       constraint: "Constraint | None" = None) -> "list[Reply]":
        """`complete`, with the model offered `tools` (a chat model only, else a `ModelError`):
        each sample's text and the tool calls it asks for."""
        raise NotImplementedError

    async def score(self, prefix: str, text: str, *, model: str | None = None,
                    soft_prompt: "SoftPrompt | None" = None) -> tuple[float, int]:
        """The log-likelihood of `text` after `prefix` (after `soft_prompt`'s embeddings, when
        given) and the number of tokens it spans."""
        raise NotImplementedError

    # ---- any other outbound service
    async def request(self, service: "Service", method: Callable[..., Awaitable[Any]], *args: Any,
                      what: str = "", cache: Mapping[str, Any] | None = None, tokens: float = 0) -> Any:
        """`await method(*args)` as one call of `service`: under its endpoint's slots and rate
        limits, retried on `TransientServiceError`, counted against the budgets of its kind,
        traced (`what` describes it) and, when `cache` holds everything that decides the answer,
        answered from or stored in the step cache (the result must then be JSON)."""
        raise NotImplementedError

    # ---- nested work
    async def run_handler(self, name: str, query: str, values: tuple[Any, ...] = ()) -> Any:
        """Run the handler `name` of this module on a sub-query, as a `QS:` step would."""
        raise NotImplementedError

    async def run_step(self, step: "Step", answers: Mapping[int, Any]) -> Any:
        """Run one parsed `QS:` line given the answers so far (by number)."""
        raise NotImplementedError

    async def run_program(self, body: tuple, inputs: Mapping[str, Any], *,
                          numbers: Mapping[Any, int] | None = None) -> Any:
        """Run a program body (its statements) of this handler's file with these named inputs
        added; its answer. `numbers` (`decomp.dsl.walks.number_steps(body)`, which a kind may
        keep) numbers its steps; None: numbered here."""
        raise NotImplementedError

    async def delegate(self, handler: Any, stack: tuple[str, ...] | None = None) -> Any:
        """Run another handler object (a `Handler` this one holds, such as the program of
        another file that `Handler.link` gave it) on this very call: the same query, values,
        inputs and trace node, with `stack` in place of this call's."""
        raise NotImplementedError

    def environment(self, handler: str, *, fresh: bool = False) -> "Environment":
        """The row's live instance of the environment that the `environment` handler `handler`
        of this module declares: made from its factory with the row's fields on first use (and
        anew when `fresh`), shared by every step of the row, never by two rows."""
        raise NotImplementedError

    def child(self, kind: str, **fields: Any) -> Any:
        """A new trace node under this call's (fields: label, query, prompt, raw_output, answer, ...)."""
        raise NotImplementedError

    # ---- limits and lookups
    @property
    def max_steps(self) -> int | None:
        """The session's bound on decomposer steps, if any."""
        raise NotImplementedError

    @property
    def registry(self) -> "Registry":
        """The registry of this run's handler kinds and Python functions."""
        raise NotImplementedError

    @property
    def trust(self) -> "Trust":
        """What the session running this call lets its programs reach beyond their folders (the
        modules trusted, the folders allowed: `decomp.handlers.sandbox.trust.Trust`)."""
        raise NotImplementedError

    @property
    def limits(self) -> "Limits":
        """What the session running this call lets it use: the time and memory a call whose
        handler sets none may take, the size of an answer made in a worker process, and whether
        user Python runs in worker processes (`decomp.handlers.sandbox.offload.Limits`)."""
        raise NotImplementedError
