"""The run directory's locks: one process writes a run (an exclusive `flock` on run.lock), and
reading a run whole holds writers off."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

from decomp.runtime.storage.layout import LOCK, RunDirError
from decomp.runtime.storage.writable import reason, writable_problem

try:
    import fcntl
    _CAN_LOCK = True
except ImportError:  # pragma: no cover - not POSIX
    _CAN_LOCK = False


def writer_lock(path: Path) -> Any:
    """Take the run's writer lock (an exclusive `flock` on `path/run.lock`), or raise
    `RunDirError` when another process holds it. Returns the open lock file (None where the
    platform has no `flock`); the lock goes with the process, so a killed run leaves none.
    run.lock is opened without following a symbolic link (`O_NOFOLLOW`) and must be a plain
    file: a link there (it could point anywhere) or a FIFO is refused with a message."""
    if not _CAN_LOCK:  # pragma: no cover - not POSIX: no lock
        return None
    return _flock(_open_lock(path / LOCK), path, shared=False)  # never written: the lock is the flock itself


def _flock(handle: Any, path: Path, shared: bool) -> Any:
    """`handle` with a non-blocking flock taken (shared or exclusive), else closed and a
    `RunDirError` saying another run writes `path`."""
    try:
        fcntl.flock(handle, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        advice = "" if shared else ", or use another --run-dir"  # a reader cannot pick another
        raise RunDirError(f"{path} is being written by another decomp run: wait for it to end{advice}") from None
    return handle


def reading_lock(path: Path) -> Any:
    """Hold off writers of the run directory `path` while it is read whole (`decomp merge`):
    its writer lock where the folder can be written; else a shared lock on its run.lock, opened
    for reading (none there: no run ever wrote this folder as it is now). A `RunDirError` when
    a run is writing it."""
    if writable_problem(path) is None:
        return writer_lock(path)
    if not _CAN_LOCK:  # pragma: no cover - not POSIX: no lock
        return None
    try:
        fd = os.open(path / LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise RunDirError(f"cannot open {path / LOCK}: {reason(err)}") from None
    return _flock(os.fdopen(fd, "rb"), path, shared=True)


def _open_lock(file: Path) -> Any:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(file, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise RunDirError(f"{file} is a symbolic link: decomp does not follow it (it could point at any "
                              "file); delete the link, then run again") from None
        if err.errno in (errno.ENXIO, errno.EISDIR):
            raise RunDirError(f"{file} is not a plain file: delete it, then run again") from None
        raise RunDirError(f"cannot open {file}: {reason(err)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunDirError(f"{file} is not a plain file: delete it, then run again")
    return os.fdopen(fd, "ab")


def release(lock: Any) -> None:
    """Let go of a lock `writer_lock` or `reading_lock` took (None: there was none)."""
    if lock is not None:
        lock.close()  # closing the file releases the flock
