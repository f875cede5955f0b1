"""A request's file reads share one deadline, and run on a few reader threads of their own.
No file can be made slow to read here (FIFOs and devices are refused unread, and there is no
FUSE), so the reads are calls that sleep, through the server's own `off_loop` and `answering`."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from pygls.exceptions import JsonRpcException

from decomp.editors.lsp.readers import READ_THREADS, Readers
from decomp.editors.lsp.server import DecompServer, answering


def test_reads_one_after_another_share_the_request_s_deadline():
    """Three reads of 0.6 s each, each within a 1 s timeout: together over it (once each read
    had its own, and a request touching N slow files waited N times as long)."""
    @answering
    async def request(ls: DecompServer, params):
        for _ in range(3):
            await ls.off_loop(time.sleep, 0.6)

    async def run():
        server = DecompServer(read_timeout=1.0)
        started = time.monotonic()
        with pytest.raises(JsonRpcException) as refused:
            await request(server, None)
        return time.monotonic() - started, refused.value

    took, refused = asyncio.run(run())
    assert 0.9 < took < 1.5
    assert "reading files took longer than 1 s" in refused.message


def test_each_request_has_a_deadline_of_its_own_and_load_lines_one_for_all_its_files():
    async def run():
        server = DecompServer(read_timeout=1.0)

        @answering
        async def request(ls, params):
            await ls.off_loop(time.sleep, 0.6)
            return "answered"

        first = [await request(server, None) for _ in range(3)]  # 0.6 s each, each request within 1 s
        with server.reading():
            await asyncio.sleep(1.0)
            with pytest.raises(TimeoutError):  # past the deadline: not even started
                await server.off_loop(time.sleep, 0)
        return first

    assert asyncio.run(run()) == ["answered"] * 3


def test_stuck_reads_hold_at_most_the_reader_threads_and_never_the_default_executor():
    release = threading.Event()

    async def run():
        server = DecompServer(read_timeout=0.3)
        started = time.monotonic()
        outcomes = await asyncio.gather(*(server.off_loop(release.wait) for _ in range(3 * READ_THREADS)),
                                        return_exceptions=True)
        took = time.monotonic() - started
        assert all(isinstance(o, TimeoutError) for o in outcomes) and took < 1.5
        assert len(server.readers.threads) == READ_THREADS and all(t.daemon for t in server.readers.threads)
        assert await asyncio.to_thread(lambda: "free") == "free"  # the default executor is not held
        release.set()
        return await server.off_loop(lambda: "read")  # the stuck reads ended: the threads serve again

    assert asyncio.run(run()) == "read"


def test_a_read_cancelled_before_it_starts_never_runs():
    readers, ran, gate = Readers(1), [], threading.Event()
    first = readers.submit(gate.wait)
    second = readers.submit(ran.append, 1)
    assert second.cancel()
    gate.set()
    assert first.result(5) is True
    assert readers.submit(lambda: "after").result(5) == "after" and ran == []
