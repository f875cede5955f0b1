"""Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama, TGI):
`--model openai:NAME [--base-url URL]`, or `model NAME = "openai:MODEL" (transport="openai", ...)`.

The request goes out through one of two transports (runtime/models/openai_transport.py):
`aiohttp` (the default, `transport="auto"`), a lean client of its own, or `openai`, the
official client's low-level post. Both keep one connection pool per model and event loop, send
the same JSON, never retry (retry policy lives in the scheduler: each call is one attempt) and
report failures the same way, which this module maps to `TransientModelError` (429, 5xx,
timeouts, dropped connections, malformed replies: not JSON, nested too deep to read, without
choices) or `ModelError`
(bad key, unknown model, prompt too long, other 4xx, and an endpoint that cannot be reached at
all: no such host name, connection refused, a TLS or certificate error, a base URL that cannot
be requested), with the same words.

Deadlines: `timeout` bounds the connect and each read of the reply; `attempt_deadline` bounds
each request in all, from when it leaves (its scheduler slot taken) to its reply's last byte, so
a server that trickles a byte now and then, or sends headers and hangs, fails that attempt in
time (retried: a `TransientModelError` naming the deadline); `call_deadline` bounds one call's
attempts together, retries and backoff included (the scheduler holds it, `Service.call_deadline`).
Token counts in a reply's `usage` that cannot be counts (negative, not numbers, booleans, not
finite, over `MAX_REPLY_TOKENS`) are None, unknown (`token_count`), never charged.

The API key comes from OPENAI_API_KEY only and is never part of a name, repr or message.
Credentials in the base URL: user-info (`http://user:password@host/v1`) is sent as HTTP Basic
auth when no OPENAI_API_KEY is set, and dropped when one is (the key's `Bearer` wins); a query
string (`?api-key=...`) goes on every request, after the path (see openai_transport.py).

APIs (`api=` on the model, `--api` on the command line): "chat" (`/chat/completions`),
"completions" (`/completions`) or "auto": chat against api.openai.com, completions against any
other base URL until a refusal says otherwise. Under "auto", before any request has been
answered, a refusal that points to the other API (OpenAI's 404 "This is a chat model and thus
not supported in the v1/completions endpoint...", "... not a chat model ...", a missing chat
template, a route the server does not have) tries the other API once; when that one answers,
the model uses it from then on and says so once through `on_api` (the session prints it and a
run directory records it, so a resume starts on it). A request that offers tools settles
"auto" on chat. Once a request has been answered, the API never changes; a refusal that points
elsewhere then, or under a given API, says what to pass (`--api chat`).

On the chat API a request's `messages` (the prompt as a conversation: system, user and
assistant turns, see decomp.handlers.conversation) are sent as they are; a request without
them sends its text as one user message, as before. The model option `conversation=false`
sends the text as one user message always (but a request with tools). `tools` go as OpenAI's
function tools and the reply's `tool_calls` come back on the `Completion` (a malformed one is a
malformed reply). Usage's `prompt_tokens_details.cached_tokens` (prompt tokens the provider's
cache served) and `completion_tokens_details.reasoning_tokens` are read as counts.

Constrained decoding: a request's `Constraint` (a JSON Schema or a regex the reply must match)
goes out as the fields the model option `constrain` names (`model m = "openai:NAME"
(constrain="guided")`); an unknown value is refused when the model is made.

    "auto" (default)   chat API: `response_format` for a schema, nothing for a regex (OpenAI has
                       no regex). Completions API: against api.openai.com nothing (it has no such
                       fields); against any other server both "guided" and "llama" below (each
                       server ignores the other's fields).
    "response_format"  `response_format: {"type": "json_schema", "json_schema": {"name": NAME,
                       "schema": SCHEMA, "strict": true}}` for a schema (OpenAI's structured
                       outputs; vLLM and llama.cpp's server read it too), nothing for a regex.
    "guided"           vLLM's fields: `guided_json` / `guided_regex` (vLLM before 0.12) and
                       `structured_outputs: {"json": SCHEMA}` / `{"regex": REGEX}` (0.10.2 on;
                       the guided_* fields were removed in 0.12), on either API.
    "llama"            llama.cpp's server: `json_schema: SCHEMA` for a schema. A regex sends
                       nothing: its `grammar` field takes GBNF, and no library converts a regex
                       to GBNF reliably (llama.cpp's converter is a partial, private one).
    "none"             nothing, ever: the reply is decoded freely (and still validated).

NAME is the constraint's name with characters OpenAI refuses replaced by `_` (at most 64). A
server that refuses a constraint field (a 400 or 422 naming it) fails the call with a final
`ModelError` that names the field and says to set `constrain="none"` on the model.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import re
import time
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from decomp.dsl.redact import redact_url, url_secrets
from decomp.handlers.plugins import hookimpl
from decomp.runtime.models.base import (
    CONSTRAIN_MODES,
    CURRENT_SLOT,
    Completion,
    Constraint,
    Message,
    Model,
    ModelError,
    ModelSettings,
    Request,
    Score,
    Slot,
    ToolCall,
    TransientModelError,
    sendable,
    token_count,
)
from decomp.runtime.models.openai_transport import (
    PLACEHOLDER_KEY,
    TRANSPORTS,
    ClientFailure,
    ConnectionFailure,
    InvalidEndpoint,
    MalformedReply,
    Secret,
    StatusFailure,
    connect_failure,
    make_transport,
)

if TYPE_CHECKING:  # pragma: no cover
    from decomp.handlers.soft_prompts import SoftPrompt

DEFAULT_ENDPOINT = "api.openai.com"
APIS = ("auto", "chat", "completions")
#: The `constrain=` modes this backend knows (the module docstring); "grammar" is the local model's.
CONSTRAIN = tuple(mode for mode in CONSTRAIN_MODES if mode != "grammar")
#: The request fields a constraint may add, as a server that refuses one names it.
CONSTRAINT_FIELDS = ("response_format", "structured_outputs", "guided_json", "guided_regex", "json_schema")
_TOO_LONG = re.compile(r"context|too long|maximum\b.*\blength|length\b.*\bmaximum", re.IGNORECASE | re.DOTALL)


class _BadRequest(ModelError):
    """A 400 that is not about the prompt's length (score() then retries with max_tokens=1)."""


class OpenAIModel(Model):
    """A model behind an OpenAI-compatible HTTP API."""

    #: The HTTP client's event hooks take the scheduler slot as the request leaves and give it
    #: back as the reply's headers arrive (see `Slot`): the slot counts only the time at the server.
    defers_slot = True

    def __init__(self, model: str, settings: ModelSettings | None = None):
        settings = settings or ModelSettings()
        if not model:
            raise ModelError("openai: name a model, e.g. openai:gpt-4o-mini")
        if settings.api not in APIS:
            raise ModelError(f"openai:{model}: api must be one of {', '.join(APIS)}, not {settings.api!r}")
        if settings.transport not in TRANSPORTS:
            raise ModelError(f"openai:{model}: transport must be one of {', '.join(TRANSPORTS)}, "
                             f"not {settings.transport!r}")
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = (settings.base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        self.endpoint = redact_url(self.base_url) if self.base_url else DEFAULT_ENDPOINT
        key = os.environ.get("OPENAI_API_KEY") or (PLACEHOLDER_KEY if self.base_url else None)
        if key is None:
            raise ModelError(f"{self.name}: set OPENAI_API_KEY or pass --base-url")
        self._key = Secret(key)
        self.timeout = settings.timeout
        self.attempt_deadline = _seconds(self.name, "attempt_deadline", settings.attempt_deadline)
        self.call_deadline = _seconds(self.name, "call_deadline", settings.call_deadline)
        self.api = ("completions" if self.base_url else "chat") if settings.api == "auto" else settings.api
        #: Whether the API is known to be right: given, or answered once. Until then (api="auto"),
        #: a refusal that points to the other API tries that one (`_switch`).
        self._settled = settings.api != "auto"
        #: Told (api, one line saying why) when "auto" finds the endpoint answers on the other API.
        self.on_api: Callable[[str, str], None] | None = None
        self._transport = make_transport(settings.transport, self.base_url, self._key, self.timeout)
        self.transport = self._transport.name
        self._host = _hostname(self.base_url) if self.base_url else DEFAULT_ENDPOINT
        self.constrain = _constrain_mode(self.name, settings.option("constrain", "auto"))
        #: Whether a prompt goes as its conversation on the chat API (false: its text as one
        #: user message, as before chat mapping; a request with tools always goes as one).
        self.conversation = settings.option("conversation", True)
        if not isinstance(self.conversation, bool):
            raise ModelError(f"{self.name}: conversation must be true or false, not {self.conversation!r}")
        self._ways = self._constrain_ways(self.api)
        self._score_max_tokens = 0  # raised to 1 once a server rejects 0

    @property
    def chat(self) -> bool:
        """On the chat API and sending conversations (`conversation=false`: one user message)."""
        return self.api == "chat" and self.conversation

    @property
    def takes_tools(self) -> bool:
        """On the chat API, or not yet settled on one (a request with tools then settles chat)."""
        return self.api == "chat" or not self._settled

    def cache_identity(self) -> str:
        """The name, and the `constrain` mode when it is not "auto": a reply decoded under
        another mode is another sample (keys of "auto" stay as they were)."""
        # `conversation=false` needs nothing here: its requests are keyed by their text (`chat` is false)
        return self.name if self.constrain == "auto" else f"{self.name};constrain={self.constrain}"

    def secrets(self) -> tuple[str, ...]:
        """What must never be written or shown: the API key and credentials in the base URL."""
        key = self._key.reveal()
        return ((key,) if key != PLACEHOLDER_KEY else ()) + url_secrets(self.base_url)

    def named_secrets(self) -> dict[str, str]:
        """`secrets()` with what each is: `OPENAI_API_KEY`, `base URL credentials`."""
        named = {secret: "base URL credentials" for secret in url_secrets(self.base_url)}
        key = self._key.reveal()
        return {key: "OPENAI_API_KEY", **named} if key != PLACEHOLDER_KEY else named

    def __repr__(self) -> str:
        return (f"OpenAIModel(name={self.name!r}, endpoint={self.endpoint!r}, api={self.api!r}, "
                f"transport={self.transport!r})")

    # ---- the interface
    async def complete(self, request: Request) -> Completion:
        if request.tools and self.api != "chat" and not self._settled:
            self._use("chat", "tools need the chat API")
        api = self.api
        try:
            data = await self._call(api, self._body(api, request), switch=not self._settled)
        except _WrongApi as wrong:
            api, data = await self._switch(api, request, wrong)
        self._settled = True
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        texts = tuple(self._text(choice, api) for choice in choices)
        calls = tuple(self._tool_calls(choice) for choice in choices) if api == "chat" and request.tools else ()
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        reasons = tuple(c.get("finish_reason") for c in choices if isinstance(c, dict))
        return Completion(texts, token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens")),
                          finish_reasons=reasons if all(isinstance(r, str) for r in reasons) else (),
                          tool_calls=calls if any(calls) else (),
                          cached_tokens=_detail(usage, "prompt_tokens_details", "cached_tokens"),
                          reasoning_tokens=_detail(usage, "completion_tokens_details", "reasoning_tokens"))

    def _body(self, api: str, request: Request) -> dict:
        """The JSON body of `request` on `api`."""
        kwargs = self._sampling(request)
        if api == "chat":
            given = request.messages if self.conversation or request.tools else None
            messages = given or (Message("user", request.prompt),)
            kwargs["messages"] = [_sendable_message(m) for m in messages]
            # api.openai.com's newer models take only max_completion_tokens; compatible servers know max_tokens
            kwargs["max_completion_tokens" if self.base_url is None else "max_tokens"] = request.max_tokens
            if request.tools:
                kwargs["tools"] = [tool.wire() for tool in request.tools]
        elif request.tools:
            raise ModelError(f"{self.name}: tools need the chat API, and this model uses completions; "
                             f'pass --api chat, or api="chat" on the model')
        else:
            kwargs.update(prompt=sendable(request.prompt), max_tokens=request.max_tokens)
        if request.constraint is not None:
            kwargs.update(self._constraint_fields(request.constraint, api))
        return kwargs

    async def _switch(self, api: str, request: Request, wrong: "_WrongApi") -> tuple[str, dict]:
        """With `api="auto"`, before any request succeeded: the endpoint refused `api` in words
        that point to the other one. Try that once; when it answers, the model uses it from now
        on (and says so through `on_api`); else the first refusal stands, with what to pass."""
        other = "chat" if api == "completions" else "completions"
        try:
            data = await self._call(other, self._body(other, request))
        except ModelError:
            raise wrong.error from None
        self._use(other, f"{self.endpoint} refused the {api} API ({wrong.status}) and answers on the {other} API")
        return other, data

    def _use(self, api: str, why: str) -> None:
        """Use `api` from now on (once: a request in flight meanwhile may have switched already),
        and say so through `on_api`."""
        if self.api == api:
            return
        self.api, self._ways = api, self._constrain_ways(api)
        if self.on_api is not None:
            self.on_api(api, f"{self.name}: {why}: this run uses the {api} API from now on (pass --api {api} "
                             "to say so)")

    async def score(self, prompt: str, continuation: str, soft_prompt: SoftPrompt | None = None) -> Score:
        """Sum of the logprobs of the continuation's tokens, from an echoed completions call."""
        text = sendable(prompt + continuation)
        kwargs = {"model": self.model, "prompt": text, "echo": True, "logprobs": 1,
                  "max_tokens": self._score_max_tokens}
        try:
            data = await self._call("completions", kwargs)
        except _BadRequest:
            if self._score_max_tokens:
                raise
            self._score_max_tokens = kwargs["max_tokens"] = 1
            data = await self._call("completions", kwargs)
        return self._sum_logprobs(data["choices"][0], len(prompt), len(text))

    async def aclose(self) -> None:
        await self._transport.aclose()

    def deadline_hint(self, deadline: str) -> str:
        return f"raise it with the model's {deadline}_deadline= option or --{deadline}-deadline SECONDS"

    # ---- transport
    async def _call(self, api: str, kwargs: dict, switch: bool = False) -> dict:
        """One attempt; the reply's JSON (checked to have choices) or a mapped ModelError.
        With `switch`, a refusal pointing to the other API is a `_WrongApi` (see `_switch`)."""
        path = "/chat/completions" if api == "chat" else "/completions"
        try:
            body = await self._post(path, kwargs)
        except _AttemptExpired:
            raise TransientModelError(f"{self.name}: no complete reply from {self.endpoint} within the attempt "
                                      f"deadline of {self.attempt_deadline:g}s ({self.deadline_hint('attempt')})"
                                      ) from None
        except StatusFailure as exc:
            error = self._status_error(exc, [field for field in CONSTRAINT_FIELDS if field in kwargs], api)
            if switch and _points_elsewhere(exc.status, _server_message(exc.body), api):
                raise _WrongApi(exc.status, error) from None
            raise error from None
        except ConnectionFailure as exc:
            raise self._connection_error(exc) from None
        except MalformedReply:
            raise self._malformed("") from None
        except ClientFailure as exc:
            raise ModelError(f"{self.name}: {self._redact(str(exc))}") from None
        except InvalidEndpoint as exc:  # never worth retrying
            raise ModelError(f"{self.name}: cannot use the base URL {self.endpoint}: {exc}") from None
        return self._parse(body)

    async def _post(self, path: str, kwargs: dict) -> str | bytes:
        """The transport's post within the attempt deadline, which starts as the request leaves
        (the scheduler's slot taken, see `Slot`; at once outside the scheduler). Raises
        `_AttemptExpired` when it runs out."""
        if self.attempt_deadline is None:
            return await self._transport.post(path, kwargs)
        loop, outer = asyncio.get_running_loop(), CURRENT_SLOT.get()
        try:
            async with asyncio.timeout(None) as scope:
                def start() -> None:
                    scope.reschedule(loop.time() + self.attempt_deadline)

                if outer is None:
                    start()
                    return await self._transport.post(path, kwargs)

                async def take() -> None:
                    await outer.acquire()
                    start()

                token = CURRENT_SLOT.set(Slot(take, outer.release))
                try:
                    return await self._transport.post(path, kwargs)
                finally:
                    CURRENT_SLOT.reset(token)
        except TimeoutError:
            if scope.expired():
                raise _AttemptExpired() from None
            raise

    def _parse(self, body: str | bytes) -> dict:
        try:
            data = json.loads(body)
        except RecursionError:  # a reply of the API is a few levels deep
            raise self._malformed(" nested too deep to read") from None
        except ValueError:
            head = body[:80]
            snippet = self._redact(head.decode(errors="replace") if isinstance(head, bytes) else head)
            raise self._malformed(f" that is not JSON: {snippet!r}") from None
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise self._malformed(" without choices")
        return data

    def _malformed(self, what: str) -> TransientModelError:
        return TransientModelError(f"{self.name}: {self.endpoint} sent a malformed reply{what}")

    def _text(self, choice: Any, api: str) -> str:
        text = None
        if isinstance(choice, dict):
            message = choice.get("message")
            text = message.get("content") if api == "chat" and isinstance(message, dict) else choice.get("text")
            if text is None and api == "chat" and isinstance(message, dict) and message.get("tool_calls"):
                text = ""  # a reply that only calls tools
        if not isinstance(text, str):
            raise self._malformed(": a choice without text")
        return text

    def _tool_calls(self, choice: Any) -> tuple[ToolCall, ...]:
        """The tool calls of a chat choice, checked: each a function with a name and its
        arguments as text (a malformed one is a malformed reply)."""
        message = choice.get("message") if isinstance(choice, dict) else None
        found = message.get("tool_calls") if isinstance(message, dict) else None
        if not found:
            return ()
        if not isinstance(found, list):
            raise self._malformed(": tool_calls that are not a list")
        calls = []
        for number, call in enumerate(found):
            function = call.get("function") if isinstance(call, dict) else None
            name = function.get("name") if isinstance(function, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, dict):  # some servers send the object itself
                arguments = json.dumps(arguments)
            if not isinstance(name, str) or not isinstance(arguments, str):
                raise self._malformed(": a tool call without a function name and arguments")
            ident = call.get("id") if isinstance(call.get("id"), str) else f"call_{number}"
            calls.append(ToolCall(ident, name, arguments))
        return tuple(calls)

    def _sampling(self, request: Request) -> dict:
        kwargs: dict = {"model": self.model, "n": request.n, "temperature": request.temperature}
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.seed is not None:
            kwargs["seed"] = request.seed
        return kwargs

    def _constrain_ways(self, api: str) -> tuple[str, ...]:
        """The ways `_constraint_fields` uses, from `constrain`, the API and the host."""
        if self.constrain != "auto":
            return () if self.constrain == "none" else (self.constrain,)
        if api == "chat":
            return ("response_format",)
        return () if self._host == DEFAULT_ENDPOINT else ("guided", "llama")

    def _constraint_fields(self, constraint: Constraint, api: str) -> dict:
        """The request fields that ask the server to decode under `constraint` on `api` (see
        the module docstring); empty when none of this model's ways can say it."""
        ways = self._ways if api == self.api else self._constrain_ways(api)
        if not ways:
            return {}
        try:
            schema = None if constraint.schema is None else json.loads(constraint.schema)
        except ValueError:
            raise ModelError(f"{self.name}: the constraint {constraint.name!r} has a schema that is not JSON") from None
        fields: dict = {}
        for way in ways:
            fields.update(_WAYS[way](constraint, schema))
        return fields

    def _sum_logprobs(self, choice: dict, start: int, end: int) -> Score:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        offsets = logprobs.get("text_offset") if isinstance(logprobs, dict) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if not offsets or not values or len(offsets) != len(values):
            raise ModelError(f"{self.name}: the server at {self.endpoint} cannot score text "
                             "(no logprobs for the echoed prompt)")
        total, count = 0.0, 0
        for offset, value in zip(offsets, values):
            if not isinstance(offset, (int, float)) or isinstance(offset, bool):
                raise self._malformed(": a token offset that is not a number")
            if start <= offset < end and value is not None:
                if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
                    raise self._malformed(f": a token logprob that is not one ({str(value)[:40]!r})")
                total += float(value)
                count += 1
        return Score(total, count)

    # ---- errors
    def _status_error(self, exc: StatusFailure, sent: list[str], api: str = "completions") -> ModelError:
        """`exc` as a ModelError; `sent`: the constraint fields the request carried; `api`: the
        API it went to (a refusal that points to the other one says what to pass)."""
        status, detail = exc.status, self._redact(_server_message(exc.body))
        # llama-cpp-python's server answers a field it cannot validate with a 500 that names it
        # (`response_format.type` "json_schema"): a refusal too, which no retry changes
        field = _refused_field(exc, detail, sent) if status in (400, 422, 500) else None
        if field is not None:
            return ModelError(f"{self.name}: {self.endpoint} refused the constraint field {field} "
                              f'({status}: {detail}); set constrain="none" on the model to decode without it, e.g. '
                              f'model m = "{self.name}" (constrain="none")')
        if status == 429:
            return TransientModelError(f"{self.name}: rate limited by {self.endpoint} (429: {detail})",
                                       retry_after=_retry_after(exc.headers))
        if status >= 500 or status in (408, 409):
            return TransientModelError(f"{self.name}: {self.endpoint} failed ({status}: {detail})")
        if status in (401, 403):
            hint = "" if self._key.reveal() != PLACEHOLDER_KEY else "; no OPENAI_API_KEY is set"
            return ModelError(f"{self.name}: the endpoint {self.endpoint} refused the API key ({status}{hint})")
        hint = _api_hint(status, detail, api)
        if status == 404:
            return ModelError(f"{self.name}: unknown model {self.model!r} at {self.endpoint} (404: {detail}){hint}")
        if status == 400 and (exc.code == "context_length_exceeded" or _TOO_LONG.search(detail)):
            return ModelError(f"prompt too long for {self.name}: {detail}")
        error = _BadRequest if status == 400 else ModelError
        return error(f"{self.name}: {self.endpoint} rejected the request ({status}: {detail}){hint}")

    def _connection_error(self, exc: ConnectionFailure) -> ModelError:
        """No reply: a timeout, or no connection (see `connect_failure`)."""
        failure = connect_failure(exc.error, self._host)
        if failure is None and exc.timed_out:
            return TransientModelError(f"{self.name}: no answer from {self.endpoint} within {self.timeout:g}s "
                                       "(the timeout of each read; raise it with the model's timeout= option)")
        if exc.cut_short is not None:
            return TransientModelError(f"{self.name}: {self.endpoint} closed the connection before its reply "
                                       f"was complete ({exc.cut_short})")
        return self._unreachable(*(failure or (exc.reason, False)))

    def _unreachable(self, reason: str, final: bool) -> ModelError:
        """No connection to the endpoint: final when waiting cannot help (no such host name,
        connection refused, a TLS or certificate error), else worth retrying."""
        error = ModelError if final else TransientModelError
        return error(f"{self.name}: cannot reach {self.endpoint} ({self._redact(reason)})")

    def _redact(self, text: str) -> str:
        """`text` without the API key or the base URL's credentials (longest first)."""
        for secret in sorted(filter(None, set(self.secrets())), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


class _WrongApi(Exception):
    """A refusal, before the API was settled, whose words point to the other API (`_switch`)."""

    def __init__(self, status: int, error: ModelError):
        super().__init__(status)
        self.status, self.error = status, error


#: Words of a refusal that says the endpoint serves chat, not completions ("This is a chat
#: model and thus not supported in the v1/completions endpoint. Did you mean to use
#: v1/chat/completions?"), and the other way round ("This is not a chat model ...", a model
#: without a chat template on vLLM).
_WANTS_CHAT = re.compile(r"chat[ _-]?(model|completions?|only|endpoint|api)|chat/completions", re.IGNORECASE)
_WANTS_COMPLETIONS = re.compile(r"not a chat model|chat[ _]?template|v1/completions\b(?!.*chat/completions)|"
                                r"use (the )?completions", re.IGNORECASE)
#: A route the server does not have at all (a 404 or 405 about the URL, not the model).
_NO_ROUTE = re.compile(r"^not found$|unknown (request )?url|no route|cannot post|method not allowed", re.IGNORECASE)


def _points_elsewhere(status: int, detail: str, api: str) -> bool:
    """Whether a refusal of a request to `api` says the endpoint serves the other API."""
    if status not in (400, 404, 405, 501):
        return False
    if status in (404, 405) and _NO_ROUTE.search(detail.strip()):
        return True
    if api == "completions":
        return bool(_WANTS_CHAT.search(detail)) and not re.search(r"not a chat model", detail, re.IGNORECASE)
    return bool(_WANTS_COMPLETIONS.search(detail))


def _api_hint(status: int, detail: str, api: str) -> str:
    """What to pass when a refusal of `api` points to the other API ('' when it does not)."""
    if not _points_elsewhere(status, detail, api):
        return ""
    other = "chat" if api == "completions" else "completions"
    return f"; the endpoint serves the {other} API: pass --api {other} (or api=\"{other}\" on the model)"


def _detail(usage: dict, group: str, name: str) -> int | None:
    """A count inside one of usage's detail objects (`prompt_tokens_details.cached_tokens`)."""
    details = usage.get(group)
    return token_count(details.get(name)) if isinstance(details, dict) else None


def _sendable_message(message: Message) -> dict:
    """`message` as the chat API takes it, its text `sendable`."""
    wire = message.wire()
    if isinstance(wire.get("content"), str):
        wire["content"] = sendable(wire["content"])
    return wire


def _server_message(body: object) -> str:
    """The server's words in a failed reply's body (its error message, else its text)."""
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    text = body if isinstance(body, str) else ""
    return " ".join(text.split())[:200] or "no message"


def _refused_field(exc: StatusFailure, detail: str, sent: list[str]) -> str | None:
    """Which of the constraint fields `sent` a refusal names: its `param`, else its message."""
    param = exc.body.get("param") if isinstance(exc.body, dict) else None
    if param in sent:
        return param
    return next((field for field in sent if re.search(rf"\b{re.escape(field)}\b", detail)), None)


def _schema_name(name: str) -> str:
    """`name` as OpenAI takes a `json_schema.name`: a-z, A-Z, 0-9, _ and -, at most 64."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer"


def _response_format(constraint: Constraint, schema: Any) -> dict:
    if schema is None:
        return {}
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": _schema_name(constraint.name), "schema": schema, "strict": True}}}


def _guided(constraint: Constraint, schema: Any) -> dict:
    if schema is not None:
        return {"guided_json": schema, "structured_outputs": {"json": schema}}
    return {"guided_regex": constraint.regex, "structured_outputs": {"regex": constraint.regex}}


def _llama(constraint: Constraint, schema: Any) -> dict:
    return {} if schema is None else {"json_schema": schema}


#: A way of constraining (a `constrain=` mode) -> the request fields it adds for a constraint.
_WAYS = {"response_format": _response_format, "guided": _guided, "llama": _llama}


def _constrain_mode(name: str, value: Any) -> str:
    """The `constrain=` option, checked: one of `CONSTRAIN`."""
    if isinstance(value, str) and value in CONSTRAIN:
        return value
    other = " (a mode of the local model)" if value in CONSTRAIN_MODES else ""
    raise ModelError(f"{name}: constrain must be one of {', '.join(CONSTRAIN)}, not {value!r}{other}")


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `retry-after` (seconds or an HTTP date)."""
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _hostname(url: str) -> str | None:
    """The host name of `url`; None for a URL that cannot be parsed (its requests then fail
    with the transport's InvalidEndpoint)."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


class _AttemptExpired(Exception):
    """The attempt deadline ran out (`OpenAIModel._post`)."""


def _seconds(name: str, option: str, value: Any) -> float | None:
    """A deadline option: None (no limit) or a finite number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ModelError(f"{name}: {option} must be a number of seconds > 0, not {value!r}")
    return float(value)


def openai_model(name: str, settings: ModelSettings) -> OpenAIModel:
    """Factory for `openai:NAME` model specs."""
    return OpenAIModel(name, settings)


@hookimpl
def register_models(register):
    register("openai", openai_model)
