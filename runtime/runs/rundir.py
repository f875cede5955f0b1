"""Run directories: what a dataset run wrote, kept so it can be read, compared and resumed.

    RUN/
      run.json        the manifest: format, decomp version, program (path, main, fingerprint,
                      each file's sha256), input (path, sha256), options, the metric rows are
                      scored with, one entry per session
      program/        a copy of every file the program was built from (imports, prompt files)
      results.jsonl   one JSON line per row, appended and flushed as each row ends (so in the
                      order rows end; each line has the row's `index`)
      traces.sqlite   each row's decomposition tree: table `traces(idx, id, ok, tree)`, the tree
                      as zlib-compressed JSON (TraceNode.to_dict), WAL mode
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
import hashlib
import json
import os
import shutil
import sqlite3
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from decomp.dsl.errors import DecompError
from decomp.dsl.values import printable, storable_json
from decomp.runtime.engine.budgets import Usage
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.jsonl import json_line, read_lines
from decomp.runtime.sqlite_store import connect

FORMAT = 1
MANIFEST, RESULTS, TRACES, SUMMARY, PROGRAM = "run.json", "results.jsonl", "traces.sqlite", "summary.json", "program"
#: Held (an exclusive `flock`) by the one process writing the run: a second writer is refused.
LOCK = "run.lock"
#: Options that change answers: resuming under different ones would mix two runs.
BINDING_OPTIONS = ("model",)


class RunDirError(DecompError):
    """A run directory that cannot be used as asked (missing, foreign, corrupt, not empty)."""


def _version() -> str:
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
        "decomp_version": _version(),
        "program": {"path": str(program.resolve()), "main": main, "sha256": fingerprint(hashes), "files": hashes},
        "input": {"path": str(data.resolve()), "sha256": sha256_file(data)},
        "options": options,
        "metric": metric,
        "sessions": [],
    }


def read_manifest(path: Path) -> dict:
    """The checked `run.json` of the run directory `path` (a `RunDirError` says what is wrong)."""
    if not (path / MANIFEST).is_file():
        what = "does not exist" if not path.exists() else f"has no {MANIFEST}: not a decomp run directory"
        raise RunDirError(f"{path} {what}")
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise RunDirError(f"{path / MANIFEST} is corrupt ({err}); start over with --force") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise RunDirError(f"{path} was written in run-directory format {found!r} (decomp "
                          f"{manifest.get('decomp_version', '?') if isinstance(manifest, dict) else '?'}); "
                          f"this decomp ({_version()}) reads format {FORMAT}")
    missing = _manifest_problem(manifest)
    if missing:
        raise RunDirError(f"{path / MANIFEST} is not a run manifest (no {missing}); start over with --force")
    return manifest


def runs_root() -> Path:
    """Where run directories go by default: $DECOMP_RUNS_DIR, else ./runs."""
    return Path(os.environ.get("DECOMP_RUNS_DIR") or "runs")


def default_run_dir(program: Path, data: Path) -> Path:
    """runs/PROGRAM-INPUT-YYYYmmdd-HHMMSS (a suffix when that exists)."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = runs_root() / f"{program.stem}-{data.stem}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def latest_run(root: Path, manifest: dict) -> Path:
    """The newest run directory under `root` of the same program file on the same input file
    (runs this decomp cannot read are passed over)."""
    found = []
    for candidate in root.glob(f"*/{MANIFEST}") if root.is_dir() else ():
        try:
            other = read_manifest(candidate.parent)
        except (RunDirError, OSError):
            continue
        if (other["program"]["path"], other["input"]["path"]) == (manifest["program"]["path"],
                                                                  manifest["input"]["path"]):
            found.append((other["sessions"][0].get("started", "") if other.get("sessions") else "",
                          candidate.parent))
    if not found:
        raise RunDirError(f"no earlier run of {manifest['program']['path']} on {manifest['input']['path']} "
                          f"under {root}/: give --run-dir")
    return max(found)[1]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunDir:
    """An open run directory. `create` starts one, `resume` continues one, `open` reads one."""

    path: Path
    manifest: dict
    done: dict[int, dict] = field(default_factory=dict)  # complete results lines, by row index
    notes: list[str] = field(default_factory=list)       # what opening it found and repaired
    _results: Any = None
    _traces: sqlite3.Connection | None = None
    _lock: Any = None

    # ---- starting, continuing, reading
    @classmethod
    def create(cls, path: Path, manifest: dict, program_sources: dict[str, Path] | None = None,
               force: bool = False) -> "RunDir":
        """A new run in `path`, which must be missing or empty unless `force` (then it is cleared)."""
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise RunDirError(f"{path} is a file, not a run directory")
        lock = _writer_lock(path) if (path / MANIFEST).is_file() else None  # a run there: lock before clearing
        try:
            run = cls._create(path, manifest, program_sources, force, lock)
        except BaseException:
            _release(lock)
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
            _clear(path)
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, manifest)
        run._lock = lock or _writer_lock(path)
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
        lock = _writer_lock(Path(path)) if (Path(path) / MANIFEST).is_file() else None
        try:
            run = cls.open(path, repair=True)
            run._lock = lock
            run._check_same(manifest)
            run._check_traces()
        except BaseException:
            _release(lock)
            raise
        run._start_session(resumed=True)
        return run

    @classmethod
    def open(cls, path: Path, repair: bool = False) -> "RunDir":
        """Read the run in `path` (manifest and results). With `repair`, a half-written last
        results line is cut off the file; without, it is only skipped."""
        path = Path(path)
        manifest = read_manifest(path)
        run = cls(path, manifest)
        run._read_results(repair)
        return run

    def _check_traces(self) -> None:
        if not (self.path / TRACES).exists():
            return
        try:
            self._db().execute("SELECT count(*) FROM traces").fetchone()
        except sqlite3.DatabaseError as err:
            self.close()
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
        return summarize(self.records(), self.manifest)

    # ---- results
    def _read_results(self, repair: bool) -> None:
        file = self.path / RESULTS
        if not file.exists():
            return
        data = file.read_bytes()
        good = data.rfind(b"\n") + 1  # bytes of complete lines: what follows was cut off mid-write
        for line in read_lines(data[:good], objects=True, blank=True):
            if line.error or not isinstance(line.value.get("index"), int):
                raise RunDirError(f"{file}:{line.number}: not a results line (corrupt file); fix or delete that "
                                  "line, or start over with --force")
            self.done.setdefault(line.value["index"], line.value)
        if good < len(data):
            self.notes.append(f"{file}: the last line was cut off mid-write; that row runs again")
            if repair:
                with file.open("r+b") as f:
                    f.truncate(good)

    def records(self) -> list[dict]:
        """Every complete row, in input order."""
        return [self.done[i] for i in sorted(self.done)]

    def find(self, row: str) -> dict:
        """The row whose id is `row` (else whose index is `row`); a clear error otherwise."""
        for record in self.records():
            if str(record.get("id")) == row:
                return record
        if row.isdigit() and int(row) in self.done:
            return self.done[int(row)]
        ids = [str(r.get("id")) for r in self.records()[:5]]
        more = ", ..." if len(self.done) > 5 else ""
        raise RunDirError(f"{self.path} has no row {row!r} (its rows: {', '.join(ids)}{more})")

    # ---- writing rows
    def add(self, record: dict, trace: TraceNode) -> None:
        """Store a finished row: its trace (committed), then its results line (flushed)."""
        db = self._db()
        tree = zlib.compress(storable_json(trace.to_dict(), default=str).encode())
        row_id = record.get("id")
        with db:
            db.execute("INSERT OR REPLACE INTO traces (idx, id, ok, tree) VALUES (?, ?, ?, ?)",
                       (record["index"], printable(row_id) if isinstance(row_id, str) else row_id,
                        "error" not in record, tree))
        if self._results is None:
            self._results = (self.path / RESULTS).open("a", encoding="utf-8")
        self._results.write(json_line(record))
        self._results.flush()
        self.done[record["index"]] = record

    def trace(self, index: int) -> TraceNode | None:
        """The stored tree of row `index`, or None when there is none."""
        if self._traces is None and not (self.path / TRACES).exists():
            return None
        try:
            found = self._db().execute("SELECT tree FROM traces WHERE idx = ?", (index,)).fetchone()
            return TraceNode.from_dict(json.loads(zlib.decompress(found[0]))) if found else None
        except (sqlite3.DatabaseError, zlib.error, ValueError, TypeError, KeyError) as err:
            raise RunDirError(f"{self.path / TRACES} is corrupt (row {index}: {err})") from None

    def traces(self) -> Iterator[tuple[int, TraceNode]]:
        """Every stored tree, by row index."""
        for index in sorted(self.done):
            tree = self.trace(index)
            if tree is not None:
                yield index, tree

    def _db(self) -> sqlite3.Connection:
        if self._traces is None:
            self._traces = connect(self.path / TRACES, schema="CREATE TABLE IF NOT EXISTS traces "
                                   "(idx INTEGER PRIMARY KEY, id TEXT, ok INTEGER, tree BLOB)")
        return self._traces

    # ---- sessions and the summary
    def _start_session(self, resumed: bool) -> None:
        self.manifest["sessions"].append({"started": _now(), "resumed": resumed, "rows": 0, "seconds": None})
        self._write_manifest()

    def finish(self, rows: int, seconds: float) -> dict:
        """Close the session (rows run, wall time) and write summary.json; returns the summary."""
        session = self.manifest["sessions"][-1]
        session.update(rows=rows, seconds=round(seconds, 3), ended=_now())
        self._write_manifest()
        summary = self.summary()
        _write_json(self.path / SUMMARY, summary)
        self.close()
        return summary

    def close(self) -> None:
        if self._results is not None:
            self._results.close()
            self._results = None
        if self._traces is not None:
            self._traces.close()
            self._traces = None
        _release(self._lock)
        self._lock = None

    def _write_manifest(self) -> None:
        _write_json(self.path / MANIFEST, self.manifest)


def summarize(records: list[dict], manifest: dict) -> dict:
    """The run's totals over its complete rows (all sessions)."""
    scored = [r["score"] for r in records if "score" in r]
    total = Usage()
    for record in records:
        total.add(Usage.from_dict(record.get("usage") or {}))
    usage = total.to_dict()
    handlers = usage.pop("handlers")
    sessions = manifest.get("sessions", [])
    metric = {"metric": manifest.get("metric") or "em"} if scored else {}
    return {
        "rows": len(records),
        "failed": sum("error" in r for r in records),
        "score": round(sum(scored) / len(scored), 6) if scored else None,
        **metric,
        "scored_rows": len(scored),
        **outcomes(records),
        **usage,
        "wall_s": round(sum(s.get("seconds") or 0.0 for s in sessions), 3),
        "sessions": len(sessions),
        "handlers": handlers,
    }




def outcomes(records: list[dict]) -> dict:
    """Success over rows: `failed_outcome` (rows that answered with a failed outcome),
    `success_rate` (rows answered with an ok outcome, over all rows), `calls_per_row` (model
    requests, cache hits included); when
    environments judged the rows (a summary's `success`), `env_success_rate` too (the paper
    found self-judged success inflated: both are kept); and, when their summaries name a
    `group` (TextCraft: the recipe depth), the same per group."""
    out = _rates(records)
    groups: dict[str, list[dict]] = {}
    for record in records:
        for summary in (record.get("environment") or {}).values():
            if isinstance(summary, dict) and summary.get("group") is not None:
                groups.setdefault(str(summary["group"]), []).append(record)
                break
    if groups:
        out["by_group"] = {name: {"rows": len(rows), **_rates(rows)} for name, rows in sorted(groups.items())}
    return out


def _rates(records: list[dict]) -> dict:
    rows = len(records) or 1
    out = {"failed_outcome": sum(r.get("outcome") == "failed" for r in records),
           "success_rate": round(sum(_succeeded(r) for r in records) / rows, 6)}
    judged = [_env_success(r) for r in records]
    if any(j is not None for j in judged):
        out["env_success_rate"] = round(sum(bool(j) for j in judged) / rows, 6)
    # model requests a row made, whether the cache answered them or not: a re-run gives the same
    out["calls_per_row"] = round(sum((r.get("usage") or {}).get("calls", 0) + (r.get("usage") or {}).get("cache_hits", 0)
                                     for r in records) / rows, 3)
    return out


def _succeeded(record: dict) -> bool:
    """Answered with an ok outcome (results lines written before outcomes existed: no error)."""
    return "error" not in record and record.get("outcome", "ok") == "ok"


def _env_success(record: dict) -> bool | None:
    """Whether every environment of the row that judges success says so (None: none judges)."""
    verdicts = [s["success"] for s in (record.get("environment") or {}).values()
                if isinstance(s, dict) and "success" in s]
    return all(verdicts) if verdicts else None


_MANIFEST_SHAPE = {"program": ("path", "sha256", "files"), "input": ("path", "sha256"), "options": ()}


def _manifest_problem(manifest: dict) -> str:
    """What a manifest of the right format lacks ('' when nothing)."""
    for part, keys in _MANIFEST_SHAPE.items():
        if not isinstance(manifest.get(part), dict):
            return repr(part)
        for key in keys:
            if key not in manifest[part]:
                return f"'{part}.{key}'"
    if not isinstance(manifest.get("sessions"), list):
        return "'sessions'"
    return ""


def _write_json(path: Path, value: Any) -> None:
    """Write atomically: a killed process leaves the old file or the new one, never half."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(storable_json(value, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _writer_lock(path: Path) -> Any:
    """Take the run's writer lock (an exclusive `flock` on `path/run.lock`), or raise
    `RunDirError` when another process holds it. Returns the open lock file (None where the
    platform has no `flock`); the lock goes with the process, so a killed run leaves none."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return None
    handle = (path / LOCK).open("a", encoding="utf-8")  # never written: the lock is the flock itself
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise RunDirError(f"{path} is being written by another decomp run: wait for it to end, "
                          "or use another --run-dir") from None
    return handle


def _release(lock: Any) -> None:
    if lock is not None:
        lock.close()  # closing the file releases the flock


def _clear(path: Path) -> None:
    for child in path.iterdir():
        if child.name == LOCK:  # held by this process: kept
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
