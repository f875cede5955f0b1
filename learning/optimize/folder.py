"""Writing a candidate as an ordinary program folder: the program's files copied as they are,
each target handler's examples and demonstrations in a new file `optimized/HANDLER.txt` beside
the .decomp file declaring it, and that declaration's `file=` pointing at it (the only change
to any .decomp file). The folder needs nothing of the optimiser to run.

`OwnedFolder` is the --out folder and what in it is decomp's: decomp writes into a folder only
when it made it (or found it empty) and wrote its marker there, signed with the user's owner key
(`owner_key`), and removes only what that marker lists as written by it.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from decomp.dsl.errors import DecompError
from decomp.dsl.values import json_kind
from decomp.handlers.files import write_whole
from decomp.handlers.sandbox.imports import local_module_file
from decomp.runtime.engine.loader import LoadedModule
from decomp.learning.optimize.candidates import Candidate
from decomp.learning.optimize.owner_key import OwnerKeyError, owner_key, same, sign
from decomp.learning.optimize.targets import Target
from decomp.runtime.storage.manifest import program_files

#: The folder (beside each .decomp file declaring a target) that holds the new examples files.
OPTIMIZED = "optimized"
#: The marker, in the work folder, that makes an --out folder decomp's (see `OwnedFolder`).
OWNER = "owner.json"
_OWNER_FORMAT = "decomp-optimize-folder/2"
#: The largest marker or state file read (decomp writes a few kilobytes).
MAX_WORK_FILE = 16 * 1024 * 1024


class FolderError(DecompError):
    """An --out folder decomp may not write into, or whose work files are damaged (in words)."""


def source_files(loaded: LoadedModule, main: Path) -> dict[str, Path]:
    """The files a copy of the program needs, by their path inside its folder: the .decomp
    files, the files they name, and the modules of the folder its python handlers call. A
    `DecompError` when the program reads files outside its folder (a copy could not reach them)."""
    named = program_files(main, loaded.files)
    folder = main.resolve().parent
    for handler in loaded.handlers.values():
        function = getattr(handler.options, "function", None) if handler.kind == "python" else None
        module = function.partition(":")[0] if isinstance(function, str) else ""
        found = local_module_file(module, folder) if module else None
        if found is not None:
            named.setdefault(found.resolve().relative_to(folder).as_posix(), found.resolve())
    outside = sorted(name for name in named if name.startswith("_outside/"))
    if outside:
        raise DecompError(f"{main} reads files outside its folder ({', '.join(outside)}): decomp optimize writes the "
                          "program as a folder of its own, so move them into the program's folder")
    return named


def write_candidate(files: dict[str, Path], main: Path, targets: dict[str, Target], candidate: Candidate,
                    folder: Path, keep_examples: bool = True) -> Path:
    """Write `candidate` as a program folder at `folder` (replacing what is there); the path
    of its main .decomp file."""
    base = main.resolve().parent
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    texts = {name: path.read_bytes() for name, path in files.items()}
    edits: dict[str, list[tuple[Target, str]]] = {}
    for name, demos in candidate.demos.items():
        if not demos:
            continue
        target = targets[name]
        declared = target.declared_in.relative_to(base).as_posix()
        written = f"{OPTIMIZED}/{name}.txt"
        inside = (Path(declared).parent / written).as_posix()
        texts[inside] = examples_file(target, [d.text for d in demos], keep_examples).encode()
        edits.setdefault(declared, []).append((target, written))
    for declared, changes in edits.items():
        texts[declared] = _rewritten(texts[declared].decode("utf-8"), changes).encode()
    for name, data in sorted(texts.items()):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        write_whole(folder / name, data)
    return folder / main.resolve().relative_to(base)


def examples_file(target: Target, demos: list[str], keep_examples: bool = True) -> str:
    """The text of a target's new examples file: its own examples (unless not kept), then the
    demonstrations, blank-line separated."""
    blocks = [target.original_text.strip("\n")] if keep_examples and target.original_text.strip() else []
    return "\n\n".join(blocks + [d.strip("\n") for d in demos]) + "\n"


def _rewritten(source: str, changes: list[tuple[Target, str]]) -> str:
    """`source` with each target's file= value replaced by the new path (last first, so the
    positions of the others stay right)."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    for target, written in sorted(changes, key=lambda c: (c[0].option.line, c[0].option.column), reverse=True):
        span = target.option
        begin = starts[span.line - 1] + span.column - 1
        end = starts[span.end_line - 1] + span.end_column - 1
        source = source[:begin] + json.dumps(written) + source[end:]
    return source


class OwnedFolder:
    """An optimisation's --out folder, and what in it is decomp's.

    decomp takes a folder only when it is new or empty: it makes the work folder (`work`) in it
    and writes there `owner.json`, a random identity and the list of what decomp writes in the
    folder: entries of the work folder (each removed whole), each file of the program written
    (with its sha256) and each folder made for them. The list is written before what it names;
    while files are replaced it lists the sha256 each held before too (`replacing`), so that an
    interrupted `publish` leaves files decomp still knows as its own. The marker is signed: an
    HMAC-SHA256 of its content and the folder's resolved path, with the user's owner key.
    A folder is reused only when its `owner.json` verifies (a made-up file, one copied from
    another folder or written for another user does not count: nothing is inferred from a name
    or a file anyone can write), and decomp removes only what the list names: a file only while
    it holds what decomp wrote, a folder it made only when empty. Everything else in the folder
    is left as it is."""

    def __init__(self, out: Path, work: str, marker: dict[str, Any], key: bytes):
        self.out, self.work, self.marker, self._key = Path(out), work, marker, key

    @classmethod
    def claim(cls, out: Path, work: str, key: bytes | None = None) -> tuple["OwnedFolder", bool]:
        """The folder `out` as decomp's, and whether it was decomp's before: a new or empty
        folder is taken (the work folder and its marker made), one holding decomp's marker,
        signed with `key` (default: the user's `owner_key()`), is reused. A `FolderError` for
        any other folder, whose files are left as they are, or when the key may not be used."""
        out = Path(out)
        if out.exists() and not out.is_dir():
            raise FolderError(f"--out {out} is a file, not a folder")
        try:
            key = owner_key() if key is None else key
        except OwnerKeyError as err:
            raise FolderError(err.message) from None
        if out.is_dir() and any(out.iterdir()):
            return cls(out, work, _read_marker(out, work, key), key), True
        (out / work).mkdir(parents=True)
        owned = cls(out, work, {"format": _OWNER_FORMAT, "token": secrets.token_hex(16), "work": [], "files": {},
                                "replacing": {}, "folders": []}, key)
        owned._save()
        return owned, False

    def add_work(self, names: list[str]) -> None:
        """List `names`, entries of the work folder, as decomp's (before they are written)."""
        self.marker["work"] = sorted(set(self.marker["work"]) | set(names))
        self._save()

    def clear(self) -> None:
        """Remove what the marker lists (what --force discards): the work folder's entries, the
        program's files that still hold what decomp wrote, the folders made for them if empty."""
        for name in self.marker["work"]:
            entry = self.out / self.work / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            elif entry.is_symlink() or entry.exists():
                entry.unlink()
        self._drop_files(keep=set())
        self.marker.update(work=[], files={}, replacing={})
        self._save()

    def publish(self, files: dict[str, bytes]) -> None:
        """Write `files` (by their path inside the folder) in place of the files decomp wrote
        there before. A `FolderError`, before anything changes, when one would replace a file
        decomp did not write (or has changed since) or go through a link. Interrupted, it leaves
        a marker that lists both the old and the new content of each file as decomp's."""
        self.check_free(files)
        self._replacing(files)
        self._write(files)
        self.marker["replacing"] = {}
        self._save()

    def _replacing(self, files: dict[str, bytes]) -> None:
        """Remove the listed files not in `files`, then list `files` as decomp's, with the sha256
        each holds now (decomp's, by `check_free`) beside the new one, before any is written."""
        self._drop_files(keep=set(files))
        made = {parent for name in files for parent in _parents(name) if not (self.out / parent).is_dir()}
        new = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        old = {name: self._held(name) for name in files}
        self.marker["replacing"] = {name: digest for name, digest in old.items() if digest not in (None, new[name])}
        self.marker["files"] = new
        self.marker["folders"] = sorted(set(self.marker["folders"]) | made)
        self._save()

    def _write(self, files: dict[str, bytes]) -> None:
        for name, data in sorted(files.items()):
            (self.out / name).parent.mkdir(parents=True, exist_ok=True)
            write_whole(self.out / name, data)

    def _held(self, name: str) -> str | None:
        """The sha256 of the file `name` when it holds what decomp wrote there, else None."""
        path = self.out / name
        if self._through_link(name) or path.is_symlink() or not path.is_file():
            return None
        digest = _sha256(path)
        return digest if digest in self._digests(name) else None

    def _digests(self, name: str) -> set[str]:
        """The contents (sha256) of `name` that are decomp's: the listed one, and the one it is
        replacing while a `publish` runs (or was interrupted)."""
        return {d for d in (self.marker["files"].get(name), self.marker["replacing"].get(name)) if d}

    def check_free(self, names) -> None:
        """A `FolderError` when writing any of `names` would replace a file decomp did not write
        (or one changed since it wrote it) or go through a link; nothing is changed."""
        blocked = [name for name in sorted(names) if self._blocked(name)]
        if blocked:
            shown = ", ".join(blocked[:5]) + (f" and {len(blocked) - 5} more" if len(blocked) > 5 else "")
            raise FolderError(f"--out {self.out} holds {shown}, not written by decomp optimize (or changed since): "
                              "move it away and give the same command again (nothing was written)")

    def _blocked(self, name: str) -> bool:
        """Whether writing `name` would replace what decomp did not write or go through a link."""
        if self._through_link(name):
            return True
        path = self.out / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return True
        return path.exists() and _sha256(path) not in self._digests(name)

    def _through_link(self, name: str) -> bool:
        folders = [self.out / parent for parent in _parents(name)]
        return any(folder.is_symlink() or (folder.exists() and not folder.is_dir()) for folder in folders)

    def _drop_files(self, keep: set[str]) -> None:
        """Remove the listed files not in `keep` that still hold what decomp wrote (one changed
        since is the user's now: kept), then the listed folders left empty."""
        for name in sorted((set(self.marker["files"]) | set(self.marker["replacing"])) - keep):
            if self._held(name) is not None:
                (self.out / name).unlink()
        needed = {parent for name in keep for parent in _parents(name)}
        for name in sorted(self.marker["folders"], key=lambda n: n.count("/"), reverse=True):
            folder = self.out / name
            if name not in needed and folder.is_dir() and not folder.is_symlink():
                try:
                    folder.rmdir()  # only when empty: a folder holding anything else stays
                except OSError:
                    pass
        self.marker["folders"] = [n for n in self.marker["folders"] if (self.out / n).is_dir()]

    def _save(self) -> None:
        self.marker["mac"] = _signature(self.marker, self.out, self._key)
        text = json.dumps(self.marker, indent=1, sort_keys=True) + "\n"
        write_whole(self.out / self.work / OWNER, text.encode())


def read_work_json(path: Path, max_depth: int = 32) -> Any:
    """The JSON value of a work file decomp wrote (the marker, `state.json`); a `ValueError`
    says in words why it cannot be (over `MAX_WORK_FILE` bytes, not UTF-8, not JSON, nested
    more than `max_depth` levels)."""
    with open(path, "rb") as file:
        data = file.read(MAX_WORK_FILE + 1)
    if len(data) > MAX_WORK_FILE:
        raise ValueError(f"over {MAX_WORK_FILE:,} bytes")
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    if _deeper_than(value, max_depth):
        raise ValueError(f"nested more than {max_depth} levels deep")
    return value


def _signature(marker: dict[str, Any], out: Path, key: bytes) -> str:
    """The HMAC-SHA256 that signs `marker` (all but its `mac`) as decomp's in the folder `out`."""
    content = json.dumps({k: v for k, v in marker.items() if k != "mac"}, sort_keys=True, separators=(",", ":"))
    return sign(key, _OWNER_FORMAT.encode(), os.fsencode(out.resolve()), content.encode())


def _read_marker(out: Path, work: str, key: bytes) -> dict[str, Any]:
    """decomp's marker in `out`, or a `FolderError` refusing the folder (naming what it holds)."""
    marker, problem = _load_marker(out, work, key)
    if marker is not None:
        return marker
    names = sorted(p.name for p in out.iterdir())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise FolderError(f"--out {out} is a folder that holds something else than an optimised program ({shown}; "
                      f"{problem}): give a new or empty folder (nothing in it is deleted, not even with --force)")


def _load_marker(out: Path, work: str, key: bytes) -> tuple[dict[str, Any] | None, str]:
    """The marker in `out` when decomp wrote it there for this user, else None and why not."""
    path = out / work / OWNER
    if path.parent.is_symlink() or path.is_symlink() or not path.is_file():
        return None, f"no {work}/{OWNER} written by decomp"
    try:
        marker = read_work_json(path, max_depth=3)
    except (OSError, ValueError) as err:
        return None, f"{work}/{OWNER} cannot be read: {getattr(err, 'strerror', None) or err}"
    problem = _marker_problem(marker, work)
    if not problem and not same(marker["mac"], _signature(marker, out, key)):
        problem = "its signature does not verify (a marker decomp wrote for another folder or user, or edited)"
    return (None, f"{work}/{OWNER} is not one decomp wrote: {problem}") if problem else (marker, "")


def _marker_problem(marker: Any, work: str) -> str:
    """What makes `marker` not one decomp wrote, in words ('' when it is)."""
    if not isinstance(marker, dict) or marker.get("format") != _OWNER_FORMAT:
        return f"{json_kind(marker)} without the format {_OWNER_FORMAT!r}"
    token = marker.get("token")
    if not isinstance(token, str) or len(token) != 32 or token.strip("0123456789abcdef"):
        return "its token is not 32 hexadecimal digits"
    mac = marker.get("mac")
    if not isinstance(mac, str) or len(mac) != 64 or mac.strip("0123456789abcdef"):
        return "it is not signed (no 'mac' of 64 hexadecimal digits)"
    names, folders = marker.get("work"), marker.get("folders")
    if not isinstance(names, list) or not all(isinstance(n, str) and _inside(n, work) and "/" not in n
                                              and n != OWNER for n in names):
        return "'work' is not a list of names in the work folder"
    for field in ("files", "replacing"):
        files = marker.get(field)
        if not isinstance(files, dict) or not all(_inside(n, work) and isinstance(d, str) and len(d) == 64
                                                  for n, d in files.items()):
            return f"{field!r} is not an object of paths in the folder and their sha256"
    if not isinstance(folders, list) or not all(isinstance(n, str) and _inside(n, work) for n in folders):
        return "'folders' is not a list of paths in the folder"
    return ""


def _inside(name: str, work: str) -> bool:
    """Whether `name` is a plain relative path below the folder, outside the work folder."""
    parts = name.split("/")
    return all(part not in ("", ".", "..") and "\0" not in part for part in parts) and parts[0] != work


def _parents(name: str) -> list[str]:
    """The folders `name` lies in, below the output folder: "a/b/c.txt" -> ["a", "a/b"]."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists or objects more than `limit` levels (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False
