"""Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp server, Ollama, TGI) through the
official `openai` client: `--model openai:NAME [--base-url URL]`.

One `AsyncOpenAI` client per model instance, made on first use and reused by every call (its
connection pool is shared). Its HTTP transport is aiohttp (the client's own
`DefaultAioHttpClient`): 20-25% less CPU per request than the default httpx stack, measured
by benchmarks/critical_path.py, which matters when hundreds of requests are in flight. The client never retries (`max_retries=0`): retry policy lives in
the scheduler, so each call is one attempt and failures map to `TransientModelError` (429,
5xx, timeouts, dropped connections, replies that are not JSON or have no choices) or
`ModelError` (bad key, unknown model, prompt too long, other 4xx, and an endpoint that cannot
be reached at all: no such host name, connection refused, a TLS or certificate error).

The API key comes from OPENAI_API_KEY only and is never part of a name, repr or message.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from decomp.handlers.registry import default_registry
from decomp.runtime.models.base import (
    CURRENT_SLOT,
    Completion,
    Model,
    ModelError,
    ModelSettings,
    Request,
    Score,
    TransientModelError,
)

DEFAULT_ENDPOINT = "api.openai.com"
PLACEHOLDER_KEY = "unused"  # local servers need no key, but the client insists on one
APIS = ("auto", "chat", "completions")
_TOO_LONG = re.compile(r"context|too long|maximum\b.*\blength|length\b.*\bmaximum", re.IGNORECASE | re.DOTALL)


class _Secret:
    """Holds the API key so that no repr, vars() dump or f-string shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


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
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = (settings.base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        self.endpoint = _display_url(self.base_url) if self.base_url else DEFAULT_ENDPOINT
        key = os.environ.get("OPENAI_API_KEY") or (PLACEHOLDER_KEY if self.base_url else None)
        if key is None:
            raise ModelError(f"{self.name}: set OPENAI_API_KEY or pass --base-url")
        self._key = _Secret(key)
        self.timeout = settings.timeout
        self.api = ("completions" if self.base_url else "chat") if settings.api == "auto" else settings.api
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._score_max_tokens = 0  # raised to 1 once a server rejects 0

    def secrets(self) -> tuple[str, ...]:
        key = self._key.reveal()
        return (key,) if key != PLACEHOLDER_KEY else ()

    def __repr__(self) -> str:
        return f"OpenAIModel(name={self.name!r}, endpoint={self.endpoint!r}, api={self.api!r})"

    # ---- the interface
    async def complete(self, request: Request) -> Completion:
        kwargs = self._sampling(request)
        if self.api == "chat":
            kwargs["messages"] = [{"role": "user", "content": request.prompt}]
            # api.openai.com's newer models take only max_completion_tokens; compatible servers know max_tokens
            kwargs["max_completion_tokens" if self.base_url is None else "max_tokens"] = request.max_tokens
        else:
            kwargs.update(prompt=request.prompt, max_tokens=request.max_tokens)
        data = await self._call(self.api, kwargs)
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        texts = tuple(self._text(choice) for choice in choices)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return Completion(texts, _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))

    async def score(self, prompt: str, continuation: str) -> Score:
        """Sum of the logprobs of the continuation's tokens, from an echoed completions call."""
        text = prompt + continuation
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
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()

    # ---- transport
    def _client_now(self) -> Any:
        """The shared client, made on first use (again if the event loop changed: a pooled
        connection cannot outlive the loop it was opened on)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import openai

            hooks = {"request": [_take_slot], "response": [_give_back_slot]}
            http = openai.DefaultAioHttpClient(timeout=self.timeout, event_hooks=hooks)
            self._client = openai.AsyncOpenAI(api_key=self._key.reveal(), base_url=self.base_url,
                                              timeout=self.timeout, max_retries=0, http_client=http)
            self._loop = loop
        return self._client

    async def _call(self, api: str, kwargs: dict) -> dict:
        """One attempt; the reply's JSON (checked to have choices) or a mapped ModelError."""
        import openai

        client = self._client_now()
        path = "/chat/completions" if api == "chat" else "/completions"
        try:
            # the client's low-level post: its auth, base URL, pool and errors, without building
            # typed request and response models (20% less CPU per call, measured here)
            body = await client.post(path, body=kwargs, cast_to=str)
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APITimeoutError as exc:
            # aiohttp's connection errors (refused, DNS, TLS) reach the client as timeouts
            failure = _connect_failure(exc)
            if failure is None:
                raise TransientModelError(
                    f"{self.name}: no answer from {self.endpoint} within {self.timeout:g}s") from None
            raise self._unreachable(*failure) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            failure = _connect_failure(exc) or (str(cause) or type(cause).__name__, False)
            raise self._unreachable(*failure) from None
        except openai.APIResponseValidationError:
            raise TransientModelError(f"{self.name}: {self.endpoint} sent a malformed reply") from None
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.name}: {type(exc).__name__}: {self._redact(str(exc))}") from None
        return self._parse(body)

    def _parse(self, body: str | bytes) -> dict:
        try:
            data = json.loads(body)
        except ValueError:
            head = body[:80]
            snippet = self._redact(head.decode(errors="replace") if isinstance(head, bytes) else head)
            raise TransientModelError(f"{self.name}: {self.endpoint} sent a reply that is not JSON: {snippet!r}") from None
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise TransientModelError(f"{self.name}: {self.endpoint} sent a reply without choices")
        return data

    def _text(self, choice: Any) -> str:
        text = None
        if isinstance(choice, dict):
            message = choice.get("message")
            text = message.get("content") if self.api == "chat" and isinstance(message, dict) else choice.get("text")
        if not isinstance(text, str):
            raise TransientModelError(f"{self.name}: {self.endpoint} sent a choice without text")
        return text

    def _sampling(self, request: Request) -> dict:
        kwargs: dict = {"model": self.model, "n": request.n, "temperature": request.temperature}
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.seed is not None:
            kwargs["seed"] = request.seed
        return kwargs

    def _sum_logprobs(self, choice: dict, start: int, end: int) -> Score:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        offsets = logprobs.get("text_offset") if isinstance(logprobs, dict) else None
        values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
        if not offsets or not values or len(offsets) != len(values):
            raise ModelError(f"{self.name}: the server at {self.endpoint} cannot score text "
                             "(no logprobs for the echoed prompt)")
        total, count = 0.0, 0
        for offset, value in zip(offsets, values):
            if start <= offset < end and value is not None:
                total += float(value)
                count += 1
        return Score(total, count)

    # ---- errors
    def _status_error(self, exc: Any) -> ModelError:
        status, detail = exc.status_code, self._redact(_server_message(exc))
        if status == 429:
            return TransientModelError(f"{self.name}: rate limited by {self.endpoint} (429: {detail})",
                                       retry_after=_retry_after(exc.response.headers))
        if status >= 500 or status in (408, 409):
            return TransientModelError(f"{self.name}: {self.endpoint} failed ({status}: {detail})")
        if status in (401, 403):
            hint = "" if self._key.reveal() != PLACEHOLDER_KEY else "; no OPENAI_API_KEY is set"
            return ModelError(f"{self.name}: the endpoint {self.endpoint} refused the API key ({status}{hint})")
        if status == 404:
            return ModelError(f"{self.name}: unknown model {self.model!r} at {self.endpoint} (404: {detail})")
        if status == 400 and (getattr(exc, "code", None) == "context_length_exceeded" or _TOO_LONG.search(detail)):
            return ModelError(f"prompt too long for {self.name}: {detail}")
        error = _BadRequest if status == 400 else ModelError
        return error(f"{self.name}: {self.endpoint} rejected the request ({status}: {detail})")

    def _unreachable(self, reason: str, final: bool) -> ModelError:
        """No connection to the endpoint: final when waiting cannot help (no such host name,
        connection refused, a TLS or certificate error), else worth retrying."""
        error = ModelError if final else TransientModelError
        return error(f"{self.name}: cannot reach {self.endpoint} ({self._redact(reason)})")

    def _redact(self, text: str) -> str:
        key = self._key.reveal()
        return text.replace(key, "***") if key and key != PLACEHOLDER_KEY else text


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    text = body if isinstance(body, str) else ""
    return " ".join(text.split())[:200] or "no message"


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


def _display_url(url: str) -> str:
    """The URL without any user:password part."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def openai_model(name: str, settings: ModelSettings) -> OpenAIModel:
    """Factory for `openai:NAME` model specs."""
    return OpenAIModel(name, settings)


default_registry.add_model_backend("openai", openai_model)


def _connect_failure(exc: BaseException) -> tuple[str, bool] | None:
    """Why no connection was made, from the OS or TLS error underneath `exc`, and whether the
    failure is final: ('connection refused', True). None when there is no such error (a
    timeout). Final: a host name that does not exist, a refused connection, a TLS handshake or
    certificate error; a temporary DNS failure, a reset or an unreachable network is retried."""
    chain, seen = [], exc.__cause__ or exc.__context__
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "os_error", None)
    for err in reversed(chain):  # the innermost error says most
        if isinstance(err, ssl.SSLCertVerificationError):
            return f"TLS certificate rejected: {getattr(err, 'verify_message', None) or err.strerror or err}", True
        if isinstance(err, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return f"TLS connection closed: {err.strerror or err}", False
        if isinstance(err, ssl.SSLError):
            reason = getattr(err, "reason", None)
            hint = "; is it an http:// endpoint?" if reason == "WRONG_VERSION_NUMBER" else ""
            return f"TLS handshake failed: {reason or err.strerror or err}{hint}", True
        if isinstance(err, socket.gaierror):
            host = _host(exc)
            if err.errno == socket.EAI_AGAIN:
                return f"name lookup of {host} failed: {err.strerror or err}", False
            return f"no such host name: {host}", True
        if isinstance(err, ConnectionRefusedError):
            return "connection refused", True
    for err in chain:
        if isinstance(err, OSError) and not isinstance(err, TimeoutError):
            return str(err) or type(err).__name__, False
    return None


def _host(exc: BaseException) -> str:
    """The host `exc`'s request went to ('the host' when it does not say)."""
    url = getattr(getattr(exc, "request", None), "url", None)
    host = getattr(url, "host", None)
    return host if isinstance(host, str) and host else "the host"


async def _take_slot(request) -> None:
    slot = CURRENT_SLOT.get()
    if slot is not None:
        await slot.acquire()


async def _give_back_slot(response) -> None:
    slot = CURRENT_SLOT.get()
    if slot is not None:
        slot.release()
