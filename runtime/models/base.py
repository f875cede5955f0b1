"""What a model backend is: an async `complete(Request) -> Completion`, and optionally
`score(prompt, continuation, soft_prompt=None)`. Transport lives here; prompt rendering lives in the handlers
and retry/concurrency policy in the scheduler (DSPy's split).

A model is an outbound `Service` of kind "model". Backends raise `TransientModelError` for
failures worth retrying (rate limits, 5xx, timeouts, garbage replies) and `ModelError` for final
ones (unknown model, bad key, context too long); both are `Failure`s of the one error hierarchy.

A plugin registers a scheme with a factory `factory(name, settings) -> Model`, or with a
`Backend`, which also checks a declaration before any model is made (`SpecCheck`) and may claim
files of its own for `decomp check` (`ModelFile`).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from decomp.dsl.errors import ModelError, TransientModelError
from decomp.dsl.answer_types import Constraint
from decomp.handlers.conversation import Message, Reply, Tool, ToolCall
from decomp.handlers.service import CURRENT_SLOT, Service, Slot
from decomp.handlers.sandbox.trust import NO_TRUST, Trust

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.base import LoadContext
    from decomp.handlers.soft_prompts import SoftPrompt

__all__ = ["Backend", "CONSTRAIN_MODES", "CURRENT_SLOT", "Completion", "Constraint", "DEFAULT_ATTEMPT_DEADLINE",
           "DEFAULT_CALL_DEADLINE", "MAX_REPLY_TOKENS", "Message", "Model", "ModelError", "ModelFile", "ModelSettings",
           "Reply", "Request", "Score", "Slot", "SpecCheck", "Tool", "ToolCall", "TransientModelError", "sendable",
           "token_count"]

#: Seconds one request may take in all, from when it leaves to the last byte of its reply
#: (`ModelSettings.attempt_deadline`), however often the server sends a little.
DEFAULT_ATTEMPT_DEADLINE = 120.0
#: Seconds one model call may take in all, its retries and their backoff included
#: (`ModelSettings.call_deadline`).
DEFAULT_CALL_DEADLINE = 300.0
#: The most tokens one reply may say it used; a count above it is a server's error, not usage.
MAX_REPLY_TOKENS = 10**9


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def sendable(text: str) -> str:
    """`text` as it can leave the process for a model: each lone surrogate (text no encoding can
    write, such as "\\ud800" from a data row or a model reply) replaced by U+FFFD, as a UTF-8
    decoder replaces bytes it cannot read. One character for one, so offsets into the text hold
    (`score` counts the continuation's tokens by offset); text without one is returned as is."""
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


#: How a backend applies a `Constraint`: "auto" (the backend's best), or one way by name (each
#: backend documents those it knows), or "none" (decode freely; the answer is still validated).
CONSTRAIN_MODES = ("auto", "grammar", "response_format", "guided", "llama", "none")


@dataclass(frozen=True, slots=True)
class Request:
    """One completion request: everything that affects the output, and nothing secret.

    `soft_prompt`: trained embeddings the model reads before the prompt (only a model whose
    `soft_prompts` is True takes one); it stands in cache keys by its file's sha256."""

    prompt: str
    max_tokens: int = 256
    temperature: float = 0.0
    stop: tuple[str, ...] = ()
    n: int = 1
    seed: int | None = None
    soft_prompt: "SoftPrompt | None" = field(default=None, compare=False)
    #: Decode under this constraint where the backend can (None: freely).
    constraint: Constraint | None = None
    #: The prompt as a conversation, for a chat model (`decomp.handlers.conversation`); None:
    #: `prompt` as one user message. Completion backends send `prompt` and ignore it.
    messages: tuple[Message, ...] | None = None
    #: Functions the model may call instead of answering (chat models only).
    tools: tuple[Tool, ...] = ()


@dataclass(frozen=True)
class ModelSettings:
    """How to reach a model, beyond its name: from `--base-url`, the environment or a
    `model NAME = "scheme:name" (option=value, ...)` declaration."""

    base_url: str | None = None
    timeout: float = 60.0  # seconds to connect, and to wait for each read of the reply
    attempt_deadline: float | None = DEFAULT_ATTEMPT_DEADLINE  # seconds per request in all (None: no limit)
    call_deadline: float | None = DEFAULT_CALL_DEADLINE  # seconds per call, retries included (None: no limit)
    api: str = "auto"  # openai: "chat", "completions" or "auto"
    transport: str = "auto"  # openai: "aiohttp", "openai" (the official client) or "auto" (aiohttp)
    options: tuple[tuple[str, object], ...] = ()
    #: What the session trusts (`Session.trust`): the modules a `fake:module:function`
    #: responder may come from. Set by the session, never by a declaration.
    trust: Trust = NO_TRUST

    def option(self, name: str, default=None):
        return dict(self.options).get(name, default)


@dataclass(frozen=True, slots=True)
class Completion:
    """A reply's texts and the tokens it used: None when unknown (the server said nothing, or
    nothing a count can be: see `token_count`)."""

    texts: tuple[str, ...]
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    cache_hits: int = 0  # how many of `texts` came from the step cache (set by the session)
    #: Why each text ended, as the server said ("stop", "length", ...); empty when unknown.
    finish_reasons: tuple[str, ...] = ()
    #: The tool calls each text came with (empty: none asked for any).
    tool_calls: tuple[tuple[ToolCall, ...], ...] = ()
    #: Of `prompt_tokens`, those the provider served from its prompt cache (None: not said).
    cached_tokens: int | None = None
    #: Of `completion_tokens`, those a reasoning model spent thinking (None: not said).
    reasoning_tokens: int | None = None

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def replies(self) -> list[Reply]:
        """Each text with the tool calls it came with."""
        calls = self.tool_calls or ((),) * len(self.texts)
        return [Reply(text, tuple(found)) for text, found in zip(self.texts, calls)]


def token_count(value: Any) -> int | None:
    """A token count a server reported, or None (unknown) for one that cannot be: missing, not
    a number (text, a boolean, a list), not finite, negative, fractional or over
    `MAX_REPLY_TOKENS`. A whole float (`12.0`) counts as its integer."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    return value if 0 <= value <= MAX_REPLY_TOKENS else None


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
    #: Whether the backend takes a soft prompt (`Request.soft_prompt`, `score(..., soft_prompt=)`):
    #: embeddings as input, which only an in-process model can read. The session refuses one
    #: for a model that says False, before any call.
    soft_prompts: ClassVar[bool] = False

    @property
    def chat(self) -> bool:
        """Whether the model reads conversations (`Request.messages`, `tools`) rather than text."""
        return False

    @property
    def takes_tools(self) -> bool:
        """Whether a request may offer the model tools (`Request.tools`)."""
        return self.chat

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

    async def score(self, prompt: str, continuation: str, soft_prompt: "SoftPrompt | None" = None) -> Score:
        """The log-likelihood of `continuation` after `prompt` (after `soft_prompt`'s embeddings,
        for a backend that takes one)."""
        raise ModelError(f"model {self.name!r} cannot score text (no log-likelihoods)")


@dataclass
class SpecCheck:
    """What a backend's check of a declared model (`model m = "scheme:NAME"`) found: the NAME to
    use (a path resolved from the program's folder, say), options the loader adds to the
    declaration's own (the backend's, never written by a user), and the problems in words, which
    the loader places at the declaration (`errors` fail the load, `warnings` do not)."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelFile:
    """A file of a backend's own (a fake model's answers) as `decomp check FILE` read it: what it
    is, the key `--json` prints its summary under, the summary, and what it holds in words."""

    what: str
    key: str
    summary: dict[str, Any]
    counts: str


class Backend:
    """A model scheme as a plugin may register it (`register_models`: `register(scheme, backend)`)
    when a plain `factory(name, settings) -> Model` is not enough: a backend checks a declaration
    before any model is made (`check`) and may claim files of its own for `decomp check`
    (`check_file`). Calling it makes the model, as a factory does; the loader and `decomp check`
    ask every registered backend the same way, whichever plugin registered it."""

    def __call__(self, name: str, settings: ModelSettings | None = None) -> Model:  # pragma: no cover - interface
        raise NotImplementedError

    def check(self, name: str, ctx: LoadContext) -> SpecCheck:
        """The declared `scheme:name` of a file loaded in `ctx` (its folder `ctx.base_dir`, the
        program's allowed folders `ctx.roots`, the session's `ctx.trust`, a check's
        `ctx.trusted_folders`), checked; by default taken as written."""
        return SpecCheck(name)

    def check_file(self, path: Path, text: str) -> ModelFile | None:
        """`path` (its content `text`) checked as a file of this backend; None when it is none of
        this backend's. A file that is this backend's but wrong raises a `DecompError` naming
        every problem's place."""
        return None
