"""run_sync: a coroutine to its end from sync code, with or without a running loop (runtime/engine/syncrun.py)."""
import asyncio
import contextvars
import threading

import pytest

from decomp.runtime.engine.syncrun import loop_running, run_sync

VAR = contextvars.ContextVar("VAR", default="unset")


async def _where():
    await asyncio.sleep(0)
    return threading.current_thread().name, VAR.get()


def test_without_a_loop_it_runs_here():
    assert not loop_running()
    assert run_sync(_where) == (threading.current_thread().name, "unset")


def test_inside_a_running_loop_a_worker_thread_runs_it_with_this_context():
    async def cell():
        assert loop_running()
        VAR.set("cell")
        return run_sync(_where)

    assert asyncio.run(cell()) == ("decomp-run-sync", "cell")


def test_errors_are_raised_in_the_caller():
    async def boom():
        raise ValueError("bad row")

    async def cell():
        return run_sync(boom)

    with pytest.raises(ValueError, match="bad row"):
        run_sync(boom)
    with pytest.raises(ValueError, match="bad row"):
        asyncio.run(cell())
