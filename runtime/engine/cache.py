"""The step cache: every handler call and every model sample, in one SQLite file.

Keys are the sha256 of the sorted-key JSON of everything that affects a result (handler kind
and version, options, model, sampling options, sample index, rendered input); never an API
key. The file uses WAL and a busy timeout, so several processes can share it. Writes are
buffered and committed in batches (every `flush_every` entries or `flush_seconds`), which keeps
a cached call in the tens of microseconds; `close()` commits the rest.

Modes: `read-write` (default), `refresh` (recompute, then store), `off`, `replay` (a miss is an
error: for CI and exact re-runs).

The file is never trusted blindly: each entry carries a checksum of its key and value, and one
that does not match (a torn write, a value changed by accident or by a tool unaware of the
checksum) is a miss, recomputed. The checksum is not a signature: whoever can write the file
can forge it; so a value is also read with `deepjson` (any depth, in linear time) and must be
of the shape its reader asks for (`get(..., shape=...)`: a model sample is `{"text": str}`)
and no deeper than `deepjson.MAX_VALUE_DEPTH`, else it too is a miss. A file that is
not a usable cache (damaged, not SQLite, another program's), or one that cannot be written (a
full disk), is reported once by path (`CacheWarning`, and `problem`) and bypassed: the run goes
on uncached, never a per-row error. In replay mode, where the cache is the answer, that ends
the row as a `CacheMiss` naming the path.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any, Mapping

from decomp.dsl.errors import CacheMiss
from decomp.dsl.values import Failed, json_kind
from decomp.runtime.engine import deepjson
from decomp.runtime.paths import default_cache_dir
from decomp.runtime.sqlite_store import connect

__all__ = ["MODES", "CacheMiss", "CacheWarning", "StepCache", "cache_key", "decode_answer", "default_cache_dir",
           "encode_answer"]

MODES = ("read-write", "refresh", "off", "replay")
_MISSING = object()


def cache_key(parts: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of `parts` (keys sorted, no spaces).

    Only JSON goes in: dicts with string keys, lists (a tuple counts as the list it would be
    in JSON), strings, numbers, booleans and None. Anything else raises `TypeError` naming its
    type, never a stand-in text such as its `repr`: two different objects printing alike (or an
    object's address reused by another) would share a key and be served each other's answers."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_not_json)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate hashes too


def _not_json(value: Any) -> Any:
    raise TypeError(f"cache_key: a part of type {type(value).__qualname__} is not JSON; convert it to "
                    "JSON (text, numbers, lists, objects) first")


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


class CacheWarning(UserWarning):
    """The step cache's file cannot be used (damaged, foreign, not writable) and is bypassed."""


_SCHEMA = ("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
           "checksum TEXT NOT NULL, created REAL NOT NULL)")


def _checksum(key: str, text: str) -> str:
    return hashlib.sha256(f"{key}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


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
        #: Why the file is bypassed (None while it is in use); `rejected`: entries whose checksum
        #: did not match, recomputed.
        self.problem: str | None = None
        self.rejected = 0

    @property
    def reads(self) -> bool:
        return self.mode in ("read-write", "replay") and self.problem is None

    @property
    def writes(self) -> bool:
        return self.mode in ("read-write", "refresh") and self.problem is None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = connect(self.path, schema=_SCHEMA, isolation_level=None, check_same_thread=False)
        return self._db

    def _bypass(self, doing: str, err: Exception) -> None:
        """Stop using the file, saying so once: `doing` failed with `err`."""
        self.problem = (f"step cache {self.path}: cannot {doing} ({type(err).__name__}: {err}); it is bypassed "
                        "and the run goes on uncached: delete the file or choose another --cache-dir")
        self._pending.clear()
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None
        warnings.warn(self.problem, CacheWarning, stacklevel=3)

    def get(self, key: str, what: str = "call", shape: Mapping[str, type | tuple[type, ...]] | None = None) -> Any:
        """The stored value, or `_MISSING` (see `hit`); in replay mode a miss raises `CacheMiss`.
        With `shape` (field name -> the type(s) its value has), a value that is not an object
        with those fields is damaged: a miss, like one whose checksum does not hold."""
        if not self.reads:
            if self.mode == "replay":
                raise CacheMiss(f"replay mode: {self.problem}")
            return _MISSING
        text = self._pending.get(key)
        value, damage = self._stored(key) if text is None else (deepjson.loads(text), None)
        if value is not _MISSING and shape is not None:
            damage = _shape_problem(value, shape)
            value = _MISSING if damage else value
        if damage:
            self.rejected += 1
        if value is _MISSING and self.mode == "replay":
            why = f"the entry for {what} is damaged ({damage}): recompute it without --cache replay" if damage \
                else f"nothing cached for {what}" + (f" ({self.problem})" if self.problem else "")
            raise CacheMiss(f"replay mode: {why}")
        return value

    def _stored(self, key: str) -> tuple[Any, str | None]:
        """The stored value of `key` (`_MISSING` when there is none) and, when the entry is
        damaged (its checksum does not hold, not JSON, nested too deeply), why."""
        try:
            row = self._connect().execute("SELECT value, checksum FROM entries WHERE key = ?", (key,)).fetchone()
        except (sqlite3.Error, OSError) as err:
            self._bypass("read it", err)
            return _MISSING, None
        if row is None:
            return _MISSING, None
        text, checksum = row
        if not isinstance(text, str) or checksum != _checksum(key, text):
            return _MISSING, "its checksum does not match"
        try:
            value = deepjson.loads(text)
        except ValueError:
            return _MISSING, "not JSON"
        if deepjson.depth(value, deepjson.MAX_VALUE_DEPTH) > deepjson.MAX_VALUE_DEPTH:
            return _MISSING, f"nested more than {deepjson.MAX_VALUE_DEPTH} levels deep"
        return value, None

    @staticmethod
    def hit(value: Any) -> bool:
        return value is not _MISSING

    def put(self, key: str, value: Any) -> None:
        if not self.writes:
            return
        self._pending[key] = deepjson.dumps(value, default=None)
        if len(self._pending) >= self.flush_every or time.monotonic() - self._last_flush > self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        """Commit buffered writes in one transaction."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        if not self.writes:
            self._pending.clear()
            return
        now = time.time()
        rows = [(k, v, _checksum(k, v), now) for k, v in self._pending.items()]
        try:
            db = self._connect()
            db.execute("BEGIN IMMEDIATE")
        except (sqlite3.Error, OSError) as err:
            self._bypass("write to it", err)
            return
        try:
            db.executemany("INSERT OR REPLACE INTO entries (key, value, checksum, created) VALUES (?, ?, ?, ?)", rows)
            db.execute("COMMIT")
        except sqlite3.Error as err:  # a full disk, a damaged file: the run goes on uncached
            _rollback(db)
            self._bypass("write to it", err)
            return
        except BaseException:
            _rollback(db)
            raise
        self._pending.clear()

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None

    def __len__(self) -> int:
        self.flush()
        return self._connect().execute("SELECT COUNT(*) FROM entries").fetchone()[0]


def _shape_problem(value: Any, shape: Mapping[str, type | tuple[type, ...]]) -> str | None:
    """What keeps `value` from being an object with the fields of `shape` (None: nothing)."""
    if not isinstance(value, dict):
        return f"{json_kind(value)}, not an object"
    for name, kinds in shape.items():
        if name not in value:
            return f"no {name!r}"
        if not isinstance(value[name], kinds) or (isinstance(value[name], bool) and bool not in _types(kinds)):
            return f"its {name!r} is {json_kind(value[name])}"
    return None


def _types(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _rollback(db: sqlite3.Connection) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:  # nothing to roll back (the failure ended the transaction)
        pass
