"""Worker processes for user Python: a call past its deadline is killed, not abandoned, and one
that allocates past its memory limit fails alone.

    reply = await call_in_worker("decomp.handlers.kinds.python:answer_in_worker", payload,
                                 limit=10.0, memory_mb=1024.0, what="function helpers:f")

The design, in the order a call meets it:

* **A small pool** per parent process: at most `POOL_SIZE` worker processes (min(4, cores)),
  the first started by the first call, each reused across calls, sessions and event loops. They
  come from multiprocessing's `forkserver` context on Linux (`fork` would copy a parent that
  runs threads) and `spawn` elsewhere; the fork server preloads the python kind, so a fresh
  worker starts in milliseconds. A call takes a free worker, or waits for one (first come, first
  served, except that a worker given back goes to the first waiting call of a memory limit it
  fits, see Memory); the wait, and a worker's start, do not count against the call's limit.
* **The request** (`entry`, `payload`, the memory limit, the largest reply) is pickled to the
  worker after its id: `ID_BYTES` random bytes the parent makes for that call, which nothing in
  the worker knew before. The worker runs `entry(payload)`: a function of decomp's own
  (`decomp.` modules only), which imports the user's function and calls it. Each worker has a
  daemon thread of its own in the parent that sends the request and waits for the reply, so the
  event loop goes on.
* **Deadline**: a reply not there, all of its frame, `KILL_GRACE` seconds after `limit` never
  comes (the parent reads the frame from the connection's descriptor itself, so a frame begun
  and not finished, or one that trickles, does not hold it past the deadline): the parent
  kills the worker (SIGKILL; a Python thread could not be stopped, a process can, whatever holds
  its interpreter lock) and the call is a `TimeLimitError` (`overrun_message`). A call given up
  (its row cancelled) kills its worker too. A killed or dead worker is replaced: its slot goes to
  the next call, which starts a fresh one.
* **Memory**: as a call first enters `capped()` (where the entry runs the user's code and
  converts its answer), the worker's RLIMIT_DATA (its private writable memory: heap and
  anonymous mappings, which Linux counts since 4.7) becomes what the process already uses plus
  the call's limit, soft and hard, so an allocation past it fails at once with MemoryError, even
  inside C code (`"x" * 10**10`), and no code in the worker can raise it (unless the process has
  CAP_SYS_RESOURCE: root's processes usually do). The call is then a `MemoryLimitError` and the
  worker is replaced. A hard limit, once lowered, cannot be raised again: the worker is held to
  that limit for good, and the pool gives it only calls of the same limit (a worker given back
  goes to the first waiting call it fits, else to the first, which replaces it; an idle worker
  held to another one is replaced when no slot is free); what its earlier calls kept (a module's
  cache) counts against later ones, and the error says so when it is much. A request too big to
  read under that limit ends the worker (`_NO_ROOM`), and the call is sent once more, to a fresh
  worker. Only Linux enforces it; elsewhere the limit is not applied (the deadline still is).
* **The reply** is the request's id, one byte (`_SERVING`, or `_RETIRING` when the call left a
  thread running, or a process of its own that holds the connection (`os.fork` without exec;
  Linux: /proc): the worker then ends, its threads with it, and what such a process writes goes
  to a connection nobody reads again) and JSON, never unpickled in the parent: `{"result":
  ...}` (what the entry returned), `{"memory": true}`, `{"too_big": SIZE}` (the worker measured
  the reply and it was over `max_bytes`: refused by size, the answer never sent) or `{"crash":
  ...}` (the entry itself failed). The parent reads at most
  `max_bytes` (and a little) whatever the worker says. Anything else (another id, garbage,
  a frame longer than a reply can be: what the function wrote to the connection) is never taken
  for an answer: that call fails, saying so, and its worker is killed and replaced; an idle
  worker with anything unread on its connection is replaced before its next call. (A function
  can find its own call's id in its process, but a thread it leaves running ends with its
  worker, and a process it leaves has a copy of the memory of its call's time, so neither ever
  learns a later call's id: nothing they write is taken for another call's answer. A process
  orphaned at once, by a child that forks it and exits, is not found: what it writes while the
  worker is idle has the worker replaced, but what it writes during a later call fails that
  call.)
* **A worker that dies** (os._exit, a signal, a segfault) is its call's error, naming the exit
  code or the signal.

Workers ignore SIGINT (Ctrl-C stops the parent, which kills them) and are killed when the parent
exits (`shutdown`). When the parent dies (SIGKILL too) they die with it: a worker first closes
the write ends of the fork server's "alive" pipe and of the resource tracker's pipe that
multiprocessing hands it, so that the parent holds the last ones, and both end at their EOF;
each worker dies with the fork server (Linux: PR_SET_PDEATHSIG, set in the worker, whose parent
is the fork server's one thread), and elsewhere ends at the EOF of its pipe once idle. Its
connection is not inherited by programs it runs (close-on-exec), and the other pipes are closed,
so what a function writes to descriptors reaches its own worker's connection at most. Workers are
not daemonic processes, so user code may start processes of its own.
"""
from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import json
import multiprocessing
import os
import pickle
import queue
import secrets
import signal
import struct
import sys
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import wait as wait_ready
from typing import Any, Callable, Iterator

from decomp.dsl.errors import HandlerError
from decomp.dsl.waits import waiting
from decomp.handlers.sandbox.offload import TimeLimitError, overrun_message

#: Worker processes per parent process.
POOL_SIZE = max(1, min(4, os.cpu_count() or 1))
#: Seconds past a call's limit its reply may still arrive before the worker is killed.
KILL_GRACE = 0.2
#: The largest reply (JSON bytes) a worker sends: a bigger answer is refused by its size.
MAX_ANSWER_BYTES = 64 * 2**20
#: Seconds a worker may take to start (spawn: a fresh interpreter importing decomp).
START_TIMEOUT = 120.0
#: What may be added to `max_bytes` for the reply's envelope.
_ENVELOPE = 64 * 2**10
#: Bytes of a request's id: random, made in the parent for each call; its reply starts with it.
ID_BYTES = 16
#: What follows the id in a reply: the worker takes further calls, or it ends (its call left a
#: thread running).
_SERVING, _RETIRING = b"K", b"R"
#: A worker's exit code when it had no room to read a request (held to an earlier call's limit).
_NO_ROOM = 75
_LINUX = sys.platform.startswith("linux")
#: The modules a fresh worker starts with (the fork server imports them once).
PRELOAD = ("decomp.handlers.kinds.python",)


class MemoryLimitError(HandlerError):
    """A call used more memory than its limit."""


def memory_message(what: str, limit_mb: float, option: str | None = "memory") -> str:
    """The error of a call that went over its memory limit: what, the limit, how to raise it."""
    how = (f"raise it with the handler's {option}=MB option or the run's --handler-memory MB"
           if option else "raise it with the run's --handler-memory MB")
    return f"{what} used more than its memory limit of {mib(limit_mb)} MiB ({how})"


def mib(size_mb: float) -> str:
    """1024.0 -> "1,024"; 0.5 -> "0.5"."""
    return f"{size_mb:,.0f}" if size_mb == int(size_mb) else f"{size_mb:,.1f}"


async def call_in_worker(entry: str, payload: Any, *, limit: float, memory_mb: float | None, what: str,
                         option: str | None = "timeout", memory_option: str | None = "memory",
                         max_bytes: int | None = None) -> Any:
    """What `entry(payload)` returns (JSON data), run in a worker process for at most `limit`
    seconds and `memory_mb` MiB more memory (None: no limit).

    entry:   "decomp.MODULE:FUNCTION", called in the worker with `payload` (pickled there).
    what:    the work, for messages ("function helpers:f"); option, memory_option: the
             handler's options that set the limits (None: only the run's settings do).
    Raises `TimeLimitError`, `MemoryLimitError`, or a `HandlerError` saying that the worker died,
    that the reply was over `max_bytes` (None: `MAX_ANSWER_BYTES`), or that no worker could be
    started."""
    most = MAX_ANSWER_BYTES if max_bytes is None else max_bytes
    return await pool().call(entry, payload, limit=limit, memory_mb=memory_mb, what=what, option=option,
                             memory_option=memory_option, max_bytes=most)


# ---- the parent's side
#: Held while a process is started or polled: multiprocessing reads a finished child's exit
#: status from its sentinel, and two threads reading it at once would spoil it.
_PROCESS_LOCK = threading.Lock()


class _Worker:
    """One worker process, and the daemon thread in the parent that talks to it."""

    def __init__(self) -> None:
        self.process: Any = None
        self.conn: Any = None
        #: The memory limit (bytes) the process is held to for good, by its first call that had
        #: one (Linux); None until then.
        self.held: int | None = None
        #: Whether it was given a call.
        self.used = False
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._work, name="decomp-python-worker", daemon=True).start()

    async def do(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in this worker's thread (its result or its error)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((fn, args, loop, future))
        return await future

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fn, args, loop, future = job
            result, error = None, None
            try:
                result = fn(*args)
            except BaseException as err:  # handed to the caller
                error = err
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, result, error)
            job = fn = args = loop = future = result = error = None
        self._end()

    def start(self) -> None:
        """Start the process (in this worker's thread)."""
        context = _context()
        mine, theirs = context.Pipe()
        process = context.Process(target=serve, args=(theirs,), name="decomp-python-worker")
        with _PROCESS_LOCK, _without_main():
            process.start()
        theirs.close()
        self.process, self.conn = process, mine
        # ready once it imported decomp (`spawn` imports it after the start): not on a call's clock
        with contextlib.suppress(EOFError, OSError):
            if mine in wait_ready([mine, process.sentinel], START_TIMEOUT) and mine.recv_bytes(16) == b"ready":
                return
        if self.alive():
            raise RuntimeError(f"the worker process was not ready within {START_TIMEOUT:g} s")
        raise RuntimeError(f"the worker process {_ending(self._exit_code())} as it started")

    def exchange(self, request: bytes, limit: float, max_bytes: int) -> tuple[str, Any]:
        """Send the `request` and wait for the reply, all of its frame by the deadline: ("reply",
        bytes), ("timeout", None) once the worker was killed at the limit (a frame begun but not
        finished by then too), ("garbled", None) (a frame longer than any reply: not the worker's
        own; it is killed) or ("died", exit code)."""
        try:
            self.conn.send_bytes(request)
        except OSError:
            return "died", self._exit_code()
        try:
            return "reply", self._frame(_now() + limit + KILL_GRACE, max_bytes + _ENVELOPE)
        except TimeoutError:
            self.kill()
            return "timeout", None
        except (EOFError, OSError):
            return "died", self._exit_code()
        except ValueError:  # longer than a worker's reply can be: the rest of it is never read
            self.kill()
            return "garbled", None

    def _frame(self, deadline: float, most: int) -> bytearray:
        """The next frame on the connection, read from its descriptor (not `recv_bytes`, which
        would wait for a frame's end past any deadline). multiprocessing's framing: a 4-byte
        big-endian signed length, or -1 and an 8-byte one. Raises TimeoutError past the deadline,
        EOFError when the worker died, ValueError for a frame longer than `most`."""
        size = struct.unpack("!i", self._read(4, deadline))[0]
        if size == -1:
            size = struct.unpack("!Q", self._read(8, deadline))[0]
        if not 0 <= size <= most:
            raise ValueError(f"a frame of {size} bytes")
        return self._read(size, deadline)

    def _read(self, size: int, deadline: float) -> bytearray:
        """`size` bytes of the connection, and not one more (what follows is not this call's)."""
        fd, data, got = self.conn.fileno(), bytearray(size), 0
        view = memoryview(data)
        while got < size:
            left = deadline - _now()
            ready = wait_ready([fd, self.process.sentinel], left) if left > 0 else []
            if fd in ready:
                done = os.readv(fd, [view[got:]])
                if not done:
                    raise EOFError
                got += done
            elif self.process.sentinel in ready:  # dead, and what it sent is all read
                raise EOFError
            else:
                raise TimeoutError
        view.release()
        return data

    def _exit_code(self) -> int | None:
        if wait_ready([self.process.sentinel], 2):
            with _PROCESS_LOCK:
                self.process.join(1)  # reaps it (spawn): the exit code is known only then
        return self.process.exitcode

    def alive(self) -> bool:
        with _PROCESS_LOCK:
            return self.process is not None and self.process.is_alive()

    def quiet(self) -> bool:
        """Whether nothing waits unread on its connection (so it is when the worker is idle)."""
        with contextlib.suppress(OSError, ValueError):
            return not self.conn.poll(0)
        return False

    def fits(self, memory: int | None) -> bool:
        """Whether a call of this memory limit may run here: a worker is held to one limit."""
        return self.held is None or self.held == memory

    def hold(self, memory: int | None) -> None:
        """The process runs a call of this memory limit: from now on it is held to it (Linux)."""
        self.used = True
        if _LINUX and memory is not None:
            self.held = memory

    def kill(self) -> None:
        """SIGKILL the process (from any thread)."""
        if self.process is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self.process.kill()

    def retire(self) -> None:
        """Kill the process, and end its thread once the thread's current job is done."""
        self.kill()
        self._jobs.put(None)

    def _end(self) -> None:
        if self.process is None:
            return
        self.kill()
        wait_ready([self.process.sentinel], 2)
        with _PROCESS_LOCK, contextlib.suppress(OSError, ValueError, AttributeError):
            self.process.join(0)
        with contextlib.suppress(OSError):
            self.conn.close()


def _settle(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # given up
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _now() -> float:
    return time.monotonic()


class WorkerPool:
    """At most `size` worker processes, and the calls waiting for one (any event loop's).

    `lock` guards `_idle`, `_live` (the workers started), `_count` (slots taken: workers started
    or starting) and `_waiters` (each a loop and a future that gets a worker, or None: a free
    slot to start one in)."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self.size = size
        self.lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._count = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future, int | None]] = deque()
        self.pid = os.getpid()

    async def call(self, entry: str, payload: Any, *, limit: float, memory_mb: float | None, what: str,
                   option: str | None, memory_option: str | None, max_bytes: int) -> Any:
        """See `call_in_worker`. A worker that had no room to read the request (`_NO_ROOM`: the
        limit an earlier call held it to) is replaced, and the call sent once more, to a fresh
        worker."""
        memory = None if memory_mb is None else int(memory_mb * 2**20)
        ident = secrets.token_bytes(ID_BYTES)  # the reply must start with it: nothing in a worker knew it before
        request = ident + _pickled(entry, payload, memory, max_bytes, what)
        limits = (limit, memory_mb, option, memory_option, max_bytes)
        try:
            return await self._once(request, ident, memory, what, limits, fresh=False)
        except _NoRoom:
            return await self._once(request, ident, memory, what, limits, fresh=True)

    async def _once(self, request: bytes, ident: bytes, memory: int | None, what: str, limits: tuple,
                    fresh: bool) -> Any:
        """The call in one worker (`fresh`: one that ran no call yet)."""
        limit, memory_mb, option, memory_option, max_bytes = limits
        with waiting():  # queue time: the wait for a worker, and a fresh one's start
            worker = await self._acquire(what, memory, fresh)
        worker.hold(memory)
        serving = False
        try:
            try:
                kind, data = await worker.do(worker.exchange, request, limit, max_bytes)
            except asyncio.CancelledError:
                worker.kill()  # given up: its work stops too
                raise
            if kind == "died" and data == _NO_ROOM and not fresh:
                raise _NoRoom
            if kind != "reply":
                raise _failure(kind, data, what, limit, option, len(request))
            serving, reply = _opened(data, ident, what)
            serving = serving and ("result" in reply or "too_big" in reply)
            return _result(reply, what, memory_mb, memory_option, max_bytes)
        finally:
            self._give(worker if serving else None, retired=None if serving else worker)

    async def _acquire(self, what: str, memory: int | None, fresh: bool = False) -> _Worker:
        loop = asyncio.get_running_loop()
        future = None
        with self.lock:
            worker = self._idle_for(memory)
            if worker is None and self._count < self.size:
                self._count += 1  # this call's slot: it starts a worker in it
            elif worker is None:
                future = loop.create_future()
                self._waiters.append((loop, future, memory))
        if future is not None:
            worker = await self._wait(loop, future, memory)
        if worker is not None and worker.fits(memory) and not (fresh and worker.used) and worker.alive() \
                and worker.quiet():
            return worker
        if worker is not None:  # held to another memory limit, used, dead, or something waits on its connection
            self._forget(worker)
        return await self._start(what)

    def _idle_for(self, memory: int | None) -> _Worker | None:
        """An idle worker for a call of this memory limit (the lock held): one held to it, else
        one not held yet, else, when no slot is free, the one idle longest (to be replaced)."""
        for wanted in (memory, None):
            for worker in reversed(self._idle):
                if worker.held == wanted and worker.fits(memory):
                    self._idle.remove(worker)
                    return worker
        if self._idle and self._count >= self.size:
            return self._idle.pop(0)
        return None

    async def _wait(self, loop, future, memory: int | None) -> _Worker | None:
        try:
            return await future
        except asyncio.CancelledError:
            with self.lock:
                with contextlib.suppress(ValueError):
                    self._waiters.remove((loop, future, memory))
            if future.done() and not future.cancelled():  # handed over, but the caller is gone
                self._give(future.result())
            raise

    async def _start(self, what: str) -> _Worker:
        """A fresh worker in a slot this call holds."""
        worker = _Worker()
        try:
            await worker.do(worker.start)
        except BaseException as err:
            worker.retire()  # its thread's next job: killed if it did start after all
            self._give(None)
            if isinstance(err, Exception):
                raise HandlerError(f"{what}: no worker process could be started: {type(err).__name__}: {err}") from err
            raise
        with self.lock:
            self._live.add(worker)
        return worker

    def _forget(self, worker: _Worker) -> None:
        worker.retire()
        with self.lock:
            self._live.discard(worker)

    def _give(self, worker: _Worker | None, retired: _Worker | None = None) -> None:
        """A worker back (None: a free slot), to a waiting call (`_next_waiter`), else to the idle
        ones."""
        if retired is not None:
            self._forget(retired)
        with self.lock:
            if worker is not None and worker not in self._live:  # shut down meanwhile
                worker = None
            while self._waiters:
                loop, future = self._next_waiter(worker)
                try:
                    loop.call_soon_threadsafe(self._hand, future, worker)
                    return
                except RuntimeError:  # that loop is closed
                    continue
            if worker is not None:
                self._idle.append(worker)
            else:
                self._count -= 1

    def _next_waiter(self, worker: _Worker | None) -> tuple[asyncio.AbstractEventLoop, asyncio.Future]:
        """The waiting call a worker (None: a free slot) goes to, taken off the queue (the lock
        held): the first whose memory limit the worker fits, else the first, which replaces it."""
        chosen = 0
        if worker is not None:
            chosen = next((at for at, waiter in enumerate(self._waiters) if worker.fits(waiter[2])), 0)
        loop, future, _ = self._waiters[chosen]
        del self._waiters[chosen]
        return loop, future

    def _hand(self, future: asyncio.Future, worker: _Worker | None) -> None:
        if future.done():  # the waiting call is gone: the next one gets it
            self._give(worker)
        else:
            future.set_result(worker)

    def shutdown(self) -> None:
        """Kill every worker; a call running in one ends as died (and gives its slot back)."""
        with self.lock:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            workers = list(self._live)
            self._live.clear()
        for worker in workers:
            worker.retire()


def _pickled(entry: str, payload: Any, memory: int | None, max_bytes: int, what: str) -> bytes:
    try:
        return pickle.dumps((entry, payload, memory, max_bytes, _surroundings()), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:
        raise HandlerError(f"{what}: its arguments cannot be sent to a worker process: "
                           f"{type(err).__name__}: {err}") from None


def _opened(data: bytes, ident: bytes, what: str) -> tuple[bool, dict[str, Any]]:
    """Whether the worker takes further calls, and its reply, when `data` is the reply to the
    request `ident`; anything else on its connection (what the function wrote there, a reply to
    another request) is the call's error, never its answer."""
    size = len(ident)
    state = data[size:size + 1]
    if not secrets.compare_digest(data[:size], ident) or state not in (_SERVING, _RETIRING):
        raise _garbled(what)
    try:
        reply = json.loads(data[size + 1:])
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise _garbled(what)
    return state == _SERVING, reply


def _garbled(what: str) -> HandlerError:
    return HandlerError(f"{what}: its worker process's connection carried something that is not the reply to "
                        "this call (did the function write to it?), so the call has no answer; the worker was replaced")


def _result(reply: dict[str, Any], what: str, memory_mb: float | None, option: str | None, max_bytes: int) -> Any:
    """What the entry returned, or the error its reply stands for."""
    if "result" in reply:
        return reply["result"]
    if "memory" in reply:
        if memory_mb is None:
            raise MemoryLimitError(f"{what} ran out of memory")
        kept = reply.get("kept") or 0
        note = (f"; its worker process held {mib(round(kept / 2**20, 1))} MiB of it from earlier calls"
                if isinstance(kept, int) and kept >= memory_mb * 2**20 / 20 else "")
        raise MemoryLimitError(memory_message(what, memory_mb, option) + note)
    if "too_big" in reply:
        raise HandlerError(f"{what} answered with {mib(reply['too_big'] / 2**20)} MiB of JSON, over the "
                           f"limit of {mib(max_bytes / 2**20)} MiB for an answer")
    raise HandlerError(f"{what}: its worker process failed: {reply.get('crash')}", details=reply.get("details"))


class _NoRoom(Exception):
    """The worker had no room to read the request (`_NO_ROOM`)."""


def _failure(kind: str, data: Any, what: str, limit: float, option: str | None, size: int) -> HandlerError:
    if kind == "timeout":
        return TimeLimitError(overrun_message(what, limit, option))
    if kind == "garbled":
        return _garbled(what)
    if data == _NO_ROOM:
        return MemoryLimitError(f"{what}: a fresh worker process had no memory to read its request "
                                f"({mib(round(size / 2**20, 1))} MiB)")
    return HandlerError(f"{what}: its worker process {_ending(data)} before answering")


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def pool() -> WorkerPool:
    """This process's pool (a new one in a forked child: the parent's workers are not its own)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = WorkerPool()
        return _POOL


def shutdown() -> None:
    """Kill this process's workers (at exit; the next call starts fresh ones)."""
    if _POOL is not None and _POOL.pid == os.getpid():
        _POOL.shutdown()


atexit.register(shutdown)  # before multiprocessing's own exit hook, which would wait for them


def _context():
    context = multiprocessing.get_context("forkserver" if _LINUX else "spawn")
    if _LINUX:
        context.set_forkserver_preload(list(PRELOAD))
    return context


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """While a worker starts: multiprocessing would have it run the parent's `__main__` script
    again (as `__mp_main__`), which a script that runs decomp at its top level, without the
    `if __name__ == "__main__":` guard, must not have; a worker needs only decomp's modules and
    the user's, which it imports by name. So the start's preparation data leaves the main module
    out (multiprocessing has no option for it)."""
    from multiprocessing import spawn

    prepare = spawn.get_preparation_data

    def without_main(name):
        data = prepare(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    spawn.get_preparation_data = without_main
    try:
        yield
    finally:
        spawn.get_preparation_data = prepare


def _ending(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by signal {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


# ---- the worker's side
#: Bytes the call running now may add to the worker's memory (None: no limit).
_CAP: int | None = None
#: The memory limit this worker is held to for good, and the private writable memory it held
#: when the limit was set (bytes); None until a call with a limit entered `capped()`.
_HELD: tuple[int, int] | None = None
#: What the worker held, as the call running now entered `capped()`, past what it held then.
_KEPT = 0


def serve(conn) -> None:
    """A worker's loop: read a request, run its entry, send the reply (after the request's id),
    until the pipe closes, or until a call leaves code running (then the worker ends, and with
    it that code's threads)."""
    _settle_in(conn)
    for module in PRELOAD:
        importlib.import_module(module)
    conn.send_bytes(b"ready")
    while True:
        try:
            request = conn.recv_bytes()
        except (EOFError, OSError):
            return
        except MemoryError:  # no room for it under the limit an earlier call set: the pool retries
            os._exit(_NO_ROOM)
        ident, reply = _answer(request)
        left = _left_running(conn)
        try:
            conn.send_bytes(ident + (_RETIRING if left else _SERVING) + reply)
        except OSError:
            return
        if left:
            os._exit(0)


def _answer(request: bytes) -> tuple[bytes, bytes]:
    """The request's id, and the reply to it (JSON)."""
    ident = request[:ID_BYTES]
    try:
        entry, payload, memory, max_bytes, surroundings = pickle.loads(memoryview(request)[ID_BYTES:])
        _take(surroundings)
    except MemoryError:  # under the limit an earlier call set
        return ident, _memory_reply()
    except Exception as err:
        return ident, json.dumps({"crash": f"the request could not be read: {type(err).__name__}: {err}"}).encode()
    return ident, _reply(entry, payload, memory, max_bytes)


def _left_running(conn) -> bool:
    """Whether the call left code running that could write to this worker's connection during a
    later call: a thread besides this one (it shares the worker's memory, so it could learn a
    later call's id, and answer that call), or a process it started that holds the connection
    (`_holding`; `os.fork` without exec). Then the worker ends after its reply, and what that
    code writes goes to a connection nobody reads again. Programs a function starts and keeps,
    such as a server it talks to, do not hold it (close-on-exec), so they stay with their worker."""
    return len(sys._current_frames()) > 1 or _holding(conn)


def _holding(conn) -> bool:
    """Whether a process started here (a child of the worker, or one of theirs) holds the
    connection's socket (Linux: /proc; elsewhere False). A process orphaned at once is not
    found: what it writes while the worker is idle has the worker replaced before its next
    call."""
    if not _LINUX:
        return False
    try:  # its children: the one thread left has them all
        pids = [int(pid) for pid in _read_all(f"/proc/self/task/{os.getpid()}/children").split()]
    except (OSError, ValueError):
        return False
    if not pids:
        return False
    try:
        mark = f"socket:[{os.fstat(conn.fileno()).st_ino}]"
    except OSError:
        return True
    seen: set[int] = set()
    while pids:
        pid = pids.pop()
        if pid not in seen:
            seen.add(pid)
            if _holds(pid, mark):
                return True
            pids.extend(_children(pid))
    return False


def _children(pid: int) -> list[int]:
    """The process's children (those of each of its threads)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError):
                found.extend(map(int, _read_all(f"/proc/{pid}/task/{tid}/children").split()))
    return found


def _read_all(path: str) -> bytes:
    """A small file's bytes (os calls: a call with no child pays this on every call)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = chunk = os.read(fd, 2**16)
        while len(chunk) == 2**16:  # a short read is the end (/proc fills what fits)
            chunk = os.read(fd, 2**16)
            data += chunk
        return data
    finally:
        os.close(fd)


def _holds(pid: int, mark: str) -> bool:
    """Whether a descriptor of the process is the socket `mark` ("socket:[INODE]")."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # ended, or not ours to read
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == mark:
                return True
    return False


def _surroundings() -> tuple[dict[str, str], str, list[str]]:
    """What a function sees of the parent: its environment variables, working folder and import
    path, now (a worker started earlier takes them before each call)."""
    with contextlib.suppress(OSError):
        return dict(os.environ), os.getcwd(), list(sys.path)
    return dict(os.environ), "", list(sys.path)


def _take(surroundings: tuple[dict[str, str], str, list[str]]) -> None:
    environ, cwd, path = surroundings
    if environ != os.environ:
        os.environ.clear()
        os.environ.update(environ)
    with contextlib.suppress(OSError):
        if cwd and cwd != os.getcwd():
            os.chdir(cwd)
    if path != sys.path:
        sys.path[:] = path


def _reply(entry: str, payload: Any, memory: int | None, max_bytes: int) -> bytes:
    global _CAP, _KEPT
    if _HELD is not None and memory != _HELD[0]:  # the pool sends such a call to another worker
        return json.dumps({"crash": f"the worker process is held to another memory limit ({_HELD[0]} bytes)"}).encode()
    _CAP, _KEPT = memory, 0
    try:
        reply: dict[str, Any] = {"result": _entry(entry)(payload)}
        data = json.dumps(reply).encode()
    except MemoryError:
        data = _memory_reply()
    except BaseException as err:  # the entry's own failure, whatever it is: never the worker's end
        data = json.dumps({"crash": f"{type(err).__name__}: {err}", "details": traceback.format_exc()}).encode()
    finally:
        _CAP = None
    if len(data) > max_bytes:
        data = json.dumps({"too_big": len(data)}).encode()
    return data


def _memory_reply() -> bytes:
    return b'{"memory": true, "kept": %d}' % _KEPT


def _entry(path: str) -> Callable[[Any], Any]:
    module, _, attr = path.partition(":")
    if not module.startswith("decomp."):
        raise ValueError(f"a worker runs decomp's own entries only, not {path!r}")
    return getattr(importlib.import_module(module), attr)


@contextlib.contextmanager
def capped() -> Iterator[None]:
    """Within the block, and from then on, the worker may take at most the call's memory limit
    more private writable memory than it held as a call first entered it (Linux: RLIMIT_DATA,
    its hard limit too, so that no code in the worker can raise it; elsewhere, or with no limit,
    nothing changes). A lowered hard limit cannot be raised again: the worker is held to that
    limit for good, the pool sends it only calls of the same limit, and what earlier calls kept
    counts against later ones. An allocation past it raises MemoryError: let it pass out of the
    entry."""
    global _HELD, _KEPT
    limit = _CAP
    used = _data_size() if limit is not None and _LINUX else None
    if used is not None and _HELD is None:
        _hold(used + limit)
        _HELD = (limit, used)
    if used is not None and _HELD is not None:
        _KEPT = max(0, used - _HELD[1])
    yield


def _hold(cap: int) -> None:
    """RLIMIT_DATA set to `cap` bytes (or to the hard limit, when lower), soft and hard."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))


def _data_size() -> int | None:
    """The process's private writable memory now, in bytes (VmData), or None."""
    try:
        with open("/proc/self/status", "rb") as file:
            for line in file:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _settle_in(conn) -> None:
    """Ctrl-C is the parent's to handle; the connection is not handed to programs the user's code
    runs; the worker lets go of the pipes multiprocessing gave it (`_let_go`); on Linux, it dies
    with the fork server (which dies with the parent)."""
    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(ValueError, OSError):
        os.set_inheritable(conn.fileno(), False)
    _let_go()
    if _LINUX:
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _let_go() -> None:
    """Close the write ends of the fork server's "alive" pipe and of the resource tracker's pipe,
    which multiprocessing hands every worker: each of them ends once its pipe has no writer
    left, so while workers held them neither noticed the parent's death, and what a function
    wrote to them could end the fork server. Code here that needs a resource tracker starts its
    own."""
    from multiprocessing import forkserver, resource_tracker

    for owner, name in ((forkserver._forkserver, "_forkserver_alive_fd"), (resource_tracker._resource_tracker, "_fd")):
        fd = getattr(owner, name, None)
        if isinstance(fd, int):
            with contextlib.suppress(OSError):
                os.close(fd)
            setattr(owner, name, None)
    resource_tracker._resource_tracker._pid = None
