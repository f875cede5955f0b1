"""Whether a run directory can be written, asked of the system and tried; what a read-only one
is told, and its traces opened read-only."""
from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from pathlib import Path

from decomp.runtime.storage.layout import LOCK, MANIFEST, RESULTS, TRACES, RunDirError

#: What a read-only run directory is told: by a run that would resume it, and by one that would start there.
READ_ONLY_ADVICE = ("a run directory must be writable to run in it: make it writable, or copy it to a "
                    "writable place and resume the copy (--run-dir COPY --resume); `decomp trace show` and "
                    "`decomp eval` read it as it is")
READ_ONLY_NEW = ("a run directory must be writable to run in it: make it writable, or give another --run-dir; "
                 "`decomp trace show` and `decomp eval` read a run there as it is")


def writable_problem(path: Path) -> str | None:
    """Why the existing folder `path` cannot be written, in words ("permission denied", "a
    read-only file system"), or None when it can. It asks the system (`os.access`), then tries:
    a temporary file made (and gone) in the folder, and each run file there opened for appending
    (nothing written), since root passes `os.access` everywhere while a read-only file system
    or an immutable folder still refuses it."""
    if not os.access(path, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return reason(err)
    for name in (MANIFEST, RESULTS, TRACES, TRACES + "-wal", TRACES + "-shm", LOCK):
        file = path / name
        if file.is_symlink() or not file.is_file():
            continue
        try:
            os.close(os.open(file, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK))
        except OSError as err:
            return f"{name}: {reason(err)}"
    return None


def require_writable(path: Path, doing: str, advice: str = READ_ONLY_ADVICE) -> None:
    """Raise `RunDirError` saying `path` is read-only (never that it is corrupt, nor to --force)."""
    problem = writable_problem(path)
    if problem is not None:
        raise RunDirError(f"{path} is read-only ({problem}): cannot {doing}; {advice}")


def reason(err: OSError) -> str:
    """Why an operating-system call failed, in a few words ("permission denied")."""
    if err.errno == errno.EROFS:
        return "a read-only file system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return err.strerror or type(err).__name__


def read_only_error(err: sqlite3.DatabaseError) -> bool:
    """Whether SQLite's `err` says the file cannot be written (not that it is damaged)."""
    text = str(err).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def connect_read_only(file: Path) -> sqlite3.Connection:
    """`file` opened read-only (`mode=ro`). In a folder one cannot write, SQLite cannot make the
    -shm file a WAL database needs: unless the -wal and -shm files are there already (then they
    are read as they are), the file is opened as immutable (a run that ended closes its WAL)."""
    uri = file.resolve().as_uri() + "?mode=ro"
    wal = [file.with_name(file.name + suffix) for suffix in ("-wal", "-shm")]
    if not all(p.is_file() for p in wal) and writable_problem(file.parent) is not None:
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True)
