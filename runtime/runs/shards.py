"""Splitting a dataset run across processes or machines, and joining the pieces.

    decomp run PROGRAM --input DATA --shard 0/4 --run-dir runs/part0     # ... 1/4, 2/4, 3/4
    decomp merge runs/part0 runs/part1 runs/part2 runs/part3 --out runs/all

Shard `i/n` (0 <= i < n) runs the rows whose index (their 0-based position in the input file)
is `i` modulo `n`, into a run directory of its own: an ordinary run, resumable with `--resume`,
whose run.json records the shard among its options (resuming it as another shard is refused).
Rows keep their index, so shards never overlap and every row belongs to exactly one.

`merge_runs` joins the run directories of shards of one run (the same program files, main,
input file, model, fields and metric, each a different shard of the same `n`) into a new run
directory: every results line in input order, every row's trace, the program's files, a
run.json without the shard whose `sessions` are all the shards' sessions (each naming its
shard) and `merged` naming the run directories it came from, and summary.json computed over
all rows as for a single run; `wall_s` is then the sum of the shards' session times, not the
time the shards took side by side. The merged directory is a run like any other: when a shard
was missing or unfinished, `decomp run --resume --run-dir OUT` runs the rows it lacks.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from decomp.dsl.errors import DecompError, InputError
from decomp.runtime.storage.datasets import read_rows
from decomp.runtime.storage.layout import LOCK, MANIFEST, PROGRAM, SUMMARY, RunDirError
from decomp.runtime.storage.locks import reading_lock, release, writer_lock
from decomp.runtime.storage.manifest import sha256_file
from decomp.runtime.storage.rundir import RunDir, clear, write_json
#: Options that must agree between the shards of one run (beyond program, main, input and metric):
#: what decides a row's answer. Run-wide budgets, concurrency and rate limits are per process.
AGREEING_OPTIONS = ("model", "fields", "base_url", "max_row_calls", "max_row_tokens", "max_depth", "max_steps",
                    "max_row_handler_calls", "handler_timeout", "handler_memory_mb", "max_answer_mb",
                    "attempt_deadline", "call_deadline")
#: The flags of the options whose flag is not their name.
_FLAGS = {"handler_memory_mb": "--handler-memory", "max_answer_mb": "--max-answer-size"}


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: the rows whose input index is `index` modulo `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """`"i/n"` with whole numbers 0 <= i < n; a `ValueError` that says what is expected otherwise."""
        head, slash, tail = str(text).strip().partition("/")
        if not slash or not head.strip().isdigit() or not tail.strip().isdigit():
            raise InputError(f"--shard takes I/N, such as 0/4 (the first of four shards), not {text!r}")
        shard = cls(int(head), int(tail))
        if shard.count < 1 or shard.index >= shard.count:
            raise InputError(f"--shard {text}: I counts from 0 and must be below N (0/{max(shard.count, 1)} to "
                             f"{max(shard.count, 1) - 1}/{max(shard.count, 1)})")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def takes(self, row_index: int) -> bool:
        """Whether the row at `row_index` of the input belongs to this shard."""
        return row_index % self.count == self.index


def shard_of(manifest: dict) -> Shard | None:
    """The shard a run's manifest records, or None for a whole run (a `RunDirError` for a
    damaged record)."""
    text = (manifest.get("options") or {}).get("shard")
    try:
        return Shard.parse(text) if text else None
    except ValueError:
        raise RunDirError(f"run.json records the shard {text!r}, which is not I/N: a damaged run.json") from None


def merge_runs(paths: Sequence[str | Path], out: str | Path, force: bool = False) -> RunDir:
    """Join the shard runs in `paths` into the new run directory `out` (see the module's
    docstring); returns it, closed. A `RunDirError` says why shards cannot be merged: one is
    being written, they are runs of different programs, inputs or options, shards of
    different counts, the same shard twice, or not shards at all."""
    if not paths:
        raise RunDirError("decomp merge needs the run directories of the shards to join")
    paths = [Path(p) for p in paths]
    seen: set[Path] = set()
    for path in paths:
        if path.resolve() in seen:
            raise RunDirError(f"{path} is given twice")
        seen.add(path.resolve())
    locks: list = []
    try:
        for path in paths:  # nobody writes them meanwhile
            locks.append(reading_lock(path) if (path / MANIFEST).is_file() else None)
        runs = [RunDir.open(p) for p in paths]
        shards = _check_shards(runs)
        return _write_merged(runs, shards, Path(out), force)
    finally:
        for lock in locks:
            release(lock)


def _check_shards(runs: list[RunDir]) -> list[Shard]:
    first = runs[0]
    shards = []
    for run in runs:
        shard = shard_of(run.manifest)
        if shard is None:
            raise RunDirError(f"{run.path} is a whole run, not a shard (run shards with --shard I/N)")
        shards.append(shard)
        _check_agrees(first, run)
    counts = {s.count for s in shards}
    if len(counts) > 1:
        raise RunDirError(f"these are shards of different splits ({', '.join(sorted({str(s) for s in shards}))}): "
                          "merge the shards of one split")
    seen: dict[int, Path] = {}
    for run, shard in zip(runs, shards):
        if shard.index in seen:
            raise RunDirError(f"{seen[shard.index]} and {run.path} are both shard {shard}")
        seen[shard.index] = run.path
    return shards


def _check_agrees(first: RunDir, run: RunDir) -> None:
    """`run` is a shard of the same run as `first`: program, main, input, metric, options."""
    mine, theirs = first.manifest, run.manifest
    checks = [("program", mine["program"]["sha256"], theirs["program"]["sha256"]),
              ("--main", mine["program"].get("main"), theirs["program"].get("main")),
              ("input", mine["input"]["sha256"], theirs["input"]["sha256"]),
              ("metric", first.metric, run.metric)]
    checks += [(_FLAGS.get(name, f"--{name.replace('_', '-')}"), mine["options"].get(name), theirs["options"].get(name))
               for name in AGREEING_OPTIONS]
    for what, a, b in checks:
        if _json(a) != _json(b):
            raise RunDirError(f"{run.path} is not a shard of the same run as {first.path}: its {what} differs")


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _write_merged(runs: list[RunDir], shards: list[Shard], out: Path, force: bool) -> RunDir:
    """Write the merged run into a folder beside `out`, then move it into place: a merge that
    fails partway leaves `out` as it was (with --force too) and no half-written run."""
    if out.resolve() in {r.path.resolve() for r in runs}:
        raise RunDirError(f"{out} is one of the shards: merge into a new run directory")
    lock = _claim_out(out, force)
    staging = out.parent / f".{out.name}.merging-{os.getpid()}"
    try:
        if staging.exists():
            shutil.rmtree(staging)
        merged = _merge_into(runs, shards, staging)
        if out.is_dir():
            clear(out)
            for child in staging.iterdir():
                if child.name != LOCK:
                    os.replace(child, out / child.name)
            shutil.rmtree(staging)
        else:
            os.replace(staging, out)
    except OSError as err:
        raise RunDirError(f"cannot write the merged run to {out}: {err.strerror or err}") from None
    finally:
        release(lock)
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        for run in runs:
            run.close()
    merged.path = out
    return merged


def _claim_out(out: Path, force: bool):
    """Check that `out` may receive the merged run (missing, empty, or a run and --force), and
    lock a run there against writers until it is replaced."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out} is a file, not a run directory")
    if not out.is_dir() or not any(p.name not in (MANIFEST + ".tmp", LOCK) for p in out.iterdir()):
        out.parent.mkdir(parents=True, exist_ok=True)  # `out` itself only once the merge is whole
        return None
    if not (out / MANIFEST).is_file():
        raise RunDirError(f"{out} is not empty and holds no run: choose another --out "
                          "(nothing there is deleted, not even with --force)")
    if not force:
        raise RunDirError(f"{out} already holds a run: pass --force to replace it, or another --out")
    return writer_lock(out)


def _merge_into(runs: list[RunDir], shards: list[Shard], staging: Path) -> RunDir:
    manifest = _merged_manifest(runs, shards)
    first = runs[0]
    sources = {p.relative_to(first.path / PROGRAM).as_posix(): p
               for p in sorted((first.path / PROGRAM).rglob("*")) if p.is_file()}
    sessions = list(manifest["sessions"])
    merged = RunDir.create(staging, manifest, sources)
    try:
        merged.manifest["sessions"] = sessions  # the shards' sessions, not one of merging
        merged._write_manifest()
        for index, record, run in _rows_in_order(runs):
            tree = run.trace(index)
            if tree is None:
                raise RunDirError(f"{run.path}: row {index} has a results line but no trace (a damaged run)")
            merged.add(record, tree)
        write_json(staging / SUMMARY, merged.summary())
    finally:
        merged.close()
    return merged


def _merged_manifest(runs: list[RunDir], shards: list[Shard]) -> dict:
    manifest = copy.deepcopy(runs[0].manifest)
    manifest["options"].pop("shard", None)
    manifest["sessions"] = [{**session, "shard": str(shard)}
                            for run, shard in sorted(zip(runs, shards), key=lambda pair: pair[1].index)
                            for session in run.manifest.get("sessions", [])]
    present = sorted(s.index for s in shards)
    count = shards[0].count
    manifest["merged"] = {"from": [str(r.path.resolve()) for r in runs], "shards": count,
                          "missing": [f"{i}/{count}" for i in range(count) if i not in present],
                          "unfinished": [str(shard) for run, shard in sorted(zip(runs, shards), key=lambda p: p[1].index)
                                         if _unfinished(run, shard)]}
    return manifest


def _unfinished(run: RunDir, shard: Shard) -> bool:
    """Whether shard run `run` lacks rows of its shard: counted in its input file when that is
    still there as it was run, else whether its last session ended (a killed run's did not)."""
    data = Path(run.manifest["input"]["path"])
    try:
        if data.is_file() and sha256_file(data) == run.manifest["input"]["sha256"]:
            return len(run.indices) < sum(1 for row in read_rows(data) if shard.takes(row.index))
    except (OSError, DecompError):
        pass
    sessions = run.manifest.get("sessions") or []
    return not sessions or not sessions[-1].get("ended")


def _rows_in_order(runs: Iterable[RunDir]) -> list[tuple[int, dict, RunDir]]:
    rows = sorted(((index, record, run) for run in runs for index, record in run.done.items()), key=lambda row: row[0])
    for (a, _, run_a), (b, _, run_b) in zip(rows, rows[1:]):
        if a == b:
            raise RunDirError(f"row {a} is in both {run_a.path} and {run_b.path}")
    return rows
