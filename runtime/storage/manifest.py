"""A run's manifest (run.json): what it records of a new run, read back and checked, and where
runs go and which earlier one a resume continues."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

from decomp.dsl.values import json_kind
from decomp.runtime.engine import deepjson
from decomp.runtime.storage.layout import MANIFEST, RunDirError
from decomp.runtime.version import decomp_version

FORMAT = 1
#: Options that change answers: resuming under different ones would mix two runs.
BINDING_OPTIONS = ("model", "shard", "offset", "limit")


def sha256_file(path: Path) -> str:
    """The sha256 of the file `path`'s bytes, in hex."""
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


def parsed_time(text: Any) -> float | None:
    """A session's `started` (ISO 8601) as a POSIX time, None when it is not one."""
    try:
        return _dt.datetime.fromisoformat(text).timestamp() if isinstance(text, str) else None
    except ValueError:
        return None
