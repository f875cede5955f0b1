"""Service time and queue time apart (issue 44, item 5): a call's seconds are kept whole and, of
them, the time it waited for a slot (a worker process or thread, the scheduler's concurrency
limit, the local model's one thread), for handler calls and model requests, in the row's usage,
the run's summary and the trace."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from decomp.dsl.waits import WAITS, Waits, counting_waits, waiting
from decomp.handlers.sandbox.offload import MAX_OVERRUNS
from decomp.handlers.sandbox.workers import POOL_SIZE
from decomp.runtime.engine.budgets import ModelUsage, Usage
from decomp.runtime.engine.scheduler import Scheduler
from decomp.runtime.engine.session import Session
from decomp.runtime.engine.tracing import TraceNode
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.runtime.storage.rundir import RunDir
from decomp.runtime.testing.fake import FakeModel

NAP = 0.1
SLOW = '''
import time

def nap(question):
    time.sleep(0.1)
    return question.upper()
'''
PROGRAM = '''
handler nap = python(function="slow:nap", returns=str)
program main(question: str) -> str {
    QS: [nap] #question
}
main main
'''


def rows(folder, count: int):
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "question": f"q{i}", "answer": f"Q{i}"}) + "\n"
                            for i in range(count)))
    return path


def program(folder):
    (folder / "slow.py").write_text(SLOW)
    (folder / "p.decomp").write_text(PROGRAM)
    return folder / "p.decomp"


# ---- the clock itself
def test_overlapping_waits_count_once_and_reach_the_caller():
    caller = Waits()
    request = Waits(caller)
    request.add(10.0, 12.0)
    request.add(11.0, 13.0)  # overlaps the first: one second more, not two
    other = Waits(caller)
    other.add(20.0, 20.5)
    assert request.seconds == pytest.approx(3.0) and other.seconds == pytest.approx(0.5)
    assert caller.seconds == pytest.approx(3.5)  # the handler call's: its requests' waits, once
    assert Waits().seconds == 0.0


def test_waiting_counts_in_the_current_call_only():
    async def main():
        with waiting():  # outside any call: counted nowhere, and no error
            await asyncio.sleep(0)
        with counting_waits(for_caller=False) as handler:
            with counting_waits(for_caller=True) as request:
                with waiting():
                    await asyncio.sleep(0.05)
            with counting_waits(for_caller=False) as nested:  # a handler it calls: its own figures
                with waiting():
                    await asyncio.sleep(0.05)
        assert WAITS.get() is None
        return handler.seconds, request.seconds, nested.seconds

    handler, request, nested = asyncio.run(main())
    assert 0.04 <= request <= handler < 0.09 and nested >= 0.04


# ---- python handlers: the wait for a worker is queue time
@pytest.mark.parametrize("workers", [True, False], ids=["processes", "threads"])
def test_a_handler_that_waits_for_a_worker_shows_its_service_time_apart(tmp_path, workers):
    """More rows than workers: each call runs NAP seconds, and most wait first. The mean of the
    service time is the function's time; the queue time is the rest; the two add up."""
    slots = POOL_SIZE if workers else MAX_OVERRUNS  # worker processes, or one handler's threads
    count = 3 * slots
    started = time.perf_counter()
    done = run_dataset(program(tmp_path), rows(tmp_path, count), run_dir=tmp_path / "run",
                       session=Session(python_workers=workers, handler_timeout=30))
    wall = time.perf_counter() - started
    assert done.failed == 0
    nap = RunDir.open(tmp_path / "run").summary()["handlers"]["nap"]
    assert nap["calls"] == count
    assert NAP <= nap["service_mean_ms"] / 1000 < NAP + 0.5
    assert nap["queue_mean_ms"] > 0 and nap["queue_seconds"] > NAP  # some waited for a worker
    assert nap["service_mean_ms"] + nap["queue_mean_ms"] == pytest.approx(nap["mean_ms"], abs=0.01)
    service = nap["seconds"] - nap["queue_seconds"]
    assert service <= wall * slots  # what ran fits in the run's time on its workers


def test_the_handler_nodes_of_the_trace_carry_both(tmp_path):
    run_dataset(program(tmp_path), rows(tmp_path, 3 * POOL_SIZE), run_dir=tmp_path / "run",
                session=Session(handler_timeout=30))
    calls = [node for _, tree in RunDir.open(tmp_path / "run").traces() for node in tree.walk()
             if node.kind == "call"]
    assert all(node.queued is not None and node.service >= NAP for node in calls)
    assert any(node.queued > NAP / 2 for node in calls)
    assert all(node.seconds == pytest.approx(node.service + node.queued) for node in calls)


# ---- model requests: the scheduler's slot, and the local model's one thread
class Napping(FakeModel):
    """A model that takes `NAP` seconds per request, without holding up the event loop."""

    async def complete(self, request):
        await asyncio.sleep(NAP)
        return await super().complete(request)


ASK = '''
handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)
program main(question: str) -> str {
    QS: [ask] #question
}
main main
'''


def test_model_requests_behind_a_concurrency_of_one_queue(tmp_path):
    (tmp_path / "p.decomp").write_text(ASK)
    count = 6
    session = Session(model=Napping(default='"x"'), scheduler=Scheduler(1))
    done = run_dataset(tmp_path / "p.decomp", rows(tmp_path, count), run_dir=tmp_path / "run", session=session)
    assert done.failed == 0
    summary = RunDir.open(tmp_path / "run").summary()
    model = summary["models"]["fake"]
    assert NAP <= model["service_mean_s"] < NAP + 0.1
    # one at a time: the k-th request waits for the k before it, NAP each: (0 + 1 + ... + 5) / 6 naps
    assert model["queue_mean_s"] == pytest.approx(NAP * (count - 1) / 2, rel=0.3)
    assert model["service_mean_s"] + model["queue_mean_s"] == pytest.approx(model["mean_s"], abs=1e-5)
    ask = summary["handlers"]["ask"]  # the prompt handler's queue time: its request's
    assert ask["queue_mean_ms"] / 1000 == pytest.approx(model["queue_mean_s"], rel=0.05)
    assert ask["service_mean_ms"] / 1000 < NAP + 0.1
    trees = [tree for _, tree in RunDir.open(tmp_path / "run").traces()]
    requests = [node for tree in trees for node in tree.walk() if node.kind == "model"]
    assert sorted(round(node.queued / NAP) for node in requests) == list(range(count))


def test_the_local_models_one_thread_is_queue_time():
    """Requests of the local model wait for its one worker thread: the wait is counted as the
    request's queue time (`LocalModel._run`), not its service time. (Nothing is loaded: the
    thread runs a plain sleep.)"""
    from decomp.runtime.models.base import ModelSettings
    from decomp.runtime.models.local import LocalModel

    model = LocalModel("gemma-3-270m", ModelSettings())
    seen = []

    async def one():
        with counting_waits(for_caller=False) as waits:
            await model._run(time.sleep, NAP)
        seen.append(waits.seconds)

    async def main():
        await asyncio.gather(one(), one(), one())

    try:
        asyncio.run(main())
    finally:
        model._worker.shutdown(wait=True)
    waits = sorted(seen)
    assert waits[0] < NAP / 2  # the first runs at once
    assert waits[1] == pytest.approx(NAP, abs=0.05) and waits[2] == pytest.approx(2 * NAP, abs=0.08)


# ---- what is written and read back
def test_records_and_summaries_keep_both_and_old_records_read_as_not_queued():
    usage = Usage()
    usage.count("nap", 2, 3.0, 2.0)
    usage.request("m", 1.5, 10, 2, None, queued=1.0)
    usage.request("m", 0.5, 10, 2, None)
    record = usage.to_dict()
    assert record["handlers"]["nap"] == {"calls": 2, "seconds": 3.0, "queue_seconds": 2.0, "mean_ms": 1500.0,
                                         "service_mean_ms": 500.0, "queue_mean_ms": 1000.0}
    assert record["models"]["m"]["queued"] == [1.0, 0.0]
    back = Usage.from_dict(record)
    assert back.to_dict() == record
    latency = back.models["m"].latency()
    assert (latency["mean_s"], latency["service_mean_s"], latency["queue_mean_s"]) == (1.0, 0.5, 0.5)
    old = Usage.from_dict({"handlers": {"nap": {"calls": 2, "seconds": 3.0, "mean_ms": 1500.0}},
                           "models": {"m": {"requests": 1, "seconds": [0.5]}}})
    assert old.to_dict()["handlers"]["nap"]["service_mean_ms"] == 1500.0
    assert old.models["m"].latency()["queue_mean_s"] == 0.0
    with pytest.raises(ValueError, match="queued"):
        ModelUsage.from_dict({"requests": 2, "seconds": [0.5, 0.5], "queued": [0.1]})
    merged = ModelUsage(requests=1, seconds=[1.0])  # counted without a queue time
    merged.add(ModelUsage.from_dict({"requests": 1, "seconds": [2.0], "queued": [1.5]}))
    assert merged.waits() == [0.0, 1.5] and merged.latency()["queue_mean_s"] == 0.75


def test_a_trace_node_keeps_its_queue_time():
    node = TraceNode("call", handler="nap", seconds=1.25, queued=1.0)
    assert node.service == pytest.approx(0.25)
    back = TraceNode.from_dict(json.loads(node.to_json()))
    assert (back.seconds, back.queued) == (1.25, 1.0)
    assert TraceNode.from_dict({"kind": "call"}).queued is None  # a trace written before: no figure
    with pytest.raises(ValueError, match="'queued' is a string"):
        TraceNode.from_dict({"kind": "call", "queued": "1"})


def test_run_options_concurrency_bounds_what_waits(tmp_path):
    """Through `RunOptions` as the command line gives it: at --concurrency 2, requests of a
    napping model queue, and the service time of all of them fits in the run's time twice."""
    (tmp_path / "p.decomp").write_text(ASK)
    started = time.perf_counter()
    done = run_dataset(tmp_path / "p.decomp", rows(tmp_path, 8), model=Napping(default='"x"'),
                       options=RunOptions(concurrency=2, cache_mode="off"), run_dir=tmp_path / "run")
    wall = time.perf_counter() - started
    assert done.failed == 0
    model = RunDir.open(tmp_path / "run").summary()["models"]["fake"]
    assert model["queue_mean_s"] > NAP / 2
    assert model["service_mean_s"] * model["requests"] <= wall * 2
