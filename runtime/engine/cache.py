"""The step cache: every handler call and every model sample, in one SQLite file.

Keys are the sha256 of the sorted-key JSON of everything that affects a result (handler kind
and version, options, model, sampling options, sample index, rendered input); never an API
key. The file uses WAL and a busy timeout, so several processes can share it. Writes are
buffered and committed in batches (every `flush_every` entries or `flush_seconds`), which keeps
a cached call in the tens of microseconds; `close()` commits the rest.

Modes: `read-write` (default), `refresh` (recompute, then store), `off`, `replay` (a miss is an
error: for CI and exact re-runs).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from decomp.dsl.errors import CacheMiss
from decomp.dsl.values import Failed, storable_json
from decomp.runtime.paths import default_cache_dir
from decomp.runtime.sqlite_store import connect

__all__ = ["MODES", "CacheMiss", "StepCache", "cache_key", "decode_answer", "default_cache_dir", "encode_answer"]

MODES = ("read-write", "refresh", "off", "replay")
_MISSING = object()


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of `parts`."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate hashes too


#: A failed outcome is stored as {FAILED: value}; an answer that is itself an object whose only
#: key is FAILED or ESCAPED is stored as {ESCAPED: answer}, so that every answer reads back as it was.
FAILED, ESCAPED = "$failed", "$failedok"


def encode_answer(answer: Any) -> Any:
    """A handler's answer (maybe a `Failed`) as the JSON the step cache stores."""
    if isinstance(answer, Failed):
        return {FAILED: answer.value}
    if isinstance(answer, dict) and len(answer) == 1 and (FAILED in answer or ESCAPED in answer):
        return {ESCAPED: answer}
    return answer


def decode_answer(stored: Any) -> Any:
    """The answer `encode_answer` stored."""
    if isinstance(stored, dict) and len(stored) == 1:
        if FAILED in stored:
            return Failed(stored[FAILED])
        if ESCAPED in stored:
            return stored[ESCAPED]
    return stored


class StepCache:
    """A key -> JSON value store with the four cache modes."""

    def __init__(self, path: str | Path | None = None, mode: str = "read-write", *,
                 flush_every: int = 256, flush_seconds: float = 0.5):
        if mode not in MODES:
            raise ValueError(f"unknown cache mode {mode!r}; use one of {', '.join(MODES)}")
        self.mode = mode
        self.path = Path(path) if path is not None else default_cache_dir() / "steps.sqlite"
        self.flush_every, self.flush_seconds = flush_every, flush_seconds
        self._pending: dict[str, str] = {}
        self._last_flush = time.monotonic()
        self._db: sqlite3.Connection | None = None

    @property
    def reads(self) -> bool:
        return self.mode in ("read-write", "replay")

    @property
    def writes(self) -> bool:
        return self.mode in ("read-write", "refresh")

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = connect(self.path, schema="CREATE TABLE IF NOT EXISTS steps (key TEXT PRIMARY KEY, "
                               "value TEXT NOT NULL, created REAL NOT NULL)",
                               isolation_level=None, check_same_thread=False)
        return self._db

    def get(self, key: str, what: str = "call") -> Any:
        """The stored value, or `_MISSING` (see `hit`); in replay mode a miss raises `CacheMiss`."""
        if not self.reads:
            return _MISSING
        text = self._pending.get(key)
        if text is None:
            row = self._connect().execute("SELECT value FROM steps WHERE key = ?", (key,)).fetchone()
            text = row[0] if row else None
        if text is None:
            if self.mode == "replay":
                raise CacheMiss(f"replay mode: nothing cached for {what}")
            return _MISSING
        return json.loads(text)

    @staticmethod
    def hit(value: Any) -> bool:
        return value is not _MISSING

    def put(self, key: str, value: Any) -> None:
        if not self.writes:
            return
        self._pending[key] = storable_json(value)
        if len(self._pending) >= self.flush_every or time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Commit buffered writes in one transaction."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        rows = [(k, v, time.time()) for k, v in self._pending.items()]
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR REPLACE INTO steps (key, value, created) VALUES (?, ?, ?)", rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._pending.clear()

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __len__(self) -> int:
        self.flush()
        return self._connect().execute("SELECT COUNT(*) FROM steps").fetchone()[0]
