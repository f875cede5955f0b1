"""Run a coroutine to its end from synchronous code, whether or not an event loop is running.

`asyncio.run` refuses inside a running loop (a Jupyter kernel runs one), and a coroutine made
for it is then never awaited. `run_sync(make)` calls `make()` only where the coroutine will run:
with no loop running in this thread, under `asyncio.run` here; inside a running loop, under
`asyncio.run` on a worker thread of its own, with this thread's context variables, while this
thread waits. An interrupt (Ctrl-C, Jupyter's stop button) while waiting cancels the work on the
worker thread and is raised here once the work has stopped.
"""
from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


def loop_running() -> bool:
    """Whether an event loop is running in this thread (as in a Jupyter cell)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """The result of the coroutine `make()` (or the exception it raised), run to its end."""
    if not loop_running():
        return asyncio.run(_awaited(make))
    return _on_worker_thread(make)


async def _awaited(make: Callable[[], Awaitable[T]]) -> T:
    return await make()


def _on_worker_thread(make: Callable[[], Awaitable[T]]) -> T:
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> T:
        outcome["task"] = asyncio.current_task()
        outcome["loop"] = asyncio.get_running_loop()
        started.set()
        return await make()

    def work() -> None:
        try:
            outcome["value"] = context.run(asyncio.run, main())
        except BaseException as err:  # handed to the waiting thread, raised there
            outcome["error"] = err
        finally:
            started.set()

    thread = threading.Thread(target=work, name="decomp-run-sync", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        started.wait()
        try:
            outcome["loop"].call_soon_threadsafe(outcome["task"].cancel)
        except (KeyError, RuntimeError):  # it never started, or has ended (its loop is closed)
            pass
        thread.join()
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
