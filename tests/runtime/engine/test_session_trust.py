"""Two sessions in one process, each with its own trust and limits, running at the same time:
each sees only its own (issue 45: trust is the session's, never the process's)."""
from __future__ import annotations

import asyncio
import os
import threading

import pytest

import decomp
from decomp import Session
from decomp.dsl.errors import DecompError
from decomp.handlers.sandbox.trust import Trust

# slow to import too: two sessions loading it at once must each get the whole module
SLOW = "import time\n\ntime.sleep(0.3)\n\n\ndef slow(query):\n    time.sleep(1.0)\n    return query.upper()\n"
TRUSTING = 'handler cap = python(function="string:capwords")\nmain cap\n'


def write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


@pytest.fixture
def programs(tmp_path):
    write(tmp_path / "slow", "slow_trust_helpers.py", SLOW)
    slow = write(tmp_path / "slow", "slow.decomp", 'handler s = python(function="slow_trust_helpers:slow")\nmain s\n')
    return slow, write(tmp_path / "cap", "cap.decomp", TRUSTING)


def test_two_sessions_running_at_once_each_see_only_their_own_trust_and_limits(programs):
    slow, cap = programs
    trusting = Session(trust=Trust.of(["string"]), handler_timeout=0.3, python_workers=False)
    confined = Session(handler_timeout=5.0, python_workers=False)
    results, started = {}, threading.Barrier(2)

    def run(name, session):
        started.wait()
        module = session.load(slow)
        results[name] = session.run(module, {"question": "abc"})

    threads = [threading.Thread(target=run, args=(name, session))
               for name, session in (("trusting", trusting), ("confined", confined))]
    for thread in threads:
        thread.start()
    started_at_once = threading.Event()
    try:
        # while both run: the confined session may not load what the other trusts, and the
        # trusting one may
        with pytest.raises(DecompError, match="'string:capwords' is not allowed"):
            confined.load(cap)
        assert trusting.run(trusting.load(cap), {"question": "a b"}).answer == "A B"
        started_at_once.set()
    finally:
        for thread in threads:
            thread.join(30)
    assert started_at_once.is_set()
    assert "0.3" in (results["trusting"].error or "") and results["trusting"].answer is None  # its own 0.3 s
    assert results["confined"].error is None and results["confined"].answer == "ABC"  # its own 5 s
    assert confined.trust == Trust() and trusting.trust.modules == ("string",)


PID = "import os\n\n\ndef pid(query):\n    return os.getpid()\n"


def test_two_sessions_in_one_event_loop_each_run_python_under_their_own_limits(tmp_path):
    write(tmp_path, "pid_helpers.py", PID)
    program = write(tmp_path, "pid.decomp", 'handler p = python(function="pid_helpers:pid")\nmain p\n')
    contained = Session(handler_timeout=30, handler_memory_mb=512)
    threaded = Session(python_workers=False, handler_timeout=7)
    assert (contained.limits.timeout, contained.limits.memory, contained.limits.workers) == (30, 512, True)
    assert (threaded.limits.seconds, threaded.limits.memory, threaded.limits.workers) == (7, 1024, False)

    async def both():
        try:
            return await asyncio.gather(contained.arun(contained.load(program), {"question": "q"}),
                                        threaded.arun(threaded.load(program), {"question": "q"}))
        finally:
            await contained.aclose()
            await threaded.aclose()

    in_worker, in_thread = asyncio.run(both())
    assert in_worker.error is None and in_thread.error is None
    assert in_worker.answer != os.getpid() and in_thread.answer == os.getpid()


def test_two_loaded_programs_keep_their_own_trust(programs):
    _, cap = programs
    trusted = decomp.load(cap, trust=["string"], cache_mode="off")
    with pytest.raises(DecompError, match="not allowed"):
        decomp.load(cap, cache_mode="off")  # the first load's trust is its own
    assert trusted.run("a b").answer == "A B"
    assert trusted.session.trust.modules == ("string",) and trusted.trust == ("string",)


def test_a_folder_lent_for_a_while_is_the_lending_sessions_only(tmp_path):
    one, other = Session(), Session()
    with one.trusting([tmp_path]), one.trusting([tmp_path]):
        assert tmp_path.resolve() in one.trust.roots and tmp_path.resolve() not in other.trust.roots
    assert tmp_path.resolve() not in one.trust.roots  # lent while some block lends it, then no more
    with one.trusting([tmp_path]):
        with one.trusting([tmp_path]):
            pass
        assert tmp_path.resolve() in one.trust.roots  # the outer block still lends it
