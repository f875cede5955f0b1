"""The server's standard input and output, framed as the protocol frames a message
(`Content-Length: N`, a blank line, N bytes of JSON), whatever the client sends.

`Frames` reads the client's bytes and hands pygls only well-formed frames:

- a body that is not UTF-8 is repaired: each invalid byte becomes U+FFFD, so the message is
  still read and answered (pygls would otherwise drop it whole, a request among them);
- a frame whose header cannot be read (no `Content-Length`, one that is not a number of bytes,
  such as `-5`, two that disagree, a header line that is not `Name: value` or is over
  `MAX_HEADER_LINE` bytes, over `MAX_HEADERS` lines, an empty body) is answered with a JSON-RPC
  parse error whose id is null (as JSON-RPC answers a message it cannot read). When its length
  is known its body is skipped, and the next frame starts after it; when not, the reader
  resynchronises at the next `Content-Length:` header, in mid-line too: a body of unknown
  length ends where the next header begins;
- a body over `MAX_BODY_BYTES` is answered so too and skipped: read and dropped `CHUNK` bytes at
  a time, never held.

Bytes that are not a frame at all are answered once per run of them. The refusals go out
through `Output`, the server's standard output, which writes each frame whole: pygls writes
from the event loop, the reader from its thread.
"""
from __future__ import annotations

import json
import logging
import re
import threading
from typing import BinaryIO

log = logging.getLogger(__name__)

#: A message body over this many bytes is refused and skipped. A document at the checker's size
#: limit (1,000,000 characters) fits many times over, even with every character escaped in JSON.
MAX_BODY_BYTES = 64 * 1024 * 1024
#: A header line over this many bytes is refused (it is read and dropped in pieces this long).
MAX_HEADER_LINE = 8192
#: A frame with more header lines than this is refused.
MAX_HEADERS = 32
#: Bytes read at a time while a refused body is skipped.
CHUNK = 64 * 1024
#: JSON-RPC's error code for a message that cannot be read.
PARSE_ERROR = -32700
#: A `Content-Length` of more digits than this is more bytes than any input holds: it is read
#: as `_NO_END` (its body is skipped to the end of the input).
_MAX_DIGITS = 18
_NO_END = 10 ** _MAX_DIGITS

_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:[ \t]*(.*?)[ \t]*\r?\n")
_LENGTH_HEADER = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)


class Output:
    """The server's standard output for pygls: each `write` (a whole frame) goes out at once,
    flushed, never interleaved with another; `refuse` answers a message that cannot be read."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self.stream.write(data)
            self.stream.flush()

    def flush(self) -> None:
        with self._lock:
            self.stream.flush()

    def close(self) -> None:
        self.stream.close()

    def refuse(self, message: str) -> None:
        """Send a JSON-RPC parse error with a null id, saying `message`."""
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": PARSE_ERROR, "message": message}})
        self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body.encode("ascii"))


class Frames:
    """A binary reader for pygls (`readline`, `read`) that passes on only the well-formed frames
    of `stream`, each body valid UTF-8 and at most `limit` bytes; every other frame is answered
    through `out` (when given) and passed by."""

    def __init__(self, stream: BinaryIO, out: Output | None = None, limit: int = MAX_BODY_BYTES):
        self.stream = stream
        self.out = out
        self.limit = limit
        #: How many message bodies were repaired, and how many frames (or runs of stray bytes) refused.
        self.repaired = 0
        self.refused = 0
        self._lines: list[bytes] = []  # the header lines of the frame being passed on
        self._body = b""
        self._lost = False  # after a refusal: stray bytes are the refused frame's, not refused again

    def readline(self) -> bytes:
        """The next header line of a well-formed frame; b"" at the end of the input."""
        if not self._lines:
            body = self._next_body()
            if body is None:
                return b""
            self._lines, self._body = [b"Content-Length: %d\r\n" % len(body), b"\r\n"], body
        return self._lines.pop(0)

    def read(self, n: int) -> bytes:
        """The body of the frame whose header lines were just read."""
        body, self._body = self._body, b""
        return body

    def close(self) -> None:
        self.stream.close()

    # ---------------------------------------------------------------- frames
    def _next_body(self) -> bytes | None:
        """The next acceptable body, every frame before it refused; None at the end of the input."""
        while True:
            block = self._headers()
            if block is None:
                return None
            headers, problem = block
            length, wrong = _length(headers)
            problem = problem or wrong
            if problem is None and length > self.limit:
                size = f"{length:,} bytes" if length < _NO_END else f"more than {_NO_END - 1:,} bytes"
                problem = f"a message of {size} is over the limit of {self.limit:,} bytes: skipped"
            if problem is None:
                body = self.stream.read(length)
                return self._repaired(body) if len(body) == length else None  # None: the input ended in it
            self._refuse(problem)
            if length is not None:  # where the frame ends is known: skip its body, and in step again
                if not self._skip(length):
                    return None
                self._lost = False

    def _headers(self) -> tuple[list[tuple[bytes, bytes]], str | None] | None:
        """The next frame's header lines as (name, value), read up to their blank line, and what
        is wrong with them (a line that is not `Name: value`, too long a line, too many lines);
        None at the end of the input."""
        first = self._first_header()
        if first is None:
            return None
        headers, problem = [first], None
        while True:
            line, whole = self._line()
            if not line:
                return None
            if whole and line in (b"\r\n", b"\n"):
                return headers, problem
            match = _HEADER.fullmatch(line) if whole else None
            if match is None or len(headers) >= MAX_HEADERS:
                problem = problem or _bad_header(whole, len(headers))
            else:
                headers.append(match.groups())

    def _first_header(self) -> tuple[bytes, bytes] | None:
        """The first header line of the next frame: blank lines passed by; other bytes refused
        (once for a run of them) and searched for the `Content-Length:` that begins the next
        frame, as is every line after a refusal (a lost body's last bytes, `abcde`, run into the
        next header, which reads as one name: `abcdeContent-Length: 42`). None at the end of the
        input."""
        while True:
            line, whole = self._line()
            if not line:
                return None
            if whole and not line.strip():
                continue
            match = _HEADER.fullmatch(line) if whole and not self._lost else None
            if match is None:  # or, after a refusal, the rest of a lost body runs into the next header
                if not self._lost:
                    self._refuse("bytes that are not a message header were skipped")
                found = list(_LENGTH_HEADER.finditer(line))
                match = _HEADER.fullmatch(line, found[-1].start()) if found else None
                if match is None:
                    continue
            self._lost = False
            return match.group(1), match.group(2)

    # ---------------------------------------------------------------- bytes
    def _line(self) -> tuple[bytes, bool]:
        """The next line, and whether it is whole: one over `MAX_HEADER_LINE` bytes comes back as
        its last `MAX_HEADER_LINE` bytes, the rest read and dropped. b"" at the end of the input."""
        line = self.stream.readline(MAX_HEADER_LINE)
        if len(line) < MAX_HEADER_LINE or line.endswith(b"\n"):
            return line, True
        while True:
            more = self.stream.readline(MAX_HEADER_LINE)
            line = (line + more)[-MAX_HEADER_LINE:]
            if len(more) < MAX_HEADER_LINE or more.endswith(b"\n"):
                return line, False

    def _skip(self, length: int) -> bool:
        """Read and drop `length` bytes, a chunk at a time; False when the input ends first."""
        while length > 0:
            chunk = self.stream.read(min(CHUNK, length))
            if not chunk:
                return False
            length -= len(chunk)
        return True

    def _repaired(self, body: bytes) -> bytes:
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            self.repaired += 1
            log.warning("a message that is not UTF-8: its invalid bytes read as U+FFFD")
            return body.decode("utf-8", errors="replace").encode("utf-8")
        return body

    def _refuse(self, message: str) -> None:
        self.refused += 1
        self._lost = True
        log.warning("refused: %s", message)
        if self.out is not None:
            self.out.refuse(f"decomp lsp: {message}")


#: The name `decomp lsp` starts its reader by (`editors/lsp/command.py`).
Utf8Repair = Frames


def _length(headers: list[tuple[bytes, bytes]]) -> tuple[int | None, str | None]:
    """The body's length the headers give (None: unknown), and what is wrong with it."""
    values = {value for name, value in headers if name.lower() == b"content-length"}
    if len(values) != 1:
        return None, ("a message without a Content-Length header" if not values
                      else "a message whose Content-Length headers disagree")
    value = values.pop()
    if not value.isdigit():
        return None, f"a Content-Length that is not a number of bytes: {_shown(value)}"
    digits = value.lstrip(b"0")
    if not digits:
        return 0, "a message with an empty body (Content-Length: 0)"
    return (int(digits) if len(digits) <= _MAX_DIGITS else _NO_END), None


def _bad_header(whole: bool, count: int) -> str:
    if not whole:
        return f"a message header line over {MAX_HEADER_LINE:,} bytes"
    if count >= MAX_HEADERS:
        return f"a message with more than {MAX_HEADERS} header lines"
    return "a message header line that is not `Name: value`"


def _shown(data: bytes, most: int = 40) -> str:
    """`data`'s start, as a message may show it."""
    text = data.rstrip(b"\r\n").decode("utf-8", errors="replace")
    return repr(text[:most] + ("..." if len(text) > most else ""))
