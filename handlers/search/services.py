"""The embedded index as an outbound `Service`, so that its searches go the way every service
call goes (the scheduler's slots of its endpoint, budgets of kind "search", a trace node,
retries, the step cache), although tantivy runs in this process.

Tantivy is synchronous. Opening an index runs in a worker thread (`asyncio.to_thread`). A
search runs in a worker thread too, so the event loop goes on serving other rows meanwhile,
unless the index has shown itself fast: handing a search to a thread and back costs about
0.1-0.2 ms, as much as a whole top-10 search of a few hundred thousand paragraphs, so a search
of an index whose recent searches took under `INLINE_BELOW_S` (a moving average, measured on
every search wherever it ran) and whose query has at most `INLINE_WORDS` words runs on the loop
itself. The first searches of an index, long queries, and every search of an index that turns
slow (a large corpus, a busy disk) go to a thread: the loop is never held for longer than a
couple of milliseconds by a search.
"""
from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from decomp.handlers.search.tantivy_index import MANIFEST, TantivyIndex, manifest_signature
from decomp.handlers.service import Service


#: A search runs on the event loop when the index's recent searches averaged under this (seconds).
INLINE_BELOW_S = 0.002
#: ... and its query has at most this many words.
INLINE_WORDS = 32
#: Searches of a newly opened index that run in a thread, to measure it, before any runs inline.
_WARM_UP = 3
#: Weight of the newest search in the moving average of search times.
_WEIGHT = 0.2


class TantivyService(Service):
    """One index folder. `current()` is the opened index, reopened whenever its manifest changed
    (a rebuild or an add), so every search names the version it was answered from."""

    kind = "search"

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._manifest = str(self.folder / MANIFEST)
        self.name = f"tantivy:{self.folder}"
        self.endpoint = self.name
        self._opened: tuple[Any, TantivyIndex] | None = None
        self._lock = threading.Lock()
        #: Searches timed since the index was last opened, and their moving average (seconds).
        self._timed = 0
        self._average = 0.0
        #: Searches run in all, and how many of them ran on the event loop.
        self.searches = 0
        self.inline_searches = 0

    def __repr__(self) -> str:
        return f"TantivyService({str(self.folder)!r})"

    async def current(self) -> TantivyIndex:
        """The index as it is now (opened in a thread when it changed); `SearchIndexError` when
        the folder holds no ready index."""
        opened = self._opened
        if opened is not None and opened[0] is not None and opened[0] == manifest_signature(self._manifest):
            return opened[1]
        return await asyncio.to_thread(self._open)

    def _open(self) -> TantivyIndex:
        with self._lock:
            signature = manifest_signature(self._manifest)
            if self._opened is not None and self._opened[0] == signature and signature is not None:
                return self._opened[1]
            index = TantivyIndex(self.folder)
            self._opened = (signature, index)
            self._timed, self._average = 0, 0.0
            return index

    async def search(self, index: TantivyIndex, terms: str, k: int) -> list[dict[str, Any]]:
        """`index.search(terms, k)`: on the loop when the index is fast and the query short (see
        the module's docstring), else in a worker thread."""
        self.searches += 1
        if self.inline(terms):
            self.inline_searches += 1
            return self._timed_search(index, terms, k)
        return await asyncio.to_thread(self._timed_search, index, terms, k)

    def inline(self, terms: str) -> bool:
        """Whether a search for `terms` runs on the event loop now."""
        return (self._timed >= _WARM_UP and self._average < INLINE_BELOW_S
                and terms.count(" ") < INLINE_WORDS)

    def _timed_search(self, index: TantivyIndex, terms: str, k: int) -> list[dict[str, Any]]:
        start = time.perf_counter()
        try:
            return index.search(terms, k)
        finally:
            took = time.perf_counter() - start
            self._average = took if self._timed == 0 else self._average + _WEIGHT * (took - self._average)
            self._timed += 1

    async def aclose(self) -> None:
        self._opened = None
