"""Writing a file whole or not at all: the bytes go to a new file beside it, renamed over it once
written, so a failure leaves the old file (or none) and never half of one. The file gets the
mode `open()` would give it (mkstemp's own is 0600)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_whole"]


def write_whole(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` at once (its folder must exist)."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        mask = os.umask(0o022)
        os.umask(mask)
        os.fchmod(handle, 0o666 & ~mask)
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
