"""`decomp run --input DATA --ray ADDRESS` when the cluster fails under it (a real local cluster:
a head and two more nodes, each a process tree of its own, on 127.0.0.1): a node that dies (its
RuntimeEnvAgent killed, which its raylet does not outlive; or the node removed), the run's
limiter or ledger actor killed, or one of them or a worker stopped (SIGSTOP: alive, silent).
Each ends the run with an error that names what failed, within the stated time (twice
`Cluster.check_seconds`), exit status 1 and no traceback, the rows that ended kept and none
recorded wrongly; `--resume` then sends only the missing rows and equals a run never
interrupted. (A worker process that dies is replaced: test_ray_rows.py.)

Skipped, with the reason, only when Ray is not installed (the README's test command installs it).
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from benchmarks.letter_cat_oracle import respond
from decomp.runtime.runs.api import RunOptions, run_dataset
from decomp.runtime.cluster.rows import CHECK_SECONDS, Cluster, RayError
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.runtime.cluster.ray_helpers import ROWS, cluster, dataset, lines_in, needs_ray, ray_processes, whole  # noqa: F401
from tests.runtime.runs.run_helpers import assert_same_as, complete_records, invoke, model_args

pytestmark = [needs_ray, pytest.mark.slow]

KILL_AT = 8      # results lines when the fault is made
SLACK = 15.0     # seconds a loaded machine may add to the stated bound


def worker_node(cluster):
    """A node of the cluster other than the head (the driver's own node): it holds a worker."""
    return sorted(cluster.worker_nodes, key=lambda node: node.unique_id)[-1]


def kill_runtime_env_agent(cluster) -> None:
    import psutil

    raylet = psutil.Process(worker_node(cluster).all_processes["raylet"][0].process.pid)
    agents = ray_processes("RuntimeEnvAgent", among=raylet.children(recursive=True))
    assert agents, "the node has no RuntimeEnvAgent process"
    agents[0].kill()


def kill_actor(title: str):
    def kill(cluster, since: float) -> None:
        found = ray_processes(title, since)
        assert len(found) == 1, f"{len(found)} {title} processes"
        found[0].kill()
    return kill


FAULTS = {  # fault, what it is given (the cluster; and the run's start), the error's words
    "runtime-env-agent": (lambda cluster, since: kill_runtime_env_agent(cluster),
                          "of the Ray cluster died (runtime_env_agent failed"),
    "node-removed": (lambda cluster, since: cluster.remove_node(worker_node(cluster)), "of the Ray cluster died"),
    "limiter": (kill_actor("Limiter"), "the run's limiter actor died"),
    "ledger": (kill_actor("RunLedger"), "the run's ledger actor died"),
}


def restore(cluster) -> None:
    """Three live nodes again (a node whose raylet died is removed first)."""
    import ray

    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]} if ray.is_initialized() else None
    for node in list(cluster.worker_nodes):
        if alive is not None and node.node_id not in alive:
            cluster.remove_node(node, allow_graceful=False)
    while len(cluster.worker_nodes) < 2:
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes(timeout=120)


def ours(stderr: str) -> str:
    """`stderr` without what the mock server's threads print there (in this process) when a
    client it answers is killed."""
    return re.sub(r"-{40}\nException occurred during processing of request .*?\n-{40}\n", "", stderr, flags=re.S)


def at_line(run_dir: Path, n: int, then) -> tuple[threading.Thread, list[float]]:
    """A thread that calls `then()` once results.jsonl has `n` lines, and the time it began to."""
    when: list[float] = []

    def wait() -> None:
        deadline = time.monotonic() + 120
        while lines_in(run_dir) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        when.append(time.monotonic())
        then()

    thread = threading.Thread(target=wait)
    thread.start()
    return thread, when


def resume_sends_only_the_missing_rows(cluster, dataset, whole, run_dir: Path, server, since: float) -> None:
    """The rows kept are right and fewer than all; `--resume` sends only the missing rows' requests
    and finishes the run as one never interrupted."""
    kept = complete_records(run_dir)
    assert KILL_AT <= len(kept) < ROWS
    assert not [r for r in kept.values() if r.get("error")], "a row recorded with the failure's error"
    deadline = time.monotonic() + 60  # the failed run's workers are being ended
    while (ray_processes("RowWorker", since) or server.stats()["in_flight"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    server.reset_stats()
    result = invoke([*model_args(dataset, run_dir, server), "--concurrency", "4", "--resume", "--ray",
                     cluster.address])
    sent = server.stats()["requests"]
    assert result.exit_code == 0, result.output
    assert_same_as(run_dir, whole, ROWS, n_sessions=2)
    missing = [r for i, r in complete_records(whole).items() if i not in kept]
    assert sent == sum(r["usage"]["calls"] for r in missing)  # the rows written were not run again


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_lost_node_limiter_or_ledger_ends_the_run_saying_so_and_resume_finishes_it(cluster, dataset, whole,
                                                                                    tmp_path, fault):
    """Before: a RuntimeEnvAgent killed left the run at 8 of 24 rows for two minutes (the driver
    waited for a replacement worker that no node had room for); a dead limiter or ledger made
    every later row an error, recorded as if it had run."""
    make, said = FAULTS[fault]
    run_dir, since = tmp_path / "run", time.time()
    budget = ["--max-calls", "10000"] if fault == "ledger" else []  # a run with a budget has a ledger
    try:
        with MockOpenAIServer(responder=respond, latency=0.1) as server:
            killer, killed = at_line(run_dir, KILL_AT, lambda: make(cluster, since))
            result = invoke([*model_args(dataset, run_dir, server), "--concurrency", "4", "--ray", cluster.address,
                             "--ray-workers", "3", *budget])
            ended = time.monotonic()
            killer.join()
            assert killed, "the fault was never made"
            assert result.exit_code == 1, result.output
            said_here = ours(result.stderr)
            assert said in said_here and "--resume runs the rest" in said_here, said_here
            assert "Traceback" not in said_here and isinstance(result.exception, SystemExit)
            assert ended - killed[0] < 2 * CHECK_SECONDS + SLACK
            restore(cluster)
            resume_sends_only_the_missing_rows(cluster, dataset, whole, run_dir, server, since)
    finally:
        restore(cluster)


@pytest.mark.parametrize("title, said", [("Limiter", "the run's limiter actor did not answer within 4 s"),
                                         ("RowWorker", "did not answer within 4 s")], ids=["limiter", "worker"])
def test_a_silent_limiter_or_worker_ends_the_run_within_twice_the_check_time(cluster, dataset, whole, tmp_path,
                                                                             title, said):
    """SIGSTOP: the process lives and Ray sees nothing wrong, but nothing it holds comes back. The
    driver's check finds it (`Cluster(check_seconds=4)`, given to this run alone)."""
    run_dir, since = tmp_path / "run", time.time()
    stopped: list = []

    def stop() -> None:
        stopped.append(ray_processes(title, since)[0])
        stopped[0].send_signal(signal.SIGSTOP)

    try:
        with MockOpenAIServer(responder=respond, latency=0.1) as server:
            options = RunOptions(model="openai:mock", base_url=server.base_url, concurrency=4, cache_mode="off")
            stopper, when = at_line(run_dir, KILL_AT, stop)
            with pytest.raises(RayError, match="--resume runs the rest") as raised:
                run_dataset("decomp/letter_cat_llm", dataset, options=options, run_dir=run_dir,
                            cluster=Cluster(cluster.address, workers=3, check_seconds=4))
            ended = time.monotonic()
            stopper.join()
            assert said in str(raised.value), str(raised.value)
            if title == "RowWorker":
                said_all = str(raised.value)
                assert said_all.startswith("Ray worker worker-") and "(on node 127.0.0.1 (" in said_all, said_all
            assert ended - when[0] < 2 * 4 + SLACK
            for process in stopped:  # ended by the driver (Ray's kill is a SIGKILL), or here
                with contextlib.suppress(Exception):
                    process.wait(10)
                with contextlib.suppress(Exception):
                    os.kill(process.pid, signal.SIGKILL)
            resume_sends_only_the_missing_rows(cluster, dataset, whole, run_dir, server, since)
    finally:
        for process in stopped:
            with contextlib.suppress(Exception):
                os.kill(process.pid, signal.SIGKILL)
