"""What the Ray tests share: a real local cluster (a head and two more nodes, each a process
tree of its own, on 127.0.0.1), a letter_cat dataset, the same rows run in one process as the
baseline, the `decomp run` arguments against the mock server, and the processes of the
cluster found by their title."""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from benchmarks.letter_cat_oracle import make_rows, respond
from decomp.runtime.cluster.limits import LOOPBACK_ONLY
from decomp.runtime.testing.mock_server import MockOpenAIServer
from tests.runtime.runs.run_helpers import MODEL_ENV, invoke, model_args

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="Ray is not installed: pip install -e '.[ray]'")

ROWS = 24


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes, one CPU each; stopped at the end."""
    import ray
    from ray.cluster_utils import Cluster

    from ray._private import ray_constants

    saved = {name: os.environ.get(name) for name in {**MODEL_ENV, **LOOPBACK_ONLY}}
    os.environ.update({**MODEL_ENV, **LOOPBACK_ONLY})  # the nodes' processes inherit it (model clients read it)
    was = ray_constants.ENABLE_RAY_CLUSTER  # read when ray was imported: this process's own nodes' address
    ray_constants.ENABLE_RAY_CLUSTER = False
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        assert nodes.address.startswith("127.0.0.1:"), nodes.address
        for _ in range(2):
            nodes.add_node(num_cpus=1)
        nodes.wait_for_nodes(timeout=120)
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = was
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


@pytest.fixture(scope="module")
def whole(dataset, tmp_path_factory) -> Path:
    """The dataset run in one process, never interrupted: what every Ray run must equal."""
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    with MockOpenAIServer(responder=respond) as server:
        result = invoke(model_args(dataset, run_dir, server, "--concurrency", "4"))
    assert result.exit_code == 0, result.output
    return run_dir


def ray_processes(title: str, since: float = 0.0, among: list | None = None) -> list:
    """The live processes (of `among`, else of the machine) that Ray titled `ray::TITLE...` (an
    actor's class, with the method it runs; an agent of a node), started at `since` or later
    (not one of an earlier run that is still going away)."""
    import psutil

    found = []
    for process in psutil.process_iter() if among is None else among:
        with contextlib.suppress(psutil.Error):
            cmdline = process.cmdline()
            if any(part.startswith(f"ray::{title}") for part in cmdline) and process.create_time() >= since - 1 \
                    and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
    return found


def lines_in(run_dir: Path) -> int:
    """The complete lines results.jsonl has now."""
    with contextlib.suppress(OSError):
        return (run_dir / "results.jsonl").read_bytes().count(b"\n")
    return 0
