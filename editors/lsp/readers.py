"""The language server's file reads, off its event loop on a few threads of their own
(`Readers`): a read that never ends holds one of them, never a thread of the loop's default
executor, and never the process's exit (they are daemon threads)."""
from __future__ import annotations

import contextvars
import queue
import threading
from concurrent.futures import Future
from typing import Callable

#: How many reads run at once; past as many reads stuck for ever, later ones wait their turn
#: (and time out with their request).
READ_THREADS = 4


class Readers:
    """At most `size` daemon threads that run `submit`ted reads in turn, started as needed."""

    def __init__(self, size: int = READ_THREADS):
        self.size = size
        self.threads: list[threading.Thread] = []
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()

    def submit(self, call: Callable, *args) -> Future:
        """`call(*args)` on a reader thread, in the caller's context; its future (a read
        cancelled before it starts never runs)."""
        future: Future = Future()
        self._queue.put((future, contextvars.copy_context().run, (call, *args)))
        with self._lock:
            if len(self.threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"decomp-lsp-read-{len(self.threads)}", daemon=True)
                thread.start()
                self.threads.append(thread)
        return future

    def _work(self) -> None:
        while True:
            future, call, args = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call(*args)
            except BaseException as err:  # the caller's to see
                future.set_exception(err)
            else:
                future.set_result(result)
