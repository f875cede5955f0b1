"""The engine's side of the handler interface: `EngineCall` implements `decomp.handlers.call.Call`.

Every outbound call a handler makes (a completion, a score, a search, an HTTP tool) goes
through the session (step cache, budgets, scheduler) and gets one trace node, with the
service's secrets taken out of any error it records, and its time: `seconds` in all and, of
them, the time `queued` for a slot (`decomp.dsl.waits.Waits`), which counts for the
handler call's queue time too.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, Protocol

from decomp.dsl.errors import DecompError, HandlerError, InternalError, RunError
from decomp.dsl.walks import number_steps
from decomp.handlers.call import Call
from decomp.handlers.environment import Environment
from decomp.dsl.waits import Waits, counting_waits
from decomp.handlers.kinds.environment import EnvironmentHandler
from decomp.handlers.registry import Registry
from decomp.handlers.service import Service
from decomp.handlers.sandbox.offload import Limits
from decomp.handlers.sandbox.trust import Trust
from decomp.runtime.engine.budgets import current_row
from decomp.runtime.engine.containment import run_kind
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.models.base import Constraint, Message, Reply, Request, Tool

if TYPE_CHECKING:  # pragma: no cover
    from decomp.dsl.nodes import Span, Step
    from decomp.handlers.base import Handler
    from decomp.handlers.soft_prompts import SoftPrompt


class Runner(Protocol):
    """What runs nested work for a call: the interpreter (`decomp.runtime.engine.interpreter.RUNNER`),
    handed to the session, which every `EngineCall` holds."""

    async def call_handler(self, name: str, query: str, values: tuple, scope: "Scope", span, trace) -> Any: ...

    async def run_step(self, step, answers: Mapping[int, Any], scope: "Scope", trace) -> Any: ...

    async def run_program(self, body: tuple, numbers: Mapping[Any, int], scope: "Scope", trace) -> Any: ...


@dataclass(frozen=True)
class Scope:
    """What running code sees: the session (`Session`, which holds the `runner`), the module's
    handlers (a `LoadedModule`), named inputs, the call stack."""

    session: Any
    module: Any
    inputs: Mapping[str, Any] = field(default_factory=dict)
    stack: tuple[str, ...] = ()


class EngineCall(Call):
    """One handler invocation, with the session and trace node it runs under."""

    __slots__ = ("query", "values", "inputs", "stack", "span", "session", "handler", "trace")

    def __init__(self, query: str, values: tuple, inputs: Mapping[str, Any], stack: tuple[str, ...],
                 span: "Span | None", session: Any, handler: "Handler", trace: TraceNode):
        self.query, self.values, self.inputs, self.stack, self.span = query, values, inputs, stack, span
        self.session, self.handler, self.trace = session, handler, trace

    def __repr__(self) -> str:
        return f"EngineCall([{self.handler.name}] {self.query[:60]!r})"

    @property
    def scope(self) -> Scope:
        """The scope nested work runs in: the handler's own module, this call's inputs and stack."""
        return Scope(self.session, self.handler.ctx.module, self.inputs, self.stack)

    # ---- models
    async def complete(self, prompt: str, *, model: str | None = None, stop: tuple[str, ...] = (),
                       max_tokens: int = 256, temperature: float = 0.0, n: int = 1,
                       soft_prompt: "SoftPrompt | None" = None, constraint: Constraint | None = None,
                       messages: tuple[Message, ...] | None = None) -> list[str]:
        request = Request(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, n=n,
                          soft_prompt=soft_prompt, constraint=constraint, messages=messages)
        return (await self._ask(request, model))[0]

    async def converse(self, prompt: str, messages: tuple[Message, ...] | None, *, tools: tuple[Tool, ...] = (),
                       model: str | None = None, stop: tuple[str, ...] = (), max_tokens: int = 256,
                       temperature: float = 0.0, n: int = 1, constraint: Constraint | None = None) -> list[Reply]:
        request = Request(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, n=n,
                          constraint=constraint, messages=messages, tools=tools)
        texts, calls = await self._ask(request, model)
        return [Reply(text, found) for text, found in zip(texts, calls or ((),) * len(texts))]

    async def _ask(self, request: Request, model: str | None) -> tuple[list[str], tuple]:
        """One request of the handler's model, traced: its texts, cut at the stop sequences, and
        the tool calls of each (empty when none asked for any)."""
        request = self.session.sampling(request, self.handler.options)  # the run's defaults where the handler sets none
        chosen = self.session.resolve_model(model, self.handler.ctx.default_model)
        node = self.trace.child("model", handler=self.handler.name, prompt=request.prompt, started=time.time())
        effective = self.session.temperature if self.session.temperature is not None else request.temperature
        chat = chosen.chat
        node.facts = {"operation": "chat" if chat else "text_completion", **_model_facts(chosen),
                      "temperature": effective, "max_tokens": request.max_tokens}
        if request.constraint is not None:
            node.facts["constraint"] = "json_schema" if request.constraint.schema is not None else "regex"
        if chat and request.messages is not None:
            node.facts["messages"] = [m.wire() for m in request.messages]
        if request.tools:
            node.facts["tools"] = [tool.name for tool in request.tools]
        started = time.perf_counter()
        try:
            with counting_waits(for_caller=True) as waits:
                completion = await self.session.complete(chosen, request, self.handler.name)
        except RunError as err:
            _failed(node, started, err, chosen, waits)
            raise
        except Exception as err:
            raise _internal(node, started, err, chosen, waits) from err
        texts = [cut(t, request.stop) for t in completion.texts]
        node.raw_output = texts[0] if len(texts) == 1 else "\n---\n".join(texts)
        _timed(node, started, waits)
        node.prompt_tokens, node.completion_tokens = completion.prompt_tokens, completion.completion_tokens
        node.cache_hit = completion.cache_hits == len(texts)
        node.facts["finish_reasons"] = list(completion.finish_reasons) or None
        if completion.cached_tokens is not None:
            node.facts["cached_tokens"] = completion.cached_tokens
        if completion.reasoning_tokens is not None:
            node.facts["reasoning_tokens"] = completion.reasoning_tokens
        if completion.tool_calls:
            node.facts["tool_calls"] = [[call.wire() for call in found] for found in completion.tool_calls]
        return texts, completion.tool_calls

    async def score(self, prefix: str, text: str, *, model: str | None = None,
                    soft_prompt: "SoftPrompt | None" = None) -> tuple[float, int]:
        chosen = self.session.resolve_model(model, self.handler.ctx.default_model)
        node = self.trace.child("model", handler=self.handler.name, prompt=prefix + text, started=time.time(),
                                facts={"operation": "score", **_model_facts(chosen)})
        started = time.perf_counter()
        try:
            with counting_waits(for_caller=True) as waits:
                result = await self.session.score(chosen, prefix, text, self.handler.name, soft_prompt=soft_prompt)
        except RunError as err:
            _failed(node, started, err, chosen, waits)
            raise
        except Exception as err:
            raise _internal(node, started, err, chosen, waits) from err
        node.raw_output = f"logprob {result.logprob:.4f} over {result.tokens} tokens"
        _timed(node, started, waits)
        node.prompt_tokens = result.tokens
        return result.logprob, result.tokens

    # ---- any other outbound service
    async def request(self, service: Service, method: Callable[..., Awaitable[Any]], *args: Any,
                      what: str = "", cache: Mapping[str, Any] | None = None, tokens: float = 0) -> Any:
        node = self.trace.child(service.kind, handler=self.handler.name, query=what, label=service.name,
                                started=time.time())
        started = time.perf_counter()
        try:
            with counting_waits(for_caller=True) as waits:
                answer, hit = await self.session.request(service, method, args, cache=cache, tokens=tokens, what=what)
        except RunError as err:
            _failed(node, started, err, service, waits)
            raise
        except Exception as err:
            raise _internal(node, started, err, service, waits) from err
        node.answer, node.cache_hit = answer, hit
        _timed(node, started, waits)
        return answer

    # ---- nested work
    async def run_handler(self, name: str, query: str, values: tuple[Any, ...] = ()) -> Any:
        return await self.session.runner.call_handler(name, query, tuple(values), self.scope, self.span, self.trace)

    async def run_step(self, step: "Step", answers: Mapping[int, Any]) -> Any:
        return await self.session.runner.run_step(step, answers, self.scope, self.trace)

    async def run_program(self, body: tuple, inputs: Mapping[str, Any], *,
                          numbers: Mapping[Any, int] | None = None) -> Any:
        scope = Scope(self.session, self.handler.ctx.module, {**self.inputs, **inputs}, self.stack)
        numbered = numbers if numbers is not None else number_steps(body)
        return await self.session.runner.run_program(body, numbered, scope, self.trace)

    async def delegate(self, handler: "Handler", stack: tuple[str, ...] | None = None) -> Any:
        call = EngineCall(self.query, self.values, self.inputs, self.stack if stack is None else stack, self.span,
                          self.session, handler, self.trace)
        return await run_kind(handler, call)

    def environment(self, handler: str, *, fresh: bool = False) -> "Environment":
        declared = self.handler.ctx.module.handlers.get(handler) if self.handler.ctx.module else None
        if not isinstance(declared, EnvironmentHandler):
            raise HandlerError(f"[{handler}] is not an environment handler of this file",
                               expected="handler NAME = environment(name=\"...\")")
        if not self.handler.effectful:
            raise HandlerError(f"[{self.handler.name}] acts on [{handler}] but is not marked as acting on an "
                               "environment, so its answers could be replayed from the step cache",
                               expected="a kind with effects = True, or a subclass of ActsOnEnvironment")
        return current_row().environment(declared, fresh)

    def child(self, kind: str, **fields: Any) -> TraceNode:
        return self.trace.child(kind, **fields)

    # ---- limits and lookups
    @property
    def max_steps(self) -> int | None:
        return self.session.max_steps

    @property
    def registry(self) -> Registry:
        return self.session.registry

    @property
    def trust(self) -> Trust:
        return self.session.trust

    @property
    def limits(self) -> Limits:
        return self.session.limits


def _model_facts(model: Service) -> dict:
    """A model's name as its provider knows it (`gpt-4o` of `openai:gpt-4o`) and the provider,
    the scheme of its spec (openai, local, fake, ...)."""
    name = str(getattr(model, "name", "") or "")
    provider, _, rest = name.partition(":")
    return {"model": rest, "provider": provider} if rest else {"model": name or None, "provider": None}


def _timed(node: TraceNode, started: float, waits: Waits) -> None:
    """An outbound call's time on its node: its seconds since `started`, and of them those its
    `waits` cover (its queue time)."""
    node.seconds, node.queued = time.perf_counter() - started, waits.seconds


def _failed(node: TraceNode, started: float, err: RunError, service: Service, waits: Waits) -> None:
    """Record a failed outbound call on its node, with the service's secrets taken out."""
    redact(err, service.secrets())
    node.error = str(err)
    _timed(node, started, waits)


def _internal(node: TraceNode, started: float, err: Exception, service: Service, waits: Waits) -> InternalError:
    """A service's own exception (not a `RunError`: a bug in its backend) as the `InternalError`
    the interpreter would make of it, recorded on the node with the service's secrets taken out
    (the interpreter, which words it otherwise, does not know the service)."""
    internal = InternalError.of(err)
    _failed(node, started, internal, service, waits)
    return internal


def named(err: Exception, handler: "Handler", span: "Span | None") -> DecompError:
    """`err` as it leaves a call of `handler`: a `RunError` named after the handler (unless an
    inner call named it first), another `DecompError` as it is, any other exception (a bug) an
    `InternalError` named after the handler. Raise the result `from err` when it is not `err`."""
    if isinstance(err, RunError):
        return err.locate(handler.name, handler.kind, span)
    if isinstance(err, DecompError):
        return err
    return InternalError.of(err).locate(handler.name, handler.kind, span)


def redact(err: RunError, secrets: tuple[str, ...]) -> None:
    """Take every secret out of an error's message (in place)."""
    for secret in secrets:
        if secret and secret in err.message:
            err.message = err.message.replace(secret, "***")
            err.args = (err.message,)


def cut(text: str, stop: tuple[str, ...]) -> str:
    """Apply stop sequences ourselves too: not every backend honours them."""
    end = len(text)
    for s in stop:
        found = text.find(s)
        if s and found != -1:
            end = min(end, found)
    return text[:end]

