"""The server's standard input, read as the protocol frames it, with a message body that is not
UTF-8 repaired: each invalid byte becomes U+FFFD, so the message is still read and answered (the
protocol's reader would otherwise drop it whole, a request among them, unanswered)."""
from __future__ import annotations

import logging
from typing import BinaryIO

log = logging.getLogger(__name__)


class Utf8Repair:
    """A binary reader for pygls: `readline` passes headers through; `read(n)` (a body) comes
    back as valid UTF-8."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        #: How many message bodies were repaired.
        self.repaired = 0

    def readline(self) -> bytes:
        return self.stream.readline()

    def read(self, n: int) -> bytes:
        body = self.stream.read(n)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            self.repaired += 1
            log.warning("a message that is not UTF-8: its invalid bytes read as U+FFFD")
            return body.decode("utf-8", errors="replace").encode("utf-8")
        return body

    def close(self) -> None:
        self.stream.close()
