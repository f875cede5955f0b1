"""The embedded search backend: an on-disk tantivy index (BM25 over title and text).

A folder holds tantivy's files and `decomp-index.json`, the manifest this package writes:

    {"format": 1, "backend": "tantivy", "version": "<uuid>", "state": "ready",
     "documents": 1234, "updated": "2026-01-01T00:00:00Z", "tantivy": "0.27.0"}

Every build and every incremental add gives the index a new `version` (a fresh uuid), written
last, after tantivy's commit: the `retrieve` kind keys its cached results by it, so a rebuilt or
grown index never answers from entries of the old one. While a build or add runs, the manifest
says `"state": "building"` (with a version of its own that no finished index ever has), and
searches refuse the folder until it is ready again; a build that died half-way leaves it so.

Queries: the user's text is reduced to its words (letters and digits), lower-cased and joined
by spaces before tantivy's query parser sees it over `title` and `text`, so a question with
quotes, colons, parentheses, `AND`/`OR`/`NOT`, `*`, `~` or `^` is never a syntax error and
never means anything but its words (`safe_query`). Words are OR-ed; BM25 ranks.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable

from decomp.dsl.errors import DecompError
from decomp.dsl.values import storable_json
from decomp.handlers.search.corpus import Record

MANIFEST = "decomp-index.json"
FORMAT = 1
FIELDS = ("id", "title", "text")
#: Query words beyond this many are dropped (a paragraph pasted as a query still works).
MAX_QUERY_WORDS = 256
_WORD = re.compile(r"[^\W_]+")


class SearchIndexError(DecompError, ValueError):
    """An index folder that cannot be built, added to or searched (missing, not an index, busy)."""


def safe_query(text: str) -> str:
    """The words of `text`, lower-cased, space-separated: a query tantivy's parser always reads,
    meaning only those words (empty when `text` has none)."""
    return " ".join(_WORD.findall(text.lower())[:MAX_QUERY_WORDS])


# ---- the manifest
def read_manifest(folder: str | Path) -> dict[str, Any]:
    """The manifest of an index folder; `SearchIndexError` when there is none or it is not ready."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not folder.is_dir():
        raise SearchIndexError(f"no index at {folder}: the folder does not exist (build one with "
                               f"`decomp index build CORPUS.jsonl --out {folder}`)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SearchIndexError(f"no index at {folder}: it has no {MANIFEST} (build one with "
                               f"`decomp index build CORPUS.jsonl --out {folder}`)") from None
    except (OSError, ValueError) as err:
        raise SearchIndexError(f"cannot read {path}: {err}") from None
    except RecursionError:  # a manifest is flat: one nested a thousand levels deep is not one
        raise SearchIndexError(f"{path} does not describe a tantivy index (nested too deeply to read)") from None
    if not isinstance(manifest, dict) or manifest.get("backend") != "tantivy" or not manifest.get("version"):
        raise SearchIndexError(f"{path} does not describe a tantivy index")
    if manifest.get("state") != "ready":
        raise SearchIndexError(f"the index at {folder} is being built, or its build was interrupted "
                               f"(rebuild it with `decomp index build ... --out {folder} --force`)")
    return manifest


def _write_manifest(folder: Path, **fields: Any) -> dict[str, Any]:
    import tantivy

    manifest = {"format": FORMAT, "backend": "tantivy", "version": uuid.uuid4().hex, **fields,
                "updated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tantivy": _tantivy_version(tantivy)}
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(storable_json(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, folder / MANIFEST)  # atomic: a reader sees the old manifest or the new one
    return manifest


def _tantivy_version(module) -> str:
    text = str(getattr(module, "__version__", ""))
    found = re.search(r"\d+\.\d+(\.\d+)?", text)
    return found.group(0) if found else text


# ---- building
def _schema():
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
    builder.add_text_field("text", stored=True, tokenizer_name="en_stem")
    return builder.build()


def build_index(records: Iterable[Record], folder: str | Path, *, add: bool = False, force: bool = False,
                heap_bytes: int = 256_000_000, threads: int = 0,
                progress: Callable[[int], None] | None = None, every: int = 1000) -> dict[str, Any]:
    """Index `records` into `folder` and return the new manifest (with `added`, the count).

    add=False: a new index; the folder must not exist, be empty, or (with `force`) hold an
    index, which is replaced. add=True: the records are added to the index already there.
    `progress(n)` is called every `every` records and at the end with the count so far.
    When `records` raise (a `CorpusError`) nothing is kept: an add is rolled back (the index
    stays as it was, under a new version) and a new index is removed."""
    import tantivy

    folder = Path(folder)
    previous = read_manifest(folder) if add else None
    made = not add and not folder.exists()  # a folder the user gave (empty) is never removed
    if not add:
        _prepare_new(folder, force)
    _write_manifest(folder, state="building", documents=(previous or {}).get("documents", 0))
    try:
        index = tantivy.Index(_schema(), path=str(folder), reuse=add)
        writer = index.writer(heap_size=heap_bytes, num_threads=threads)
    except ValueError as err:
        _give_up(folder, previous, made)
        raise SearchIndexError(f"cannot open the index at {folder} for writing: {err}") from None
    count = 0
    try:
        for record in records:
            try:
                writer.add_document(tantivy.Document(id=record.id, title=record.title, text=record.text))
            except ValueError as err:  # text tantivy cannot take (the corpus reader refuses what it knows of)
                raise SearchIndexError(f"cannot index the paragraph {record.id!r}: {err}") from None
            count += 1
            if progress is not None and count % every == 0:
                progress(count)
        writer.commit()
        writer.wait_merging_threads()
    except BaseException:
        writer.rollback()
        writer.wait_merging_threads()
        _give_up(folder, previous, made)
        raise
    if progress is not None:
        progress(count)
    index.reload()
    manifest = _write_manifest(folder, state="ready", documents=index.searcher().num_docs)
    return {**manifest, "added": count}


def _give_up(folder: Path, previous: dict[str, Any] | None, made: bool) -> None:
    """After a failed build: an add leaves the index as it was (a new version all the same: the
    files were touched); a new index's files are removed (those an index build writes, plain
    files only: anything else put in the folder meanwhile stays), then the folder if decomp
    `made` it and nothing else is left in it."""
    if previous is not None:
        _write_manifest(folder, state="ready", documents=previous.get("documents", 0))
        return
    for path in folder.iterdir() if folder.is_dir() else ():
        if _INDEX_FILE.fullmatch(path.name) and not path.is_symlink() and path.is_file():
            path.unlink(missing_ok=True)
    if made:
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass


def _prepare_new(folder: Path, force: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise SearchIndexError(f"{folder} exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        if not (folder / MANIFEST).is_file():
            raise SearchIndexError(f"{folder} is not empty and holds no index; refusing to write into it")
        if not force:
            raise SearchIndexError(f"{folder} already holds an index: --add adds to it, --force rebuilds it")
        others = _not_index_files(folder)
        if others:
            raise SearchIndexError(f"{folder} holds files that are not an index's ({', '.join(others[:5])}): nothing "
                                   "there is deleted, not even with --force; give another --out, or move them away")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)


#: What tantivy and this package write in an index folder: a segment's files, its deletes, and
#: the named ones (`--force` removes a folder only when it holds nothing else).
_INDEX_FILE = re.compile(r"[0-9a-f]{32}(\.\d+)?\.(fast|fieldnorm|idx|pos|store|term|del)|meta\.json|\.managed\.json"
                         r"|\.tantivy-(meta|writer)\.lock|\.?" + re.escape(MANIFEST) + r"(\.tmp)?")


def _not_index_files(folder: Path) -> list[str]:
    """The names in `folder` that no index build writes, sorted; all of them when its manifest
    is not one this package wrote (a file of that name proves nothing)."""
    names = sorted(p.name for p in folder.iterdir())
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return names
    if not isinstance(manifest, dict) or manifest.get("backend") != "tantivy" or not manifest.get("version"):
        return names
    return [name for name in names if not _INDEX_FILE.fullmatch(name) or (folder / name).is_dir()]


# ---- searching
class TantivyIndex:
    """One opened, ready index: its version and a searcher. `search` is synchronous (run it in a
    thread from async code)."""

    def __init__(self, folder: str | Path):
        import tantivy

        self.folder = Path(folder)
        manifest = read_manifest(self.folder)
        self.version: str = manifest["version"]
        self.documents: int = int(manifest.get("documents", 0))
        try:
            self._index = tantivy.Index.open(str(self.folder))
        except ValueError as err:
            raise SearchIndexError(f"cannot open the index at {self.folder}: {err}") from None
        self._searcher = self._index.searcher()

    def search(self, terms: str, k: int) -> list[dict[str, Any]]:
        """The `k` best paragraphs for `terms` (a `safe_query`), best first, each
        `{"id", "title", "text", "score"}`."""
        if not terms:
            return []
        query = self._index.parse_query(terms, ["title", "text"])
        searcher = self._searcher
        found = []
        for score, address in searcher.search(query, k, count=False).hits:
            doc = searcher.doc(address)
            found.append({"id": doc.get_first("id"), "title": doc.get_first("title") or "",
                          "text": doc.get_first("text") or "", "score": round(float(score), 4)})
        return found


def manifest_signature(path: str | Path) -> tuple[int, int, int] | None:
    """What changes whenever the manifest at `path` (a folder's `MANIFEST`) is rewritten (inode,
    size, mtime), or None when absent: cheap enough to look at before every search."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
