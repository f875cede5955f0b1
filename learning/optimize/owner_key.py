"""The user's owner key: a secret decomp makes once, in the user's state folder, and signs the
marker of every --out folder with (`folder.OwnedFolder`), so that only a marker decomp wrote for
that user and that folder makes the folder decomp's.

The key is `owner.key` in `$DECOMP_STATE_DIR`, else `$XDG_STATE_HOME/decomp`, else
`~/.local/state/decomp`: 64 hexadecimal digits, made on first use (`O_CREAT | O_EXCL`, mode
0600). A key that is not a plain file of the user's, that others may read or write, or that is
not 64 hexadecimal digits is refused in words; the key itself is never printed.
"""
from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from decomp.dsl.errors import DecompError

#: The environment variable naming the state folder (the tests' own, a user's on purpose).
STATE_ENV = "DECOMP_STATE_DIR"
KEY_FILE = "owner.key"
_KEY_DIGITS = 64


class OwnerKeyError(DecompError):
    """An owner key decomp may not use (not the user's, open to others, damaged), in words."""


def default_state_dir() -> Path:
    """$DECOMP_STATE_DIR, else $XDG_STATE_HOME/decomp, else ~/.local/state/decomp."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    base = os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state"
    return Path(base) / "decomp"


def owner_key(state_dir: Path | None = None) -> bytes:
    """The user's owner key in `state_dir` (default: `default_state_dir()`), made when there is
    none; an `OwnerKeyError` when the file there may not be used."""
    path = Path(state_dir or default_state_dir()) / KEY_FILE
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    _make_key(path)
    try:
        return _read_key(path)
    except FileNotFoundError:
        raise OwnerKeyError(f"the owner key {path} vanished as it was made: give the command again") from None


def sign(key: bytes, *parts: bytes) -> str:
    """The HMAC-SHA256 of `parts` (each length-prefixed, so no two lists sign alike), in hex."""
    mac = hmac.new(key, digestmod="sha256")
    for part in parts:
        mac.update(len(part).to_bytes(8, "big") + part)
    return mac.hexdigest()


def same(a: str, b: str) -> bool:
    """Whether two signatures are the same (in constant time)."""
    return hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))


def _read_key(path: Path) -> bytes:
    """The key at `path`; `FileNotFoundError` when there is none, `OwnerKeyError` when it may
    not be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as err:
        problem = "is a link, not a plain file" if path.is_symlink() else f"cannot be opened ({err.strerror or err})"
        raise OwnerKeyError(_refusal(path, problem)) from None
    problem = _key_file_problem(os.fstat(fd))
    if problem:
        os.close(fd)
        raise OwnerKeyError(_refusal(path, problem))
    with os.fdopen(fd, "rb") as file:
        data = file.read(_KEY_DIGITS + 2).strip()
    if len(data) != _KEY_DIGITS or data.strip(b"0123456789abcdef"):
        raise OwnerKeyError(_refusal(path, f"does not hold {_KEY_DIGITS} hexadecimal digits"))
    return bytes.fromhex(data.decode("ascii"))


def _key_file_problem(info: os.stat_result) -> str:
    """What makes a key file with status `info` unusable, in words ('' when nothing)."""
    if not stat.S_ISREG(info.st_mode):
        return "is not a plain file"
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o077:
        return f"can be read or written by others (mode {stat.S_IMODE(info.st_mode):04o}; chmod 600 it)"
    return ""


def _make_key(path: Path) -> None:
    """Write a new random key at `path`, whole, unless one appeared meanwhile: written to a file
    of its own (`O_CREAT | O_EXCL`, mode 0600), then linked into place (never over a key)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{KEY_FILE}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                     0o600)
    except OSError as err:
        raise OwnerKeyError(f"cannot make the owner key {path} ({err.strerror or err}): decomp signs the marker of "
                            f"its --out folders with it; set {STATE_ENV} to a folder of yours") from None
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(secrets.token_hex(_KEY_DIGITS // 2).encode("ascii") + b"\n")
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:  # another decomp made it first: theirs is the key
            pass
    finally:
        temporary.unlink(missing_ok=True)


def _refusal(path: Path, problem: str) -> str:
    return (f"the owner key {path} {problem}: decomp signs the marker of its --out folders with it and uses only "
            f"a plain file of yours that no one else can read; remove it (decomp makes a new one; folders signed "
            f"with the old one are then refused) or set {STATE_ENV} to another folder")
