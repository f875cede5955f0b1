"""A client of a real `decomp lsp` process that writes raw bytes to its standard input (framing
no client library would send) and reads its messages on a thread, so that a test that waits
for an answer waits at most its timeout, never for ever."""
from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path

from tests.editors.lsp.lsp_helpers import SERVER


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def message(payload: dict) -> bytes:
    return frame(json.dumps(payload).encode("utf-8"))


class RawServer:
    """`decomp lsp` in a subprocess: `write` bytes, `send` messages, `wait` for what it sends."""

    def __init__(self, *args: str, cwd: Path | None = None):
        self.process = subprocess.Popen(SERVER + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, cwd=cwd)
        self._incoming: queue.Queue = queue.Queue()
        self._backlog: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def __enter__(self) -> "RawServer":
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait(timeout=30)

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    self._incoming.put(None)
                    return
                if header.lower().startswith(b"content-length:"):
                    length = int(header.split(b":")[1])
                if header == b"\r\n":
                    break
            self._incoming.put(json.loads(stream.read(length)))

    # ---------------------------------------------------------------- sending
    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, *payloads: dict) -> None:
        self.write(b"".join(message({"jsonrpc": "2.0", **payload}) for payload in payloads))

    def request(self, ident: int, method: str, params: dict | None = None) -> bytes:
        """The bytes of a request (to `write`, after hostile ones)."""
        return message({"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}})

    def initialize(self, root: Path | None = None) -> dict:
        self.send({"id": 0, "method": "initialize", "params": {
            "capabilities": {}, "rootUri": root.as_uri() if root else None}})
        answer = self.answer(0)
        self.send({"method": "initialized", "params": {}})
        return answer

    def open(self, path: Path, text: str, version: int = 1, language: str = "decomp") -> str:
        uri = path.resolve().as_uri()
        self.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": language, "version": version, "text": text}}})
        return uri

    # ---------------------------------------------------------------- receiving
    def wait(self, predicate, timeout: float = 60.0, what: str = "a message") -> dict:
        """The first message, received or still to come, for which `predicate` holds (it is
        taken out of the backlog)."""
        deadline = time.monotonic() + timeout
        while True:
            for held in self._backlog:
                if predicate(held):
                    self._backlog.remove(held)
                    return held
            try:
                got = self._incoming.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"timed out waiting for {what}; received {self._backlog!r}"[:3000]) from None
            if got is None:
                raise AssertionError(f"the server's output ended before {what}; received {self._backlog!r}"[:3000])
            self._backlog.append(got)

    def answer(self, ident: int, timeout: float = 60.0) -> dict:
        return self.wait(lambda m: m.get("id") == ident and "method" not in m, timeout, f"the answer to {ident}")

    def refusal(self, timeout: float = 60.0) -> dict:
        """The next error answered to no request (id null): a message the server could not read."""
        return self.wait(lambda m: "error" in m and m.get("id") is None, timeout, "an error with id null")["error"]

    def diagnostics(self, uri: str, predicate=lambda d: True, timeout: float = 60.0) -> list[dict]:
        """The diagnostics published for `uri` next for which `predicate(them)` holds."""
        found = self.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                          and m["params"]["uri"] == uri and predicate(m["params"]["diagnostics"]),
                          timeout, f"diagnostics of {uri}")
        return found["params"]["diagnostics"]

    def shutdown(self) -> int:
        """Shut the server down as a client does; its exit code."""
        self.send({"id": 99_999, "method": "shutdown"})
        self.answer(99_999)
        self.send({"method": "exit"})
        return self.process.wait(timeout=30)
