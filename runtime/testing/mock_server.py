"""A local OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

    with MockOpenAIServer(latency=0.05, faults={"429": 0.1}, seed=1) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="unused")
        ...
        server.stats()  # {"requests": ..., "in_flight": ..., "max_in_flight": ..., "faults": {...}}

or, out of process (no GIL shared with the client, for benchmarks):

    python -m decomp.runtime.testing.mock_server --latency 0.1 --fault 429=0.1 --seed 1
    # prints {"base_url": "http://127.0.0.1:PORT/v1", "pid": ...} once ready; runs until killed

Routes: POST /v1/completions, POST /v1/chat/completions, GET /stats, POST /reset-stats.

Text is split into whitespace tokens (each with its leading whitespace, so offsets tile the
text); a token's logprob is -0.1 * len(token). Answers come from `responder(prompt,
request_json)` (default: the prompt's last non-empty line), cut at the request's stop
sequences and at `max_tokens` tokens.

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

`server.requests`: the JSON bodies of the last `record` API requests received (10,000 by
default; faulted and refused ones too), oldest first, for tests of what a client sent.
"""
from __future__ import annotations

import argparse
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

Responder = Callable[[str, dict], str]
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
                 record: int = 10_000):
        unknown = set(faults or {}) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
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
                    "max_in_flight": self._max_in_flight, "faults": dict(self._fault_counts)}

    def reset_stats(self) -> None:
        """Zero the counters and forget the recorded requests."""
        with self._lock:
            self._requests = self._in_flight = self._max_in_flight = 0
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
        prompt_tokens = sum(len(tokenize(p)) for p in prompts)
        too_long = self._too_long(prompts, limit or 0)
        if too_long:
            return _error(400, too_long, "context_length_exceeded", param="messages" if chat else "prompt")
        choices, completion_tokens = [], 0
        for prompt in prompts:
            for _ in range(max(1, int(req.get("n") or 1))):
                text, reason = self._generate(prompt, req, limit)
                completion_tokens += len(tokenize(text))
                choice = _chat_choice(text, reason) if chat else _text_choice(prompt, text, reason, req,
                                                                              self.logprobs)
                choices.append({"index": len(choices), **choice})
        reply = {"id": f"mock-{time.monotonic_ns()}", "object": "chat.completion" if chat else "text_completion",
                 "created": int(time.time()), "model": req.get("model", ""), "choices": choices,
                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens}}
        if self.usage:
            merged = {**reply["usage"], **self.usage}
            reply["usage"] = {name: value for name, value in merged.items() if value is not None}
        return 200, {"Content-Type": "application/json"}, storable_json(reply).encode()

    def _too_long(self, prompts: list[str], limit: int) -> str | None:
        if self.max_context is None:
            return None
        longest = max(len(tokenize(p)) for p in prompts)
        if longest + limit <= self.max_context:
            return None
        return (f"This model's maximum context length is {self.max_context} tokens, however you requested "
                f"{longest + limit} tokens ({longest} in your prompt; {limit} for the completion). "
                "Please reduce your prompt; or completion length.")

    def _generate(self, prompt: str, req: dict, limit: int | None) -> tuple[str, str]:
        text = str(self.responder(prompt, req))
        stops = req.get("stop") or []
        for stop in [stops] if isinstance(stops, str) else stops:
            if stop and stop in text:
                text = text[:text.index(stop)]
        tokens = tokenize(text)
        if limit is not None and len(tokens) > limit:
            return text[:tokens[limit][1]], "length"
        return text, "stop"


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


def _prompts(prompt: Any) -> list[str]:
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
        return prompt
    return [prompt if isinstance(prompt, str) else json.dumps(prompt)]


def _chat_prompt(messages: list) -> str:
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str):
            parts.append(content)
    return "\n".join(parts)


def _chat_choice(text: str, reason: str) -> dict:
    return {"message": {"role": "assistant", "content": text}, "finish_reason": reason, "logprobs": None}


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
    p.add_argument("--reject-field", dest="reject_fields", action="append", default=[], metavar="FIELD",
                   help="answer 400 to a request that carries this member (repeatable)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    server = MockOpenAIServer(
        latency=args.latency, faults=dict(args.fault), seed=args.seed,
        responder=load_responder(args.responder) if args.responder else None,
        timeout_sleep=args.timeout_sleep, retry_after_ms=args.retry_after_ms, max_context=args.max_context,
        min_max_tokens=args.min_max_tokens, require_key=args.require_key, logprobs=args.logprobs,
        port=args.port, reject_fields=args.reject_fields, record=0)  # nothing out of process reads them
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
                 "require_key": "--require-key"}


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
    for field in opts.pop("reject_fields", None) or ():
        argv += ["--reject-field", field]
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
