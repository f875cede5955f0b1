"""The embedded index as an outbound `Service`, so that its searches go the way every service
call goes (the scheduler's slots of its endpoint, budgets of kind "search", a trace node,
retries, the step cache), although tantivy runs in this process.

Tantivy is synchronous: each search (and each opening of an index) runs in a worker thread
(`asyncio.to_thread`), so the event loop goes on serving other rows meanwhile.
"""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from decomp.handlers.search.tantivy_index import MANIFEST, TantivyIndex, manifest_signature
from decomp.handlers.service import Service


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
            return index

    async def search(self, index: TantivyIndex, terms: str, k: int) -> list[dict[str, Any]]:
        return await asyncio.to_thread(index.search, terms, k)

    async def aclose(self) -> None:
        self._opened = None
