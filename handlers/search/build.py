"""`decomp index build`: one function over both backends, so the command line only parses and prints."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from decomp.handlers.search.corpus import ReadStats, read_corpus


def index_corpus(corpus: str | Path, *, backend: str = "tantivy", out: str | Path | None = None,
                 url: str | None = None, index_name: str | None = None, server: str = "elasticsearch",
                 add: bool = False, force: bool = False, skip_bad: bool = False,
                 progress: Callable[[ReadStats], None] | None = None) -> dict[str, Any]:
    """Index the paragraphs of `corpus` (JSON lines `{id, title, text}`) and return a summary:
    the backend, where, the new version, documents now in the index, paragraphs added, bad lines
    skipped (`skip_bad`; else the first bad line raises `CorpusError`) and seconds.

    tantivy: into the folder `out`. elasticsearch: into `index_name` (default: the corpus file's
    name without its extension) at `url`. `progress(stats)` is called as records go in."""
    from decomp.handlers.search.tantivy_index import SearchIndexError

    corpus = Path(corpus)
    if backend == "tantivy" and (url or index_name):
        raise SearchIndexError("--url and --index-name are for --backend elasticsearch; a tantivy index is --out DIR")
    if backend == "elasticsearch" and out is not None:
        raise SearchIndexError("--out is the folder of a tantivy index; an Elasticsearch index is --url and --index-name")
    stats = ReadStats()
    records = read_corpus(corpus, skip_bad=skip_bad, stats=stats)
    tick = (lambda _count: progress(stats)) if progress is not None else None
    started = time.perf_counter()
    if backend == "tantivy":
        from decomp.handlers.search.tantivy_index import build_index

        if out is None:
            raise SearchIndexError("a tantivy index needs --out DIR (the folder to build it in)")
        summary = build_index(records, out, add=add, force=force, progress=tick)
        summary = {"backend": "tantivy", "index": str(Path(out)), **_keep(summary)}
    elif backend == "elasticsearch":
        from decomp.handlers.search.elastic import build_elastic

        if not url:
            raise SearchIndexError("an Elasticsearch index needs --url http://HOST:PORT")
        name = index_name or corpus.stem.lower()
        summary = build_elastic(records, url, name, add=add, force=force, server=server, progress=tick)
    else:
        raise SearchIndexError(f"unknown backend {backend!r}: tantivy or elasticsearch")
    summary.update(skipped=stats.skipped, seconds=round(time.perf_counter() - started, 3))
    if stats.problems:
        summary["skipped_lines"] = stats.problems
    return summary


def _keep(manifest: dict[str, Any]) -> dict[str, Any]:
    return {key: manifest[key] for key in ("version", "documents", "added") if key in manifest}


@contextmanager
def bytes_progress(total: int, enabled: bool | None = None) -> Iterator[Callable[[ReadStats], None] | None]:
    """A progress bar over a corpus file's `total` bytes, drawn on stderr when it is a terminal
    (`enabled` defaults to that); yields `tick(stats)`, or None when nothing is drawn."""
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("indexing"), BarColumn(bar_width=24), TextColumn("{task.percentage:>3.0f}%"),
               TextColumn("{task.description}"), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("", total=max(total, 1))
        yield lambda stats: bar.update(task, completed=stats.bytes_read,
                                       description=f"{stats.records} paragraphs · skipped {stats.skipped}")
