"""Run directories: what a dataset run wrote, kept so it can be read, compared and resumed.

    RUN/
      run.json        the manifest: format, decomp version, program (path, main, fingerprint,
                      each file's sha256), input (path, sha256), options, the metric rows are
                      scored with, one entry per session
      program/        a copy of every file the program was built from (imports, prompt files)
      results.jsonl   one JSON line per row, appended and flushed as each row ends (so in the
                      order rows end; each line has the row's `index`)
      traces.sqlite   each row's decomposition tree: table `traces(idx, id, ok, tree)`, the tree
                      as zlib-compressed JSON `{"nodes": TraceNode.to_records()}` (flat: a
                      tree of any depth is written and read; runs written before hold the
                      nested `TraceNode.to_dict`, still read), WAL mode
      summary.json    rows done/failed, score and metric (with gold), calls, tokens, cache hits,
                      wall time, per-handler latency; rewritten at the end of every session

Why SQLite for traces: a row's tree is written in one transaction before its results line, so
a line in results.jsonl always has its trace; reading one row of a 10,000-row run is one
indexed lookup, and a killed writer leaves no half-written tree. Compression keeps the
repeated few-shot prompts of a row small (benchmarks/run_dir.py measures both).

A killed run loses at most the rows in flight: `RunDir.resume` keeps every complete line,
cuts a half-written last line (that row runs again) and replaces the traces of rows it reruns.
"""
from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import math
import os
import shutil
import sqlite3
import stat
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from decomp.dsl.errors import DecompError
from decomp.dsl.values import json_kind, printable
from decomp.runtime.engine import deepjson
from decomp.runtime.engine.budgets import Usage
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.jsonl import json_line, read_lines
from decomp.runtime.sqlite_store import connect

try:
    import fcntl
    _CAN_LOCK = True
except ImportError:  # pragma: no cover - not POSIX
    _CAN_LOCK = False

FORMAT = 1
MANIFEST, RESULTS, TRACES, SUMMARY, PROGRAM = "run.json", "results.jsonl", "traces.sqlite", "summary.json", "program"
#: Held (an exclusive `flock`) by the one process writing the run: a second writer is refused.
LOCK = "run.lock"
#: Options that change answers: resuming under different ones would mix two runs.
BINDING_OPTIONS = ("model", "shard", "offset", "limit")


class RunDirError(DecompError):
    """A run directory that cannot be used as asked (missing, foreign, corrupt, not empty,
    read-only)."""


def decomp_version() -> str:
    """This decomp's version ("unknown" when it runs from a checkout that is not installed)."""
    try:
        from importlib.metadata import version

        return version("decomp-lang")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def program_files(main: Path, files: Iterable[Path]) -> dict[str, Path]:
    """The program's files by their name inside `program/`: relative to the main file's folder,
    or `_outside/NAME` for files elsewhere. Files that do not exist are left out."""
    base = main.resolve().parent
    named: dict[str, Path] = {}
    for file in sorted({Path(f).resolve() for f in [main, *files]}):
        if not file.is_file():
            continue
        try:
            name = file.relative_to(base).as_posix()
        except ValueError:
            name = f"_outside/{file.name}"
        named.setdefault(name, file)
    return named


def fingerprint(hashes: dict[str, str]) -> str:
    """One sha256 over the program's files (names and contents)."""
    return hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


def make_manifest(program: Path, main: str | None, files: Iterable[Path], data: Path, options: dict,
                  metric: str = "em") -> dict:
    """What `run.json` records for a new run of `program` over `data` with `options`; `metric`
    is what rows with gold are scored with (the program's `metric` statement, else em)."""
    named = program_files(program, files)
    hashes = {name: sha256_file(path) for name, path in named.items()}
    return {
        "format": FORMAT,
        "decomp_version": decomp_version(),
        "program": {"path": str(program.resolve()), "main": main, "sha256": fingerprint(hashes), "files": hashes},
        "input": {"path": str(data.resolve()), "sha256": sha256_file(data)},
        "options": options,
        "metric": metric,
        "sessions": [],
    }


#: How deeply run.json may nest (decomp writes 4 levels, and a --field value's own).
MAX_MANIFEST_DEPTH = 100
#: How deeply a results line may nest (deeper: a damaged line).
MAX_LINE_DEPTH = deepjson.MAX_VALUE_DEPTH


def read_manifest(path: Path) -> dict:
    """The checked `run.json` of the run directory `path` (a `RunDirError` says what is wrong)."""
    if not (path / MANIFEST).is_file():
        what = "does not exist" if not path.exists() else f"has no {MANIFEST}: not a decomp run directory"
        raise RunDirError(f"{path} {what}")
    try:
        manifest = deepjson.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path / MANIFEST} is corrupt ({err}); start over with --force") from None
    if deepjson.depth(manifest, MAX_MANIFEST_DEPTH) > MAX_MANIFEST_DEPTH:
        raise RunDirError(f"{path / MANIFEST} is corrupt (nested more than {MAX_MANIFEST_DEPTH} levels deep); "
                          "start over with --force")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise RunDirError(f"{path} was written in run-directory format {found!r} (decomp "
                          f"{manifest.get('decomp_version', '?') if isinstance(manifest, dict) else '?'}); "
                          f"this decomp ({decomp_version()}) reads format {FORMAT}")
    problem = _manifest_problem(manifest)
    if problem:
        raise RunDirError(f"{path / MANIFEST} is not a run manifest ({problem}); start over with --force")
    return manifest


def runs_root() -> Path:
    """Where run directories go by default: $DECOMP_RUNS_DIR, else ./runs."""
    return Path(os.environ.get("DECOMP_RUNS_DIR") or "runs")


def default_run_dir(program: Path, data: Path, shard: str | None = None) -> Path:
    """runs/PROGRAM-INPUT-YYYYmmdd-HHMMSS, or with a shard I/N runs/PROGRAM-INPUT-shardIofN-...
    (a suffix when that exists)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    part = f"shard{shard.replace('/', 'of')}-" if shard else ""
    base = runs_root() / f"{program.stem}-{data.stem}-{part}{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def latest_run(root: Path, manifest: dict) -> Path:
    """The newest run directory under `root` of the same program file on the same input file,
    and the same shard (runs this decomp cannot read are passed over)."""
    found = []
    for candidate in root.glob(f"*/{MANIFEST}") if root.is_dir() else ():
        try:
            other = read_manifest(candidate.parent)
        except (RunDirError, OSError):
            continue
        if (other["program"]["path"], other["input"]["path"], other["options"].get("shard")) == \
                (manifest["program"]["path"], manifest["input"]["path"], manifest["options"].get("shard")):
            found.append((other["sessions"][0].get("started", "") if other.get("sessions") else "",
                          candidate.parent))
    if not found:
        raise RunDirError(f"no earlier run of {manifest['program']['path']} on {manifest['input']['path']} "
                          f"under {root}/: give --run-dir")
    return max(found)[1]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


#: Row positions a results line may hold (2**31 rows: a 256 MB bitmap at most, from a tampered file).
MAX_ROW_INDEX = 2**31


def _row_index(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_ROW_INDEX


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
            _require_writable(path, "write a run there", _READ_ONLY_NEW)
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
            raise RunDirError(f"cannot make the run directory {path}: {_why(err)}") from None
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
            _require_writable(Path(path), "resume the run in it")
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
            if _read_only_error(err):  # not damaged: it cannot be written (never advise --force here)
                raise RunDirError(f"{self.path / TRACES} cannot be written ({err}): {_READ_ONLY_ADVICE}") from None
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
            why = _line_problem(line)
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
            elif line.number == repeats[index] and _result(line.value) != _result(first[index][1]):
                number, record = first[index]
                raise RunDirError(
                    f"{file}:{line.number}: row {index} (id {_shown_id(record)}) is written twice with different "
                    f"results: line {number} says {_said(record)}, line {line.number} says {_said(line.value)}; "
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
                self._traces = _connect_read_only(self.path / TRACES)
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
        total = recorded if _row_index(recorded) else total
        before.append(total)
        rows = session.get("rows")
        total += rows if _row_index(rows) else 0
    return before


def _last_write(path: Path) -> float | None:
    """When a row was last written to the run in `path` (its results or traces), as a POSIX time."""
    times = [file.stat().st_mtime for file in (path / RESULTS, path / TRACES, path / (TRACES + "-wal"))
             if file.is_file()]
    return max(times) if times else None


def parsed_time(text: Any) -> float | None:
    """A session's `started` (ISO 8601) as a POSIX time, None when it is not one."""
    try:
        return _dt.datetime.fromisoformat(text).timestamp() if isinstance(text, str) else None
    except ValueError:
        return None


def summarize(records: Iterable[dict], manifest: dict) -> dict:
    """The run's totals over its complete rows (all sessions): rows, failed (rows in error),
    score (mean over rows with gold) and its metric, scored_rows, the `outcomes`, usage
    (calls: model requests; cache hits, handler_calls of every kind, service calls, tokens,
    cost when every model used has a price), wall_s (the sessions' seconds), sessions,
    per-handler calls and latency, and per-model requests, tokens, latency and cost (`models`)."""
    totals = Totals()
    for record in records:
        totals.add(record)
    return totals.summary(manifest)


def outcomes(records: Iterable[dict]) -> dict:
    """Success over rows: `failed_outcome` (rows that answered with a failed outcome),
    `success_rate` (rows answered with an ok outcome, over all rows), `calls_per_row` (model
    requests made: not cache hits, nor symbolic handlers' calls); when
    environments judged the rows (a summary's `success`), `env_success_rate` too (the paper
    found self-judged success inflated: both are kept); and, when their summaries name a
    `group` (TextCraft: the recipe depth), the same per group."""
    totals = Totals()
    for record in records:
        totals.add(record)
    return totals.outcomes()


class Totals:
    """Running totals over results lines, taken in one at a time (`add`): what `summarize`
    reports, in memory that does not grow with the rows. The score's sum is exact (its
    partials, as `math.fsum` keeps them), so it does not depend on the order rows ended in."""

    def __init__(self) -> None:
        self.rows = self.failed = self.scored = 0
        self._score_partials: list[float] = []
        self.usage = Usage()
        self.rates = _Rates()
        self.groups: dict[str, _Rates] = {}

    def add(self, record: dict) -> None:
        self.rows += 1
        self.failed += "error" in record
        if "score" in record:
            self.scored += 1
            _add_exact(self._score_partials, float(record["score"]))
        self.usage.add(Usage.from_dict(record.get("usage") or {}))
        self.rates.add(record)
        group = _group(record)
        if group is not None:
            self.groups.setdefault(group, _Rates()).add(record)

    def outcomes(self) -> dict:
        out = self.rates.result()
        if self.groups:
            out["by_group"] = {name: {"rows": rates.rows, **rates.result()} for name, rates in sorted(self.groups.items())}
        return out

    def summary(self, manifest: dict) -> dict:
        usage = self.usage.to_dict()
        handlers = usage.pop("handlers")
        usage["handler_calls"] = self.usage.handler_total
        usage["models"] = {name: model.latency() for name, model in sorted(self.usage.models.items())}
        if "cost" in usage:
            usage["cost"] = round(usage["cost"], 6)
        sessions = manifest.get("sessions", [])
        metric = {"metric": manifest.get("metric") or "em"} if self.scored else {}
        return {
            "rows": self.rows,
            "failed": self.failed,
            "score": round(math.fsum(self._score_partials) / self.scored, 6) if self.scored else None,
            **metric,
            "scored_rows": self.scored,
            **self.outcomes(),
            **usage,
            "wall_s": round(sum(s.get("seconds") or 0.0 for s in sessions), 3),
            "sessions": len(sessions),
            "handlers": handlers,
        }


class _Rates:
    """Outcome counts over rows (see `outcomes`)."""

    def __init__(self) -> None:
        self.rows = self.failed_outcome = self.succeeded = self.env_ok = self.calls = 0
        self.judged = False

    def add(self, record: dict) -> None:
        self.rows += 1
        self.failed_outcome += record.get("outcome") == "failed"
        self.succeeded += _succeeded(record)
        verdict = _env_success(record)
        self.judged |= verdict is not None
        self.env_ok += bool(verdict)
        # model requests the row made: a cache hit is none (a re-run from the cache makes 0)
        self.calls += (record.get("usage") or {}).get("calls", 0)

    def result(self) -> dict:
        rows = self.rows or 1
        out = {"failed_outcome": self.failed_outcome, "success_rate": round(self.succeeded / rows, 6)}
        if self.judged:
            out["env_success_rate"] = round(self.env_ok / rows, 6)
        out["calls_per_row"] = round(self.calls / rows, 3)
        return out


def _line_problem(line: Any) -> str | None:
    """Why a line of results.jsonl is no results line ('' when it just is not one), or None."""
    if line.error:
        return line.error
    if not _row_index(line.value.get("index")):
        return "no row 'index'" if "index" not in line.value else "its 'index' is not a row's position"
    if deepjson.depth(line.value, MAX_LINE_DEPTH) > MAX_LINE_DEPTH:
        return f"nested more than {MAX_LINE_DEPTH} levels deep"
    if "score" in line.value and not _finite_number(line.value["score"]):
        score = line.value["score"]  # NaN and the infinities are read as the strings "NaN", "Infinity"
        said = (json.dumps(score[:40]) if isinstance(score, str) else json_kind(score)
                if isinstance(score, bool) or not isinstance(score, int) else "a number too large for a float")
        return f"its 'score' is {said}, not a finite number"
    return None


def _finite_number(value: Any) -> bool:
    """Whether `value` is a JSON number a float holds, finite (a bool is no number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer too large for a float
        return False


def _result(record: dict) -> str:
    """What a user sees of a row, as comparable text: its answer, error and outcome."""
    return deepjson.dumps([record.get("answer"), record.get("error"), record.get("outcome")], default=str)


def _said(record: dict) -> str:
    """A row's result in a few words: `answer "a c"`, `error: ...` (shortened)."""
    if record.get("error") is not None:
        text = f"error {deepjson.dumps(record['error'], default=str)}"
    else:
        text = f"answer {deepjson.dumps(record.get('answer'), default=str)}"
        if record.get("outcome") not in (None, "ok"):
            text += f" ({record['outcome']})"
    return text if len(text) <= 80 else text[:77] + "..."


def _shown_id(record: dict) -> str:
    row_id = record.get("id")
    return repr(printable(row_id)) if isinstance(row_id, str) else repr(row_id)


def _add_exact(partials: list[float], x: float) -> None:
    """Add `x` to the exact sum held as non-overlapping `partials` (Shewchuk's algorithm, as in
    `math.fsum`): `math.fsum(partials)` is then the correctly rounded total, in any order."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


def _group(record: dict) -> str | None:
    """The group the row's environment summary names (TextCraft: the recipe depth), if any."""
    for summary in (record.get("environment") or {}).values():
        if isinstance(summary, dict) and summary.get("group") is not None:
            return str(summary["group"])
    return None


def _succeeded(record: dict) -> bool:
    """Answered with an ok outcome (results lines written before outcomes existed: no error)."""
    return "error" not in record and record.get("outcome", "ok") == "ok"


def _env_success(record: dict) -> bool | None:
    """Whether every environment of the row that judges success says so (None: none judges)."""
    verdicts = [s["success"] for s in (record.get("environment") or {}).values()
                if isinstance(s, dict) and "success" in s]
    return all(verdicts) if verdicts else None


_MANIFEST_SHAPE = {"program": ("path", "sha256", "files"), "input": ("path", "sha256"), "options": ()}
#: Fields of run.json that are text when present (None allowed where marked).
_MANIFEST_TEXT = {("program", "path"): False, ("program", "sha256"): False, ("program", "main"): True,
                  ("input", "path"): False, ("input", "sha256"): False, ("options", "model"): True,
                  ("options", "shard"): True}


def _manifest_problem(manifest: dict) -> str:
    """What a manifest of the right format lacks or holds of the wrong type, in words ('' when
    nothing): "no 'input.sha256'", "'sessions' entry 2 is a number, not an object"."""
    for part, keys in _MANIFEST_SHAPE.items():
        if not isinstance(manifest.get(part), dict):
            return f"no {part!r}" if part not in manifest else f"{part!r} is {json_kind(manifest[part])}, not an object"
        for key in keys:
            if key not in manifest[part]:
                return f"no '{part}.{key}'"
    for (part, key), nullable in _MANIFEST_TEXT.items():
        value = manifest[part].get(key)
        if not isinstance(value, str) and not (value is None and (nullable or key not in manifest[part])):
            return f"'{part}.{key}' is {json_kind(value)}, not a string"
    files = manifest["program"]["files"]
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        return "'program.files' is not an object of file names and their sha256"
    if not isinstance(manifest.get("metric", ""), str):
        return f"'metric' is {json_kind(manifest['metric'])}, not a string"
    sessions = manifest.get("sessions")
    if not isinstance(sessions, list):
        return "no 'sessions'" if sessions is None else f"'sessions' is {json_kind(sessions)}, not a list"
    for number, session in enumerate(sessions, start=1):
        if not isinstance(session, dict):
            return f"'sessions' entry {number} is {json_kind(session)}, not an object"
        seconds = session.get("seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            return f"'sessions' entry {number}'s 'seconds' is {json_kind(seconds)}, not a number"
    return ""


def write_json(path: Path, value: Any) -> None:
    """Write atomically: a killed process leaves the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(deepjson.dumps(value, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


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
        raise RunDirError(f"cannot open {path / LOCK}: {_why(err)}") from None
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
        raise RunDirError(f"cannot open {file}: {_why(err)}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunDirError(f"{file} is not a plain file: delete it, then run again")
    return os.fdopen(fd, "ab")


_READ_ONLY_ADVICE = ("a run directory must be writable to run in it: make it writable, or copy it to a "
                     "writable place and resume the copy (--run-dir COPY --resume); `decomp trace show` and "
                     "`decomp eval` read it as it is")
_READ_ONLY_NEW = ("a run directory must be writable to run in it: make it writable, or give another --run-dir; "
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
        return _why(err)
    for name in (MANIFEST, RESULTS, TRACES, TRACES + "-wal", TRACES + "-shm", LOCK):
        file = path / name
        if file.is_symlink() or not file.is_file():
            continue
        try:
            os.close(os.open(file, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK))
        except OSError as err:
            return f"{name}: {_why(err)}"
    return None


def _require_writable(path: Path, doing: str, advice: str = _READ_ONLY_ADVICE) -> None:
    """Raise `RunDirError` saying `path` is read-only (never that it is corrupt, nor to --force)."""
    problem = writable_problem(path)
    if problem is not None:
        raise RunDirError(f"{path} is read-only ({problem}): cannot {doing}; {advice}")


def _why(err: OSError) -> str:
    if err.errno == errno.EROFS:
        return "a read-only file system"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return err.strerror or type(err).__name__


def _read_only_error(err: sqlite3.DatabaseError) -> bool:
    text = str(err).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _connect_read_only(file: Path) -> sqlite3.Connection:
    """`file` opened read-only (`mode=ro`). In a folder one cannot write, SQLite cannot make the
    -shm file a WAL database needs: unless the -wal and -shm files are there already (then they
    are read as they are), the file is opened as immutable (a run that ended closes its WAL)."""
    uri = file.resolve().as_uri() + "?mode=ro"
    wal = [file.with_name(file.name + suffix) for suffix in ("-wal", "-shm")]
    if not all(p.is_file() for p in wal) and writable_problem(file.parent) is not None:
        uri += "&immutable=1"
    return sqlite3.connect(uri, uri=True)


def release(lock: Any) -> None:
    if lock is not None:
        lock.close()  # closing the file releases the flock


#: Every name decomp writes in a run directory (the files, `write_json`'s temporaries, SQLite's
#: companions, the program's copy): `clear` removes these and nothing else.
_RUN_NAMES = frozenset({MANIFEST, MANIFEST + ".tmp", RESULTS, TRACES, TRACES + "-wal", TRACES + "-shm",
                        TRACES + "-journal", SUMMARY, SUMMARY + ".tmp", PROGRAM, LOCK})


def clear(path: Path) -> None:
    """Remove the run in `path` (--force): only what decomp writes in a run directory. A folder
    that holds anything else is refused with a `RunDirError` before anything is removed (a
    run.json is no proof that the rest is decomp's)."""
    others = sorted(child.name for child in path.iterdir() if child.name not in _RUN_NAMES)
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
