"""Run directories stored: a run created, resumed or opened, its rows and traces written and read
(`RunDir`); what each of its files holds is told in `layout`.

Why SQLite for traces: a row's tree is written in one transaction before its results line, so
a line in results.jsonl always has its trace; reading one row of a 10,000-row run is one
indexed lookup, and a killed writer leaves no half-written tree. Compression keeps the
repeated few-shot prompts of a row small (benchmarks/run_dir.py measures both).

A killed run loses at most the rows in flight: `RunDir.resume` keeps every complete line,
cuts a half-written last line (that row runs again) and replaces the traces of rows it reruns.
"""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import sqlite3
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from decomp.dsl.values import printable
from decomp.runtime.engine import deepjson
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.storage.jsonl import json_line, read_lines
from decomp.runtime.storage.layout import LOCK, MANIFEST, PROGRAM, RESULTS, RUN_NAMES, SUMMARY, TRACES, RunDirError
from decomp.runtime.storage.locks import release, writer_lock
from decomp.runtime.storage.manifest import BINDING_OPTIONS, parsed_time, read_manifest
from decomp.runtime.storage.result_lines import comparable_result, is_row_index, line_problem, said, shown_id
from decomp.runtime.storage.summary import Totals
from decomp.runtime.storage.writable import (READ_ONLY_ADVICE, READ_ONLY_NEW, connect_read_only, read_only_error, reason,
                                          require_writable)
from decomp.runtime.sqlite_store import connect


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class RowIndices:
    """A set of row indices kept as a bitmap, one bit per row: 100,000 rows take 12.5 KB, where
    a set of ints takes about 7 MB, so a writer's memory stays flat however many rows it writes."""

    __slots__ = ("_bits", "_count")

    def __init__(self) -> None:
        self._bits = bytearray()
        self._count = 0

    def add(self, index: int) -> None:
        if index < 0:
            raise ValueError(f"a row index is never negative: {index}")
        byte, mask = index >> 3, 1 << (index & 7)
        if byte >= len(self._bits):
            self._bits.extend(bytes(max(byte + 1 - len(self._bits), len(self._bits))))  # doubling
        if not self._bits[byte] & mask:
            self._bits[byte] |= mask
            self._count += 1

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int) or index < 0:
            return False
        byte = index >> 3
        return byte < len(self._bits) and bool(self._bits[byte] & (1 << (index & 7)))

    def __len__(self) -> int:
        return self._count

    def __iter__(self):
        """The indices, in increasing order."""
        return (byte * 8 + bit for byte, value in enumerate(self._bits) if value
                for bit in range(8) if value >> bit & 1)


@dataclass
class RunDir:
    """An open run directory. `create` starts one, `resume` continues one, `open` reads one."""

    path: Path
    manifest: dict
    done: dict[int, dict] = field(default_factory=dict)  # complete results lines, by row index (readers only)
    indices: "RowIndices" = field(default_factory=lambda: RowIndices())  # the index of every complete row
    notes: list[str] = field(default_factory=list)       # what opening it found and repaired
    _results: Any = None
    _traces: sqlite3.Connection | None = None
    _lock: Any = None
    _writing: bool = False  # opened by create or resume (else only read: traces opened read-only)
    #: The summary's running totals. A writer keeps only these and `indices`, not the lines, so
    #: its memory does not grow with the rows it writes; `records()` then reads the file again.
    _totals: "Totals" = field(default_factory=lambda: Totals())

    # ---- starting, continuing, reading
    @classmethod
    def create(cls, path: Path, manifest: dict, program_sources: dict[str, Path] | None = None,
               force: bool = False) -> "RunDir":
        """A new run in `path`, which must be missing or empty unless `force` (then it is cleared)."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{path} is a file, not a run directory")
        if path.is_dir():
            require_writable(path, "write a run there", READ_ONLY_NEW)
        lock = writer_lock(path) if (path / MANIFEST).is_file() else None  # a run there: lock before clearing
        try:
            run = cls._create(path, manifest, program_sources, force, lock)
        except BaseException:
            release(lock)
            raise
        return run

    @classmethod
    def _create(cls, path: Path, manifest: dict, program_sources, force: bool, lock) -> "RunDir":
        if path.is_dir() and any(p.name not in (MANIFEST + ".tmp", LOCK) for p in path.iterdir()):
            if not (path / MANIFEST).is_file():
                raise RunDirError(f"{path} is not empty and holds no run: choose another --run-dir "
                                  "(nothing there is deleted, not even with --force)")
            if not force:
                raise RunDirError(f"{path} already holds a run: pass --resume to finish it, --force to start "
                                  "over (its files are deleted), or another --run-dir")
            clear(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise RunDirError(f"cannot make the run directory {path}: {reason(err)}") from None
        run = cls(path, manifest, _writing=True)
        run._lock = lock or writer_lock(path)
        run._start_session(resumed=False)  # run.json first: a kill from here on leaves a resumable run
        for name, source in (program_sources or {}).items():
            target = path / PROGRAM / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return run

    @classmethod
    def resume(cls, path: Path, manifest: dict) -> "RunDir":
        """The run in `path`, checked to be of the same program, input and binding options as
        `manifest`; `done` holds its complete rows, a half-written last line is cut off."""
        lock = None
        if (Path(path) / MANIFEST).is_file():
            require_writable(Path(path), "resume the run in it")
            lock = writer_lock(Path(path))
        try:
            last_write = _last_write(Path(path))  # before a repair touches the files
            run = cls.open(path, repair=True, keep=False)
            run._lock, run._writing = lock, True
            run._check_same(manifest)
            run._check_traces()
        except BaseException:
            release(lock)
            raise
        run._close_killed_sessions(last_write)
        run._start_session(resumed=True)
        return run

    @classmethod
    def open(cls, path: Path, repair: bool = False, keep: bool = True) -> "RunDir":
        """Read the run in `path` (manifest and results). With `repair`, a half-written last
        results line is cut off the file; without, it is only skipped. With `keep`, every line
        is kept in `done` (else only `indices` and the summary's totals)."""
        path = Path(path)
        manifest = read_manifest(path)
        run = cls(path, manifest)
        run._read_results(repair, keep)
        return run

    def _check_traces(self) -> None:
        if not (self.path / TRACES).exists():
            return
        try:
            self._db().execute("SELECT count(*) FROM traces").fetchone()
        except sqlite3.DatabaseError as err:
            self.close()
            if read_only_error(err):  # not damaged: it cannot be written (never advise --force here)
                raise RunDirError(f"{self.path / TRACES} cannot be written ({err}): {READ_ONLY_ADVICE}") from None
            raise RunDirError(f"{self.path / TRACES} is corrupt ({err}): use another --run-dir, or --force "
                              "to start over") from None

    def _check_same(self, manifest: dict) -> None:
        mine, theirs = self.manifest, manifest
        if mine["program"]["sha256"] != theirs["program"]["sha256"]:
            changed = sorted(set(mine["program"]["files"].items()) ^ set(theirs["program"]["files"].items()))
            names = sorted({name for name, _ in changed})
            raise RunDirError(f"{self.path} holds a run of {mine['program']['path']} as it was then; the program "
                              f"differs now ({', '.join(names)}): use another --run-dir, or --force to start over")
        if mine["program"].get("main") != theirs["program"].get("main"):
            raise RunDirError(f"{self.path} ran the program's '{mine['program'].get('main')}', not "
                              f"'{theirs['program'].get('main')}': pass --main {mine['program'].get('main')}, "
                              "or use another --run-dir")
        if mine["input"]["sha256"] != theirs["input"]["sha256"]:
            raise RunDirError(f"{self.path} holds a run over {mine['input']['path']} as it was then; the input "
                              f"{theirs['input']['path']} differs: use another --run-dir, or --force to start over")
        old_metric, new_metric = mine.get("metric") or "em", theirs.get("metric") or "em"
        if old_metric != new_metric:
            raise RunDirError(f"{self.path} scored its rows with the metric {old_metric}; resuming with {new_metric} "
                              f"would mix two metrics' scores: resume with metric {old_metric}, or --force to "
                              "start over")
        for name in BINDING_OPTIONS:
            old, new = mine["options"].get(name), theirs["options"].get(name)
            if old != new:
                raise RunDirError(f"{self.path} was run with --{name} {old}; resuming with {new} would mix two "
                                  f"runs: pass --{name} {old}, or --force to start over")

    # ---- what the manifest says (None where a field is missing)
    @property
    def program_path(self) -> str | None:
        """The program's main file, as it was run (absolute)."""
        return self._manifest_field("program", "path")

    @property
    def program_name(self) -> str | None:
        """The program's file name, without folders."""
        path = self.program_path
        return path.replace("\\", "/").rsplit("/", 1)[-1] if path else None

    @property
    def main(self) -> str | None:
        """The program run (`--main`), when not the file's default."""
        return self._manifest_field("program", "main")

    @property
    def input_path(self) -> str | None:
        """The input data file (absolute)."""
        return self._manifest_field("input", "path")

    @property
    def metric(self) -> str:
        """The metric the run scored its rows with (runs written before run.json recorded one: em)."""
        metric = self.manifest.get("metric")
        return metric if isinstance(metric, str) and metric else "em"

    @property
    def model(self) -> str | None:
        """The model the run was given (`--model`), if any."""
        return self._manifest_field("options", "model")

    def _manifest_field(self, part: str, key: str) -> Any:
        section = self.manifest.get(part)
        return section.get(key) if isinstance(section, dict) else None

    def summary(self) -> dict:
        """The run's totals over its complete rows (see `summarize`)."""
        return self._totals.summary(self.manifest)

    # ---- results
    def _read_results(self, repair: bool, keep: bool = True) -> None:
        file = self.path / RESULTS
        if not file.exists():
            return
        data = file.read_bytes()
        good = data.rfind(b"\n") + 1  # bytes of complete lines: what follows was cut off mid-write
        repeats: dict[int, int] = {}  # a row's index -> the line that repeats it (the first repeat)
        for line in read_lines(data[:good], objects=True, blank=True):
            why = line_problem(line)
            try:
                if why is None:
                    if line.value["index"] in self.indices:
                        repeats.setdefault(line.value["index"], line.number)
                    self._count(line.value, keep)
            except (TypeError, ValueError, AttributeError, KeyError):  # a field of the wrong type
                why = ""
            if why is not None:
                raise RunDirError(f"{file}:{line.number}: not a results line{f': {why}' if why else ''} "
                                  "(corrupt file); fix or delete that line, or start over with --force")
        if repeats:
            self._check_repeats(file, data[:good], repeats)
        if good < len(data):
            self.notes.append(f"{file}: the last line was cut off mid-write; that row runs again")
            if repair:
                with file.open("r+b") as f:
                    f.truncate(good)

    def _check_repeats(self, file: Path, data: bytes, repeats: dict[int, int]) -> None:
        """A row written twice: `RunDirError` naming both lines when they tell different results
        (answer, error or outcome: which one is the run's?), else a note (the first counts). A
        second read of the file, made only when some row repeats, keeps the first pass flat."""
        first: dict[int, tuple[int, dict]] = {}
        for line in read_lines(data, objects=True):
            index = line.value["index"]
            if index not in repeats:
                continue
            if index not in first:
                first[index] = (line.number, line.value)
            elif line.number == repeats[index] and comparable_result(line.value) != comparable_result(first[index][1]):
                number, record = first[index]
                raise RunDirError(
                    f"{file}:{line.number}: row {index} (id {shown_id(record)}) is written twice with different "
                    f"results: line {number} says {said(record)}, line {line.number} says {said(line.value)}; "
                    "delete the line that is wrong (or rerun that row: delete both), or start over with --force")
        for index, number in sorted(repeats.items()):
            self.notes.append(f"{file}:{number}: row {index} is written again, with the same result as on line "
                              f"{first[index][0]}; the first line counts")

    def _count(self, record: dict, keep: bool) -> None:
        """Take in a complete row (the first line of an index counts; a repeat is passed over)."""
        index = record["index"]
        if index in self.indices:
            return
        self.indices.add(index)
        self._totals.add(record)
        if keep:
            self.done[index] = record

    def records(self) -> list[dict]:
        """Every complete row, in input order (a writer reads them from results.jsonl)."""
        if len(self.done) < len(self.indices):
            return type(self).open(self.path).records()
        return [self.done[i] for i in sorted(self.done)]

    def find(self, row: str) -> dict:
        """The row whose id is `row` (else whose index is `row`); a clear error otherwise."""
        records = self.records()
        for record in records:
            if str(record.get("id")) == row:
                return record
        by_index = {r["index"]: r for r in records}
        if row.isdigit() and int(row) in by_index:
            return by_index[int(row)]
        ids = [str(r.get("id")) for r in records[:5]]
        more = ", ..." if len(records) > 5 else ""
        raise RunDirError(f"{self.path} has no row {row!r} (its rows: {', '.join(ids)}{more})")

    # ---- writing rows
    def add(self, record: dict, trace: TraceNode) -> None:
        """Store a finished row: its trace (committed), then its results line (flushed)."""
        db = self._db()
        tree = zlib.compress(deepjson.dumps({"nodes": trace.to_records()}).encode())
        row_id = record.get("id")
        with db:
            db.execute("INSERT OR REPLACE INTO traces (idx, id, ok, tree) VALUES (?, ?, ?, ?)",
                       (record["index"], printable(row_id) if isinstance(row_id, str) else row_id,
                        "error" not in record, tree))
        if self._results is None:
            self._results = (self.path / RESULTS).open("a", encoding="utf-8")
        self._results.write(json_line(record))
        self._results.flush()
        self._count(record, keep=not self._writing)

    def trace(self, index: int) -> TraceNode | None:
        """The stored tree of row `index`, or None when there is none."""
        if self._traces is None and not (self.path / TRACES).exists():
            return None
        try:
            found = self._db().execute("SELECT tree FROM traces WHERE idx = ?", (index,)).fetchone()
        except sqlite3.DatabaseError as err:
            raise RunDirError(f"{self.path / TRACES} is corrupt (row {index}: {err}); start over with --force") from None
        return None if found is None else self._tree(index, found[0])

    def _tree(self, index: int, blob: Any) -> TraceNode:
        """A stored tree read back; `RunDirError` saying what is wrong with it."""
        try:
            if not isinstance(blob, bytes):
                raise ValueError(f"the tree is {type(blob).__name__ if blob is not None else 'null'}, not "
                                 "compressed JSON")
            try:
                text = zlib.decompress(blob).decode("utf-8")
            except (zlib.error, UnicodeDecodeError):
                raise ValueError("the tree is not compressed JSON text") from None
            return TraceNode.from_dict(deepjson.loads(text))
        except ValueError as err:
            raise RunDirError(f"{self.path / TRACES} is corrupt (row {index}: {err}); start over with --force") from None

    def traces(self) -> Iterator[tuple[int, TraceNode]]:
        """Every stored tree, by row index."""
        for index in sorted(self.done):
            tree = self.trace(index)
            if tree is not None:
                yield index, tree

    def _db(self) -> sqlite3.Connection:
        """The traces database: opened for writing by a run that writes (create, resume), else
        read-only, so that a run directory one cannot write (read-only) can still be read."""
        if self._traces is None:
            if self._writing:
                self._traces = connect(self.path / TRACES, schema="CREATE TABLE IF NOT EXISTS traces "
                                       "(idx INTEGER PRIMARY KEY, id TEXT, ok INTEGER, tree BLOB)")
            else:
                self._traces = connect_read_only(self.path / TRACES)
        return self._traces

    # ---- sessions and the summary
    def _start_session(self, resumed: bool) -> None:
        self.manifest["sessions"].append({"started": _now(), "resumed": resumed, "rows": 0, "seconds": None,
                                          "rows_before": len(self.indices)})
        self._write_manifest()

    def _close_killed_sessions(self, last_write: float | None) -> None:
        """Give each earlier session that never ended (its process was killed) the rows it
        wrote, counted from the rows done when it and the next one started, and, for the last
        one, its seconds up to its last write of a row (None when it wrote none): what it
        did, as far as the run directory tells. Each is marked `"killed": true`."""
        sessions = self.manifest["sessions"]
        before = _rows_before(sessions)
        for number, session in enumerate(sessions):
            if session.get("ended") or session.get("killed"):
                continue
            last = number == len(sessions) - 1
            rows = (len(self.indices) if last else before[number + 1]) - before[number]
            session.update(rows=max(0, rows), killed=True)
            started = parsed_time(session.get("started"))
            if last and rows > 0 and last_write is not None and started is not None and last_write >= started:
                session["seconds"] = round(last_write - started, 3)

    def finish(self, rows: int, seconds: float) -> dict:
        """Close the session (rows run, wall time) and write summary.json; returns the summary."""
        session = self.manifest["sessions"][-1]
        session.update(rows=rows, seconds=round(seconds, 3), ended=_now())
        self._write_manifest()
        summary = self.summary()
        write_json(self.path / SUMMARY, summary)
        self.close()
        return summary

    def record_option(self, name: str, value: Any) -> None:
        """Set option `name` in run.json to `value` and write it now: what the run found out as
        it went (the API an `api="auto"` model answers on), kept even if the run is killed."""
        self.manifest["options"][name] = value
        self._write_manifest()

    def close(self) -> None:
        if self._results is not None:
            self._results.close()
            self._results = None
        if self._traces is not None:
            self._traces.close()
            self._traces = None
        release(self._lock)
        self._lock = None

    def _write_manifest(self) -> None:
        write_json(self.path / MANIFEST, self.manifest)


def _rows_before(sessions: list[dict]) -> list[int]:
    """The rows done when each session started: as recorded (`rows_before`), else (runs
    written before sessions recorded it) the rows of the sessions before it."""
    before, total = [], 0
    for session in sessions:
        recorded = session.get("rows_before")
        total = recorded if is_row_index(recorded) else total
        before.append(total)
        rows = session.get("rows")
        total += rows if is_row_index(rows) else 0
    return before


def _last_write(path: Path) -> float | None:
    """When a row was last written to the run in `path` (its results or traces), as a POSIX time."""
    times = [file.stat().st_mtime for file in (path / RESULTS, path / TRACES, path / (TRACES + "-wal"))
             if file.is_file()]
    return max(times) if times else None


def write_json(path: Path, value: Any) -> None:
    """Write atomically: a killed process leaves the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(deepjson.dumps(value, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def clear(path: Path) -> None:
    """Remove the run in `path` (--force): only what decomp writes in a run directory. A folder
    that holds anything else is refused with a `RunDirError` before anything is removed (a
    run.json is no proof that the rest is decomp's)."""
    others = sorted(child.name for child in path.iterdir() if child.name not in RUN_NAMES)
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise RunDirError(f"{path} holds files no run writes ({shown}): nothing there is deleted, not even with "
                          "--force; choose another directory, or move them away")
    for child in path.iterdir():
        if child.name == LOCK:  # held by this process: kept
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
