"""An HTTP server on 127.0.0.1 that misbehaves on purpose, for tests of clients' deadlines
(standard library only, a thread per connection):

    with MisbehavingServer("trickle", interval=0.5) as server:
        OpenAIModel("m", ModelSettings(base_url=server.url + "/v1", timeout=2, attempt_deadline=3))

Every request (any method and path) has its head and `Content-Length` body read, then gets
what `behaviour` says:

    trickle        200 headers announcing `Content-Length: 100000`, then one byte of the body
                   every `interval` seconds: each read is fast, the reply never completes
    hang           200 headers announcing a body, then nothing (the connection stays open)
    close          200 headers announcing 100000 bytes, 10 of them, then the connection closes
    chunked-close  200 headers with `Transfer-Encoding: chunked`, one chunk, then the
                   connection closes without the final empty chunk
    reset          no reply: the connection is reset (RST, by closing with SO_LINGER 0)

Headers also say `X-Elastic-Product: Elasticsearch`, so the Elasticsearch client gets as far
as reading the body. `requests` counts the requests read.
"""
from __future__ import annotations

import socket
import struct
import threading

BEHAVIOURS = ("trickle", "hang", "close", "chunked-close", "reset")
_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Elastic-Product: Elasticsearch\r\n")


class MisbehavingServer:
    """A server on a free port of 127.0.0.1 (see the module docstring); `url` has no path."""

    def __init__(self, behaviour: str, *, interval: float = 0.5):
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}; known: {', '.join(BEHAVIOURS)}")
        self.behaviour, self.interval = behaviour, interval
        self.requests = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, name="misbehaving", daemon=True).start()

    def __enter__(self) -> MisbehavingServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop accepting and close every open connection."""
        self._stop.set()
        self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            _close(conn)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            while not self._stop.is_set() and _read_request(conn):
                with self._lock:
                    self.requests += 1
                if not self._answer(conn):
                    return
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
            _close(conn)

    def _answer(self, conn: socket.socket) -> bool:
        """Misbehave on one request; whether the connection is still usable after it."""
        if self.behaviour == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if self.behaviour == "chunked-close":
            conn.sendall(_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"5\r\n{\"cho\r\n")
            return False
        conn.sendall(_HEAD + b"Content-Length: 100000\r\n\r\n")
        if self.behaviour == "close":
            conn.sendall(b'{"choices"')
            return False
        if self.behaviour == "hang":
            self._stop.wait()
            return False
        while not self._stop.wait(self.interval):  # trickle
            conn.sendall(b" ")
        return False


def _read_request(conn: socket.socket) -> bool:
    """Read one request's head and body; False when the client closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip() or 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        body += chunk
    return True


def _close(conn: socket.socket) -> None:
    try:
        conn.close()
    except OSError:
        pass
