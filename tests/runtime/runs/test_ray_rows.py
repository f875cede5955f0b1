"""`decomp run --input DATA --ray ADDRESS`: rows on the actors of a real local Ray cluster (a
head and two more nodes, each a process tree of its own, on 127.0.0.1), the run directory
kept by the driver. The results, traces and summary equal a single-process run's; the
concurrency limit holds for the whole run; a worker killed mid-run loses and duplicates no row.

Skipped, with the reason, only when Ray is not installed (the README's test command installs it).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from benchmarks.letter_cat_oracle import make_rows, respond
from decomp.runtime.cli import main
from decomp.runtime.testing.mock_server import MockOpenAIServer
from test_resume import MODEL_ENV, assert_same_as

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="Ray is not installed: pip install -e '.[ray]'")

ROWS = 24


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes, one CPU each; stopped at the end."""
    import ray
    from ray.cluster_utils import Cluster

    saved = {name: os.environ.get(name) for name in MODEL_ENV}
    os.environ.update(MODEL_ENV)  # the nodes' processes inherit it: the workers' model clients read it
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes(timeout=120)
    yield nodes
    ray.shutdown()
    nodes.shutdown()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "letters.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in make_rows(ROWS, seed=5)))
    return path


def run_args(dataset: Path, run_dir: Path, server, *more: str) -> list[str]:
    return ["run", "decomp/letter_cat_llm", "--input", str(dataset), "--run-dir", str(run_dir),
            "--model", "openai:mock", "--base-url", server.base_url, "--cache", "off", *more]


def invoke(args: list[str]):
    return CliRunner().invoke(main, args, env=MODEL_ENV)


@pytest.fixture(scope="module")
def whole(dataset, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    with MockOpenAIServer(responder=respond) as server:
        result = invoke(run_args(dataset, run_dir, server, "--concurrency", "4"))
    assert result.exit_code == 0, result.output
    return run_dir


def test_a_run_on_ray_equals_a_single_process_run(cluster, dataset, whole, tmp_path):
    run_dir = tmp_path / "run"
    with MockOpenAIServer(responder=respond, latency=0.05) as server:
        result = invoke(run_args(dataset, run_dir, server, "--concurrency", "4", "--ray", cluster.address,
                                 "--ray-workers", "3"))
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout.strip().splitlines()[-1])
    assert printed["rows"] == ROWS and printed["failed"] == 0 and printed["score"] == 1.0
    assert_same_as(run_dir, whole, ROWS, n_sessions=1)


def test_the_concurrency_limit_holds_for_the_whole_run(cluster, dataset, tmp_path):
    with MockOpenAIServer(responder=respond, latency=0.1) as server:
        result = invoke(run_args(dataset, tmp_path / "run", server, "--concurrency", "3", "--ray", cluster.address,
                                 "--ray-workers", "3"))
        stats = server.stats()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["rows"] == ROWS
    # three workers, each holding two rows at once: six calls could be in flight without the limiter
    assert stats["max_in_flight"] == 3


def row_workers() -> list:
    """The processes of the run's workers (Ray names them by their actor class)."""
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        with __import__("contextlib").suppress(psutil.Error):
            if any("RowWorker" in part for part in process.info["cmdline"] or ()):
                found.append(process)
    return found


def test_a_killed_worker_loses_and_duplicates_no_row(cluster, dataset, whole, tmp_path):
    run_dir = tmp_path / "run"
    killed: list[int] = []

    with MockOpenAIServer(responder=respond, latency=0.1) as server:
        def kill_one() -> None:  # once the run is well under way, a worker dies (SIGKILL, mid-row)
            deadline = time.monotonic() + 120
            while server.stats()["requests"] < 40 and time.monotonic() < deadline:
                time.sleep(0.02)
            workers = row_workers()
            if workers:
                killed.append(workers[0].pid)
                os.kill(workers[0].pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_one)
        killer.start()
        result = invoke(run_args(dataset, run_dir, server, "--concurrency", "6", "--ray", cluster.address,
                                 "--ray-workers", "2"))
        killer.join()
    assert killed, "no worker process was found to kill"
    assert result.exit_code == 0, result.output
    assert_same_as(run_dir, whole, ROWS, n_sessions=1)


def test_ray_options_are_for_ray_dataset_runs(dataset, tmp_path):
    result = invoke(["run", "decomp/letter_cat_llm", "--input", str(dataset), "--ray-workers", "2"])
    assert result.exit_code == 2 and "--ray-workers is for --ray runs" in result.output
    result = invoke(["run", "decomp/letter_cat_llm", "-q", "x", "--ray"])
    assert result.exit_code == 2 and "--ray" in result.output and "for --input runs only" in result.output


def test_a_budget_of_the_whole_run_is_refused_on_ray_not_split(dataset, tmp_path):
    result = invoke(["run", "decomp/letter_cat_llm", "--input", str(dataset), "--run-dir", str(tmp_path / "r"),
                     "--ray", "--max-calls", "10"])
    assert result.exit_code == 1 and "--max-calls: a budget of the whole run cannot be held across Ray " \
        "workers yet" in result.output
    assert not (tmp_path / "r").exists()
