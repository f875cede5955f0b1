"""`decomp run --input DATA --ray ADDRESS`: rows on the actors of a real local Ray cluster (a
head and two more nodes, each a process tree of its own, on 127.0.0.1), the run directory
kept by the driver. The results, traces and summary equal a single-process run's; the
concurrency limit holds for the whole run; a worker killed mid-run loses and duplicates no row.

Skipped, with the reason, only when Ray is not installed (the README's test command installs it).
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from benchmarks.letter_cat_oracle import respond
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.runtime.cluster.ray_helpers import ROWS, cluster, dataset, needs_ray, ray_processes, whole  # noqa: F401
from tests.runtime.runs.run_helpers import HOOKED, MODEL_ENV, TIMEOUT, assert_same_as, complete_records, invoke, model_args


@needs_ray
def test_a_run_on_ray_equals_a_single_process_run(cluster, dataset, whole, tmp_path):
    run_dir = tmp_path / "run"
    with MockOpenAIServer(responder=respond, latency=0.05) as server:
        result = invoke(model_args(dataset, run_dir, server, "--concurrency", "4", "--ray", cluster.address,
                                 "--ray-workers", "3"))
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed["rows"] == ROWS and printed["failed"] == 0 and printed["score"] == 1.0
    assert_same_as(run_dir, whole, ROWS, n_sessions=1)


@needs_ray
def test_the_concurrency_limit_holds_for_the_whole_run(cluster, dataset, tmp_path):
    with MockOpenAIServer(responder=respond, latency=0.1) as server:
        result = invoke(model_args(dataset, tmp_path / "run", server, "--concurrency", "3", "--ray", cluster.address,
                                 "--ray-workers", "3"))
        stats = server.stats()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["rows"] == ROWS
    # three workers, each holding two rows at once: six calls could be in flight without the limiter
    assert stats["max_in_flight"] == 3


def row_workers(since: float) -> list:
    """The processes of the run's workers (Ray names them by their actor class) started at
    `since` or later (not a worker of an earlier run that is still going away)."""
    return ray_processes("RowWorker", since)


@needs_ray
@pytest.mark.parametrize("workers, concurrency, when", [
    (2, 6, lambda stats: stats["requests"] >= 40),  # well under way, mid-row
    (1, 2, lambda stats: stats["requests"] >= 10 and stats["in_flight"] == 2),  # holding every slot of the run
], ids=["mid-run", "holding-every-slot"])
def test_a_killed_worker_loses_and_duplicates_no_row(cluster, dataset, whole, tmp_path, workers, concurrency, when):
    run_dir = tmp_path / "run"
    killed: list[int] = []
    since = time.time()

    with MockOpenAIServer(responder=respond, latency=0.1) as server:
        def kill_one() -> None:  # a worker dies (SIGKILL) once `when` holds
            deadline = time.monotonic() + 120
            while not when(server.stats()) and time.monotonic() < deadline:
                time.sleep(0.005)
            found = row_workers(since)
            if found:
                killed.append(found[0].pid)
                os.kill(found[0].pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_one)
        killer.start()
        result = invoke(model_args(dataset, run_dir, server, "--concurrency", str(concurrency), "--ray",
                                 cluster.address, "--ray-workers", str(workers)))
        killer.join()
    assert killed, "no worker process was found to kill"
    assert result.exit_code == 0, result.output
    assert_same_as(run_dir, whole, ROWS, n_sessions=1)


@needs_ray
def test_ray_options_are_for_ray_dataset_runs(dataset, tmp_path):
    result = invoke(["run", "decomp/letter_cat_llm", "--input", str(dataset), "--ray-workers", "2"])
    assert result.exit_code == 2 and "--ray-workers is for --ray runs" in result.output
    result = invoke(["run", "decomp/letter_cat_llm", "-q", "x", "--ray"])
    assert result.exit_code == 2 and "--ray" in result.output and "for --input runs only" in result.output


@needs_ray
@pytest.mark.slow
def test_the_budgets_of_a_whole_run_hold_across_the_workers(cluster, dataset, tmp_path):
    """--max-calls 50 over three workers: 50 calls are admitted, no more requests reach the
    server (a call admitted may yet be cancelled, as in one process), and the rows refused say
    which budget; --max-handler-calls likewise. Rows that end in an error make the status 3."""
    ray_args = ["--concurrency", "6", "--ray", cluster.address, "--ray-workers", "3"]
    with MockOpenAIServer(responder=respond, latency=0.02) as server:
        calls = invoke([*model_args(dataset, tmp_path / "calls", server), *ray_args, "--max-calls", "50"])
        sent = server.stats()["requests"]
        handlers = invoke([*model_args(dataset, tmp_path / "handlers", server), *ray_args, "--max-handler-calls", "60"])
    assert calls.exit_code == 3 and handlers.exit_code == 3, calls.output + handlers.output
    assert json.loads(calls.stdout.strip().splitlines()[-1])["calls"] == 50 >= sent > 40
    assert 50 < json.loads(handlers.stdout.strip().splitlines()[-1])["handler_calls"] <= 60
    for run_dir, refusal in [(tmp_path / "calls", "budget exhausted: model calls for the run reached 50"),
                             (tmp_path / "handlers", "budget exhausted: handler calls for the run reached 60")]:
        errors = [r["error"] for r in complete_records(run_dir).values() if r.get("error")]
        assert errors and all(refusal in error for error in errors), errors
        assert len(complete_records(run_dir)) == ROWS  # every row has its line, refused ones too


@needs_ray
@pytest.mark.slow
def test_a_driver_killed_mid_run_is_resumed_sending_only_the_missing_rows(cluster, dataset, whole, tmp_path):
    run_dir = tmp_path / "run"
    since = time.time()
    with MockOpenAIServer(responder=respond, latency=0.02) as server:
        killed = subprocess.run([sys.executable, str(HOOKED), "trace-only", "8", *model_args(dataset, run_dir, server),
                                 "--concurrency", "4", "--ray", cluster.address, "--ray-workers", "2"],
                                capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **MODEL_ENV})
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        kept = complete_records(run_dir)
        assert len(kept) == 7
        deadline = time.monotonic() + 60  # Ray ends the dead driver's workers soon, not at once
        while (row_workers(since) or server.stats()["in_flight"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not row_workers(since), "the killed driver's workers still run"
        server.reset_stats()
        result = invoke([*model_args(dataset, run_dir, server), "--concurrency", "4", "--resume", "--ray",
                         cluster.address])
        sent = server.stats()["requests"]
    assert result.exit_code == 0, result.output
    assert_same_as(run_dir, whole, ROWS, n_sessions=2)
    missing = [r for i, r in complete_records(whole).items() if i not in kept]
    assert sent == sum(r["usage"]["calls"] for r in missing)  # the rows written were not run again


@needs_ray
@pytest.mark.slow
def test_a_rerun_on_the_same_node_is_served_from_the_step_cache(cluster, dataset, whole, tmp_path):
    cache = ["--cache", "read-write", "--cache-dir", str(tmp_path / "cache")]
    with MockOpenAIServer(responder=respond) as server:
        first = invoke([*model_args(dataset, tmp_path / "first", server), *cache, "--ray", cluster.address])
        calls = server.stats()["requests"]
        server.reset_stats()
        again = invoke([*model_args(dataset, tmp_path / "again", server), *cache, "--ray", cluster.address])
        assert server.stats()["requests"] == 0
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert calls > 0 and summary["calls"] == 0 and summary["cache_hits"] == calls
    assert {i: r["answer"] for i, r in complete_records(tmp_path / "again").items()} == \
           {i: r["answer"] for i, r in complete_records(whole).items()}


@needs_ray
def test_workers_that_cannot_load_the_program_stop_the_run_with_the_reason(cluster, tmp_path):
    """Every node must see the program at the driver's path: where one does not, its workers
    die in their constructor, and the run stops saying why rather than replacing them for ever."""
    import ray

    from decomp.runtime.runs.api import RunOptions
    from decomp.runtime.storage.datasets import Row
    from decomp.runtime.cluster.rows import Cluster, RayError, run_rows_on_ray
    from decomp.runtime.runs.remote import WorkerSpec

    if not ray.is_initialized():
        ray.init(address=cluster.address, log_to_driver=False)
    spec = WorkerSpec(str(tmp_path / "gone.decomp"), None, RunOptions(cache_mode="off"))
    rows = [Row(i, f"r{i}", {"question": "q"}, None) for i in range(4)]
    got: list = []
    with pytest.raises(RayError, match="a Ray worker could not load the program: .*gone.decomp"):
        asyncio.run(run_rows_on_ray(spec, rows, lambda record, trace: got.append(record),
                                    cluster=Cluster(cluster.address, workers=2)))
    assert got == []


@needs_ray
@pytest.mark.slow
def test_ray_without_an_address_starts_a_local_instance_for_the_run(tmp_path):
    """`--ray` alone: a Ray instance of this machine, started by the run and gone with it (a
    command of its own, so that no Ray is joined already; every node on 127.0.0.1)."""
    from decomp.runtime.cluster.limits import LOOPBACK_ONLY

    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f'Take the letters at position 1 of the words in '
                                        f'"Alan Mathison Turing{" Jr" * i}" and concatenate them using a comma.',
                                        "answer": "A,M,T" + ",J" * i}) + "\n" for i in range(4)))
    done = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", "decomp/letter_cat_symbolic", "--input",
                           str(data), "--run-dir", str(tmp_path / "run"), "--cache", "off", "--ray", "--ray-workers",
                           "2"], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                          env={**os.environ, **LOOPBACK_ONLY})
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["rows"] == 4 and summary["failed"] == 0 and summary["score"] == 1.0
    assert sorted(complete_records(tmp_path / "run")) == [0, 1, 2, 3]


@needs_ray
@pytest.mark.parametrize("address, said", [("127.0.0.1:1", "cannot reach the Ray cluster at 127.0.0.1:1"),
                                           ("not-an-address", "not auto, HOST:PORT or ray://HOST:PORT")])
def test_a_cluster_nobody_answers_at_is_said_at_once_and_no_run_directory_is_made(dataset, tmp_path, address, said):
    """(A command of its own: a process joins one Ray cluster, and this one must not have.)"""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "decomp.runtime.cli", "run", "decomp/letter_cat_symbolic", "--input",
                           str(dataset), "--run-dir", str(tmp_path / "r"), "--ray", address], capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert time.monotonic() - started < 60 and not (tmp_path / "r").exists()
