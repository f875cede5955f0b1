"""A local OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

    with MockOpenAIServer(latency=0.05, faults={"429": 0.1}, seed=1) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused")
        ...
        server.stats()  # {"requests", "in_flight", "max_in_flight", "faults", "prompt_tokens", "cached_tokens"}

or, out of process (no GIL shared with the client, for benchmarks):

    python -m decomp.runtime.testing.mock_server --latency 0.1 --fault 429=0.1 --seed 1 --prompt-cache
    # prints {"base_url": "http://127.0.0.1:PORT/v1", "pid": ...} once ready; runs until killed

Routes: POST /v1/completions, POST /v1/chat/completions, GET /stats, POST /reset-stats.

Text is split into whitespace tokens (each with its leading whitespace, so offsets tile the
text); a token's logprob is -0.1 * len(token). Answers come from `responder(prompt,
request_json)` (default: the prompt's last non-empty line), cut at the request's stop
sequences and at `max_tokens` tokens. A chat request's prompt is its messages' texts, one after
another: an assistant turn's tool calls as a line `tool_call NAME ARGUMENTS` each, a tool turn as
`tool_result TOOL_CALL_ID: CONTENT`.

Tool calls (chat only): a responder may return `{"content": str | None, "tool_calls": [{"name":
NAME, "arguments": {...} or JSON text}, ...]}`; the reply's message then carries OpenAI's
`tool_calls` (`{"id": "call_N", "type": "function", "function": {"name", "arguments": JSON text}}`,
N counting the server's calls from 1), `content` null when None, and `finish_reason` "tool_calls"
(when there is at least one call). A dict answering /v1/completions is a 500 saying so.

Prompt cache, like OpenAI's (`prompt_cache=True`): each answered prompt's tokens are compared with
every prompt answered before; usage gets `prompt_tokens_details: {"cached_tokens": N}`, N the
longest shared token prefix rounded down to a multiple of `cache_block` (default 128), 0 under
`cache_min_tokens` (default 1024). A chat prompt is then read, and its `prompt_tokens` counted, as
a chat template lays it out: the tools' JSON first (if any), then `<|ROLE|>\nTEXT\n` per message
(without the option, chat `prompt_tokens` count the responder's prompt, as before).
`reasoning_tokens=N`: every reply's usage gets `completion_tokens_details: {"reasoning_tokens": N}`,
and N more completion tokens (OpenAI counts reasoning in `completion_tokens`).
`stats()`'s `prompt_tokens` and `cached_tokens` total the answered requests' counts (cached ones
only with the prompt cache on); `reset_stats()` zeroes them but keeps the cache.

Failures, drawn per request with probability `faults[kind]` from one seeded generator, or
forced by asking for the model `fault-KIND` (e.g. `fault-401`):

    429      rate limited, with a `retry-after-ms` header (`retry_after_ms`, default 50)
    500      internal server error
    timeout  answers only after `timeout_sleep` seconds (default 5)
    garbage  200 with a body that is not JSON (though labelled application/json)
    html     200 with an HTML page (content type text/html)
    empty    200 with a JSON object that has no choices
    400, 401, 403, 404   the error a real server gives; 400, 401 and 403 echo the presented
             key back in full, like a careless proxy, so tests can check clients never repeat it

Real conditions: `require_key` -> 401 for any other key; `max_context` (tokens) -> 400
"maximum context length"; `min_max_tokens` -> 400 when `max_tokens` is below it (vLLM
rejects 0); `logprobs=False` -> logprobs are never returned (as by llama.cpp's server).
`usage={"prompt_tokens": -5}` puts those members in every reply's usage, over the counted
ones (a value of None leaves the member out), for tests of clients that must not trust them.
`reject_fields=("guided_json",)` -> 400 for a request that carries one of those members, in
OpenAI's words for an unknown one (`reject_message`, where `{field}` stands for the member).
Constraint fields (`response_format`, `guided_json`, `json_schema`, ...) are otherwise not
enforced: the responder answers as usual, and sees them in its request.

`apis=("chat",)`: a chat-only server (a completions request gets OpenAI's 404 "This is a chat
model and thus not supported in the v1/completions endpoint. Did you mean to use
v1/chat/completions?"), or `("completions",)` a completions-only one (the 404 the other way).

`server.requests`: the JSON bodies of the last `record` API requests received (10,000 by
default; faulted and refused ones too), oldest first, for tests of what a client sent.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import queue
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from decomp.dsl.values import storable_json

Responder = Callable[[str, dict], str | dict]
FAULT_KINDS = ("429", "500", "timeout", "garbage", "html", "empty", "400", "401", "403", "404")
_TOKEN = re.compile(r"\s*\S+|\s+")


def tokenize(text: str) -> list[tuple[str, int]]:
    """Whitespace tokens of `text` with their character offsets (leading space kept)."""
    return [(m.group(), m.start()) for m in _TOKEN.finditer(text)]


def token_logprob(token: str) -> float:
    return -0.1 * len(token)


def last_line(prompt: str, request: dict) -> str:
    """The default responder: the prompt's last non-empty line."""
    lines = [line for line in prompt.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def shout(prompt: str, request: dict) -> str:
    """A responder for trying `--responder`: the last line in capitals."""
    return last_line(prompt, request).upper()


class MockOpenAIServer:
    """An OpenAI-compatible server on 127.0.0.1 (see the module docstring for the options)."""

    def __init__(self, *, latency: float = 0.0, faults: Mapping[str, float] | None = None,
                 seed: int | None = None, responder: Responder | None = None,
                 timeout_sleep: float = 5.0, retry_after_ms: int = 50,
                 max_context: int | None = None, min_max_tokens: int = 0,
                 require_key: str | None = None, logprobs: bool = True, port: int = 0,
                 usage: Mapping[str, Any] | None = None, reject_fields: Iterable[str] = (),
                 reject_message: str = "Unrecognized request argument supplied: {field}",
                 record: int = 10_000, apis: Iterable[str] = ("completions", "chat"),
                 prompt_cache: bool = False, cache_min_tokens: int = 1024, cache_block: int = 128,
                 reasoning_tokens: int | None = None):
        unknown = set(faults or {}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
        if cache_block < 1 or cache_min_tokens < 0 or (reasoning_tokens or 0) < 0:
            raise ValueError("cache_block must be at least 1, cache_min_tokens and reasoning_tokens at least 0")
        self.latency = latency
        self.faults = dict(faults or {})
        self.responder = responder or last_line
        self.timeout_sleep = timeout_sleep
        self.retry_after_ms = retry_after_ms
        self.max_context = max_context
        self.min_max_tokens = min_max_tokens
        self.require_key = require_key
        self.logprobs = logprobs
        self.port = port
        self.usage = dict(usage or {})
        self.reject_fields = tuple(reject_fields)
        self.reject_message = reject_message
        self.record = record
        self.apis = tuple(apis)
        self.reasoning_tokens = reasoning_tokens
        self._cache = _PrefixCache(cache_block, cache_min_tokens) if prompt_cache else None
        self._tool_call_count = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.reset_stats()

    # ---- lifecycle
    def start(self) -> str:
        """Bind and serve in a background thread; returns the base URL (ending in /v1)."""
        if self._httpd is None:
            self._stopping.clear()
            self._httpd = _HTTPServer(("127.0.0.1", self.port), _Handler, self)
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="mock-openai", daemon=True)
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving, wake sleeping handlers and close open connections."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> MockOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the mock server is not running; call start()")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ---- statistics
    def stats(self) -> dict:
        with self._lock:
            return {"requests": self._requests, "in_flight": self._in_flight,
                    "max_in_flight": self._max_in_flight, "faults": dict(self._fault_counts),
                    "prompt_tokens": self._prompt_tokens, "cached_tokens": self._cached_tokens}

    def reset_stats(self) -> None:
        """Zero the counters and forget the recorded requests (the prompt cache stays)."""
        with self._lock:
            self._requests = self._in_flight = self._max_in_flight = 0
            self._prompt_tokens = self._cached_tokens = 0
            self._fault_counts: dict[str, int] = {}
            self._bodies: deque[dict] = deque(maxlen=self.record)

    @property
    def requests(self) -> list[dict]:
        """The JSON bodies of the API requests received (the last `record`), oldest first."""
        with self._lock:
            return list(self._bodies)

    def _enter(self) -> None:
        with self._lock:
            self._requests += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    # ---- one API request: (status, headers, body bytes)
    def answer(self, path: str, body: bytes, key: str | None) -> tuple[int, dict, bytes]:
        """The reply, made at once and handed back `latency` seconds after the call began."""
        started = time.monotonic()
        try:
            req = json.loads(body or b"{}")
            if not isinstance(req, dict):
                raise ValueError("not an object")
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        with self._lock:
            self._bodies.append(req)
        fault = self._fault_for(req)
        if fault is not None:
            with self._lock:
                self._fault_counts[fault] = self._fault_counts.get(fault, 0) + 1
        reply = self._reply(path, req, key, fault)
        delay = self.timeout_sleep if fault == "timeout" else self.latency
        self._stopping.wait(max(0.0, started + delay - time.monotonic()))
        return reply

    def _reply(self, path: str, req: dict, key: str | None, fault: str | None) -> tuple[int, dict, bytes]:
        api = "chat" if path.endswith("/chat/completions") else "completions"
        if api not in self.apis:
            return _wrong_api(api, req)
        if fault not in (None, "timeout"):
            return self._fault_reply(fault, req, key)
        if self.require_key is not None and key != self.require_key:
            return _error(401, f"Incorrect API key provided: {key}.", "invalid_api_key")
        refused = next((field for field in self.reject_fields if field in req), None)
        if refused is not None:
            return _error(400, self.reject_message.format(field=refused))
        return self._complete(path, req)

    def _fault_for(self, req: dict) -> str | None:
        model = str(req.get("model", ""))
        if model.startswith("fault-") and model[6:] in FAULT_KINDS:
            return model[6:]
        if not self.faults:
            return None
        with self._lock:
            draw = self._rng.random()
        total = 0.0
        for kind in sorted(self.faults):
            total += self.faults[kind]
            if draw < total:
                return kind
        return None

    def _fault_reply(self, kind: str, req: dict, key: str | None) -> tuple[int, dict, bytes]:
        if kind == "429":
            return _error(429, "Rate limit reached; please try again later.", "rate_limit_exceeded",
                          headers={"retry-after-ms": str(self.retry_after_ms)})
        if kind == "garbage":
            return 200, {"Content-Type": "application/json"}, b'{"id": "cmpl-x", "choices": [{"te'
        if kind == "html":
            return 200, {"Content-Type": "text/html"}, b"<html><body>Bad gateway</body></html>"
        if kind == "empty":
            return 200, {"Content-Type": "application/json"}, b'{"id": "cmpl-x", "object": "text_completion"}'
        messages = {
            "500": (500, "The server had an error while processing your request.", None),
            "400": (400, f"Invalid value for 'temperature' (key {key}): expected a number.", "invalid_value"),
            "401": (401, f"Incorrect API key provided: {key}.", "invalid_api_key"),
            "403": (403, f"Key {key} is not allowed to use this model.", "forbidden"),
            "404": (404, f"The model `{req.get('model')}` does not exist.", "model_not_found"),
        }
        status, message, code = messages[kind]
        return _error(status, message, code)

    def _complete(self, path: str, req: dict) -> tuple[int, dict, bytes]:
        chat = path.endswith("/chat/completions")
        prompts = [_chat_prompt(req.get("messages") or [])] if chat else _prompts(req.get("prompt", ""))
        limit = req.get("max_completion_tokens", req.get("max_tokens"))
        limit = (None if chat else 16) if limit is None else int(limit)
        if limit is not None and limit < self.min_max_tokens:
            return _error(400, f"max_tokens must be at least {self.min_max_tokens}, got {limit}.",
                          "invalid_value", param="max_tokens")
        too_long = self._too_long(prompts, limit or 0)
        if too_long:
            return _error(400, too_long, "context_length_exceeded", param="messages" if chat else "prompt")
        try:
            choices, completion_tokens = self._choices(prompts, req, limit, chat)
        except _ResponderError as err:
            return _error(500, str(err))
        reply = {"id": f"mock-{time.monotonic_ns()}", "object": "chat.completion" if chat else "text_completion",
                 "created": int(time.time()), "model": req.get("model", ""), "choices": choices,
                 "usage": self._usage(*self._prompt_usage(prompts, req, chat), completion_tokens)}
        return 200, {"Content-Type": "application/json"}, storable_json(reply).encode()

    def _choices(self, prompts: list[str], req: dict, limit: int | None, chat: bool) -> tuple[list[dict], int]:
        """The reply's choices (`n` per prompt) and the completion tokens they hold."""
        choices, completion_tokens = [], 0
        for prompt in prompts:
            for _ in range(max(1, int(req.get("n") or 1))):
                text, calls, reason = self._generate(prompt, req, limit, chat)
                completion_tokens += len(tokenize("\n".join([text or "", *map(_call_line, calls)])))
                choice = _chat_choice(text, calls, reason) if chat else _text_choice(prompt, text, reason, req,
                                                                                     self.logprobs)
                choices.append({"index": len(choices), **choice})
        return choices, completion_tokens

    def _prompt_usage(self, prompts: list[str], req: dict, chat: bool) -> tuple[int, int | None]:
        """(prompt tokens, cached tokens or None without the prompt cache) of an answered request,
        which the cache then remembers and the statistics count."""
        if self._cache is None:
            prompt_tokens, cached = sum(len(tokenize(p)) for p in prompts), None
        else:
            texts = [_chat_template(req)] if chat else prompts
            token_lists = [[token for token, _ in tokenize(text)] for text in texts]
            prompt_tokens = sum(map(len, token_lists))
            cached = sum(self._cache.see(tokens) for tokens in token_lists)
        with self._lock:
            self._prompt_tokens += prompt_tokens
            self._cached_tokens += cached or 0
        return prompt_tokens, cached

    def _usage(self, prompt_tokens: int, cached: int | None, completion_tokens: int) -> dict:
        completion_tokens += self.reasoning_tokens or 0
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        merged = {**usage, **self.usage}
        return {name: value for name, value in merged.items() if value is not None}

    def _too_long(self, prompts: list[str], limit: int) -> str | None:
        if self.max_context is None:
            return None
        longest = max(len(tokenize(p)) for p in prompts)
        if longest + limit <= self.max_context:
            return None
        return (f"This model's maximum context length is {self.max_context} tokens, however you requested "
                f"{longest + limit} tokens ({longest} in your prompt; {limit} for the completion). "
                "Please reduce your prompt; or completion length.")

    def _generate(self, prompt: str, req: dict, limit: int | None,
                  chat: bool) -> tuple[str | None, list[dict], str]:
        """One sample: its text (None for a tool-call answer without content), its tool calls
        (as the chat API sends them) and its finish reason."""
        answer = self.responder(prompt, req)
        if not isinstance(answer, dict):
            text, reason = _cut(str(answer), req, limit)
            return text, [], reason
        if not chat:
            raise _ResponderError("the responder answered a /v1/completions request with tool calls (a dict); "
                                  "tools are chat-only, so answer completions with text")
        unknown = set(answer) - {"content", "tool_calls"}
        content = answer.get("content")
        if unknown or not isinstance(content, (str, type(None))):
            raise _ResponderError("a responder's dict answer has `content` (text or None) and `tool_calls` only, "
                                  f"not {answer!r}")
        calls = [self._tool_call(number, call) for number, call in enumerate(_listed(answer.get("tool_calls")))]
        text, reason = (None, "stop") if content is None else _cut(content, req, limit)
        return text, calls, "tool_calls" if calls else reason

    def _tool_call(self, number: int, call: Any) -> dict:
        """A responder's `{"name", "arguments"}` as the chat API sends a tool call, with a new id."""
        name = call.get("name") if isinstance(call, dict) else None
        arguments = call.get("arguments", {}) if isinstance(call, dict) else None
        if not isinstance(name, str) or not isinstance(arguments, (dict, str)):
            raise _ResponderError(f"a responder's tool call {number} needs a name (text) and arguments (a dict or "
                                  f"JSON text), not {call!r}")
        with self._lock:
            self._tool_call_count += 1
            ident = f"call_{self._tool_call_count}"
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return {"id": ident, "type": "function", "function": {"name": name, "arguments": text}}


class _ResponderError(Exception):
    """A responder's answer that the API cannot carry (the reply is a 500 with this message)."""


class _PrefixCache:
    """The prompts answered so far, as the digests of their whole-block token prefixes: a new
    prompt's cached tokens are the longest whole-block prefix an earlier prompt shares."""

    def __init__(self, block: int, min_tokens: int):
        self.block = block
        self.min_tokens = min_tokens
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def see(self, tokens: list[str]) -> int:
        """The cached tokens of a prompt (0 under the minimum); the prompt is remembered after."""
        digests = _prefix_digests(tokens, self.block)
        with self._lock:
            shared = next((i for i, digest in enumerate(digests) if digest not in self._seen), len(digests))
            self._seen.update(digests)
        cached = shared * self.block
        return cached if cached >= self.min_tokens else 0


def _prefix_digests(tokens: list[str], block: int) -> list[bytes]:
    """One digest per whole block of `tokens`, each standing for the prefix up to that block's
    end (chained, so a prompt costs one pass whatever its length)."""
    digests, previous = [], b""
    for end in range(block, len(tokens) + 1, block):
        previous = hashlib.blake2b(previous + json.dumps(tokens[end - block:end]).encode(), digest_size=16).digest()
        digests.append(previous)
    return digests


def _cut(text: str, req: dict, limit: int | None) -> tuple[str, str]:
    """`text` cut at the request's first stop sequence and at `limit` tokens; its finish reason."""
    stops = req.get("stop") or []
    for stop in [stops] if isinstance(stops, str) else stops:
        if stop and stop in text:
            text = text[:text.index(stop)]
    tokens = tokenize(text)
    if limit is not None and len(tokens) > limit:
        return text[:tokens[limit][1]], "length"
    return text, "stop"


def _listed(value: Any) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _ResponderError(f"a responder's `tool_calls` must be a list, not {value!r}")
    return value

class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # socketserver's 5 drops bursts of connects (the client retries a second later)

    def __init__(self, address, handler, mock: MockOpenAIServer):
        super().__init__(address, handler)
        self.mock = mock


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client's connection pool expects
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.mock._lock:
            self.server.mock._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.mock._lock:
            self.server.mock._connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/stats", "/v1/stats"):
            self._send(200, {"Content-Type": "application/json"}, storable_json(self.server.mock.stats()).encode())
        else:
            self._send(*_error(404, f"Unknown request URL: GET {self.path}.", "unknown_url"))

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        mock = self.server.mock
        if self.path.rstrip("/") in ("/reset-stats", "/v1/reset-stats"):
            mock.reset_stats()
            self._send(200, {"Content-Type": "application/json"}, b"{}")
            return
        path = urlsplit(self.path).path  # a query string (`?api-key=K`) does not change the route
        if not path.endswith(("/completions", "/chat/completions")):
            self._send(*_error(404, f"Unknown request URL: POST {self.path}.", "unknown_url"))
            return
        auth = self.headers.get("Authorization", "")
        key = auth[7:] if auth.startswith("Bearer ") else None
        mock._enter()
        try:
            reply = mock.answer(path, body, key)
        finally:
            mock._leave()
        self._send(*reply)

    def _send(self, status: int, headers: dict, body: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (timeout) or the server is stopping
            self.close_connection = True


def _error(status: int, message: str, code: str | None = None, *, param: str | None = None,
           headers: dict | None = None) -> tuple[int, dict, bytes]:
    kind = {429: "requests", 500: "server_error", 401: "invalid_request_error"}.get(status, "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return status, {"Content-Type": "application/json", **(headers or {})}, storable_json(body).encode()


def _wrong_api(api: str, req: dict) -> tuple[int, dict, bytes]:
    """OpenAI's refusal of a request to the API a model does not serve."""
    if api == "completions":
        message = ("This is a chat model and thus not supported in the v1/completions endpoint. Did you mean to "
                   "use v1/chat/completions?")
    else:
        message = ("This is not a chat model and thus not supported in the v1/chat/completions endpoint. Did you "
                   "mean to use v1/completions?")
    return _error(404, message)


def _prompts(prompt: Any) -> list[str]:
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return prompt
    return [prompt if isinstance(prompt, str) else json.dumps(prompt)]


def _chat_prompt(messages: Any) -> str:
    """What a responder sees of a chat request: its messages' texts (`_message_text`), one after another."""
    texts = [_message_text(m) for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
    return "\n".join(text for text in texts if text is not None)


def _message_text(message: dict) -> str | None:
    """A message's content, a line `tool_call NAME ARGUMENTS` per tool call it makes, and a tool
    result as `tool_result TOOL_CALL_ID: CONTENT` (None for a message with none of these)."""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if message.get("role") == "tool":
        content = f"tool_result {message.get('tool_call_id')}: {content if isinstance(content, str) else ''}"
    calls = message.get("tool_calls")
    lines = ([content] if isinstance(content, str) else []) + ([_call_line(c) for c in calls]
                                                                  if isinstance(calls, list) else [])
    return "\n".join(lines) if lines else None


def _call_line(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    function = function if isinstance(function, dict) else {}
    arguments = function.get("arguments")
    return f"tool_call {function.get('name')} {arguments if isinstance(arguments, str) else json.dumps(arguments)}"


def _chat_template(req: dict) -> str:
    """A chat request as a chat template lays it out (what the prompt cache sees and counts): the
    tools' JSON first, when there are any, then `<|ROLE|>\nTEXT\n` per message."""
    tools = req.get("tools")
    parts = [f"<|tools|>\n{json.dumps(tools, sort_keys=True)}\n"] if tools else []
    messages = req.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            parts.append(f"<|{message.get('role')}|>\n{_message_text(message) or ''}\n")
    return "".join(parts)


def _chat_choice(text: str | None, calls: list[dict], reason: str) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {"message": message, "finish_reason": reason, "logprobs": None}


def _text_choice(prompt: str, text: str, reason: str, req: dict, with_logprobs: bool) -> dict:
    full = prompt + text if req.get("echo") else text
    choice: dict = {"text": full, "finish_reason": reason, "logprobs": None}
    if with_logprobs and req.get("logprobs") is not None:
        # prompt and answer are tokenized apart, as by a real server: no token straddles the seam
        tokens = [(t, o + len(full) - len(text)) for t, o in tokenize(text)]
        tokens = tokenize(prompt) + tokens if req.get("echo") else tokens
        logprobs = [token_logprob(t) for t, _ in tokens]
        if req.get("echo") and logprobs:
            logprobs[0] = None  # a real server has no logprob for the very first token
        choice["logprobs"] = {
            "tokens": [t for t, _ in tokens], "token_logprobs": logprobs,
            "text_offset": [offset for _, offset in tokens],
            "top_logprobs": [None if lp is None else {t: lp} for (t, _), lp in zip(tokens, logprobs)],
        }
    return choice


# ---- out of process ---------------------------------------------------------------------------

def load_responder(spec: str) -> Responder:
    """`module:function` -> the function."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ValueError(f"responder must be module:function, not {spec!r}")
    return getattr(importlib.import_module(module), attr)


def _fault_arg(text: str) -> tuple[str, float]:
    kind, sep, prob = text.partition("=")
    if not sep or kind not in FAULT_KINDS:
        raise argparse.ArgumentTypeError(f"expected KIND=PROBABILITY with KIND in {', '.join(FAULT_KINDS)}")
    return kind, float(prob)


def _count_arg(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `least`."""
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {least}, not {value}")
        return value
    return count


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m decomp.runtime.testing.mock_server",
                                description="A local OpenAI-compatible server for tests and benchmarks.")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    p.add_argument("--latency", type=float, default=0.0, help="seconds each request takes")
    p.add_argument("--fault", type=_fault_arg, action="append", default=[], metavar="KIND=P",
                   help=f"inject a fault with probability P; KIND in {', '.join(FAULT_KINDS)}")
    p.add_argument("--seed", type=int, default=None, help="seed of the fault sequence")
    p.add_argument("--responder", default=None, metavar="MODULE:FUNCTION",
                   help="function (prompt, request_json) -> completion text")
    p.add_argument("--timeout-sleep", type=float, default=5.0, help="how long a 'timeout' fault stalls")
    p.add_argument("--retry-after-ms", type=int, default=50, help="retry-after-ms header of 429s")
    p.add_argument("--max-context", type=int, default=None, help="context length in tokens")
    p.add_argument("--min-max-tokens", type=int, default=0, help="reject smaller max_tokens")
    p.add_argument("--require-key", default=None, help="answer 401 to any other API key")
    p.add_argument("--no-logprobs", dest="logprobs", action="store_false", help="never return logprobs")
    p.add_argument("--api", dest="apis", action="append", default=None, choices=["completions", "chat"],
                   help="serve only this API (repeatable; default: both)")
    p.add_argument("--reject-field", dest="reject_fields", action="append", default=[], metavar="FIELD",
                   help="answer 400 to a request that carries this member (repeatable)")
    p.add_argument("--prompt-cache", action="store_true",
                   help="report usage.prompt_tokens_details.cached_tokens for prompt prefixes seen before")
    p.add_argument("--cache-min-tokens", type=_count_arg(0), default=1024,
                   help="shorter shared prefixes count as uncached (default: 1024, OpenAI's)")
    p.add_argument("--cache-block", type=_count_arg(1), default=128,
                   help="cached tokens are a multiple of this (default: 128)")
    p.add_argument("--reasoning-tokens", type=_count_arg(0), default=None,
                   help="report this many reasoning tokens in every reply's usage")
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    server = MockOpenAIServer(
        latency=args.latency, faults=dict(args.fault), seed=args.seed,
        responder=load_responder(args.responder) if args.responder else None,
        timeout_sleep=args.timeout_sleep, retry_after_ms=args.retry_after_ms, max_context=args.max_context,
        min_max_tokens=args.min_max_tokens, require_key=args.require_key, logprobs=args.logprobs,
        port=args.port, reject_fields=args.reject_fields, apis=args.apis or ("completions", "chat"),
        prompt_cache=args.prompt_cache, cache_min_tokens=args.cache_min_tokens, cache_block=args.cache_block,
        reasoning_tokens=args.reasoning_tokens, record=0)  # nothing out of process reads the record
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    base_url = server.start()
    print(storable_json({"base_url": base_url, "pid": os.getpid()}), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


_OPTION_FLAGS = {"port": "--port", "latency": "--latency", "seed": "--seed", "responder": "--responder",
                 "timeout_sleep": "--timeout-sleep", "retry_after_ms": "--retry-after-ms",
                 "max_context": "--max-context", "min_max_tokens": "--min-max-tokens",
                 "require_key": "--require-key", "cache_min_tokens": "--cache-min-tokens",
                 "cache_block": "--cache-block", "reasoning_tokens": "--reasoning-tokens"}


def start_subprocess(*, ready_timeout: float = 30.0, **opts: Any) -> tuple[subprocess.Popen, str]:
    """Start the server in a child process; returns it and its base URL once it is listening.

    Options are MockOpenAIServer's, with `faults` a dict and `responder` a "module:function"
    string (or an importable module-level function). Stop it with `stop_subprocess(proc)`.
    """
    if callable(opts.get("responder")):
        opts["responder"] = f"{opts['responder'].__module__}:{opts['responder'].__qualname__}"
    argv = [sys.executable, "-m", "decomp.runtime.testing.mock_server"]
    for kind, prob in (opts.pop("faults", None) or {}).items():
        argv += ["--fault", f"{kind}={prob}"]
    if not opts.pop("logprobs", True):
        argv.append("--no-logprobs")
    if opts.pop("prompt_cache", False):
        argv.append("--prompt-cache")
    for field in opts.pop("reject_fields", None) or ():
        argv += ["--reject-field", field]
    for api in opts.pop("apis", None) or ():
        argv += ["--api", api]
    for name, value in opts.items():
        if name not in _OPTION_FLAGS:
            raise TypeError(f"start_subprocess() got an unknown option {name!r}")
        if value is not None:
            argv += [_OPTION_FLAGS[name], str(value)]
    stderr = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=ready_timeout)
        return proc, json.loads(line)["base_url"]
    except (queue.Empty, ValueError, KeyError):
        try:
            exited = proc.wait(timeout=5)  # stdout closed: the child is exiting
        except subprocess.TimeoutExpired:
            exited = None
        stop_subprocess(proc)
        stderr.seek(0)
        detail = stderr.read().decode(errors="replace")[-2000:]
        why = f"exited with code {exited}" if exited is not None else f"did not start within {ready_timeout}s"
        raise RuntimeError(f"the mock server {why}:\n{detail}") from None
    finally:
        stderr.close()


def stop_subprocess(proc: subprocess.Popen, timeout: float = 10.0) -> int:
    """Terminate a server started by `start_subprocess` (kill it if it lingers); its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.returncode


if __name__ == "__main__":
    main()
