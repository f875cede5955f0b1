"""Opening decomp's SQLite files (the step cache, a run's traces) one way: WAL, a busy timeout.

WAL lets one process write while others read, and several processes share a file through the
busy timeout. Switching a new file to WAL needs a lock that the busy timeout does not always
wait for (two processes opening a fresh file at once: `PRAGMA journal_mode=WAL` can fail at once
with "database is locked"), so `connect` sets WAL only when the file is not in WAL yet and
retries that step itself, within the same timeout.
"""
from __future__ import annotations

import sqlite3
import time
from pathlib import Path

#: SQLITE_BUSY and SQLITE_LOCKED (primary result codes)
_BUSY_CODES = (5, 6)


def connect(path: str | Path, *, schema: str | None = None, timeout: float = 30.0,
            **options) -> sqlite3.Connection:
    """A connection to the SQLite file `path` (its folder made if needed) in WAL mode with
    synchronous=NORMAL and a busy timeout of `timeout` seconds; `schema` (one statement, e.g.
    CREATE TABLE IF NOT EXISTS) is run on it. Other `options` go to `sqlite3.connect`
    (isolation_level, check_same_thread)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=timeout, **options)
    try:
        _use_wal(db, timeout)
        db.execute("PRAGMA synchronous=NORMAL")
        if schema:
            db.execute(schema)
    except BaseException:
        db.close()
        raise
    return db


def _use_wal(db: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode unless it is already, retrying while another process holds it."""
    deadline, pause = time.monotonic() + timeout, 0.002
    while True:
        try:
            if str(db.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if not _busy(err) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _busy(err: sqlite3.OperationalError) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(err) or "busy" in str(err)
