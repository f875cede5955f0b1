"""200 rows through the real openai client against a server that fails 20% of requests
(429 with Retry-After, 500, garbage bodies, timeouts): the answers equal a clean run's."""
import asyncio
import io
import json

import pytest

from decomp import Session
from decomp.runtime.models.base import ModelSettings
from decomp.runtime.testing.mock_server import MockOpenAIServer
from decomp.runtime.runs.batch import run_rows
from decomp.runtime.engine.scheduler import Scheduler

oracle = pytest.importorskip("benchmarks.letter_cat_oracle", reason="run from the repository root")

pytestmark = [pytest.mark.slow, pytest.mark.network]

FAULTS = {"429": 0.06, "500": 0.06, "garbage": 0.05, "timeout": 0.03}


def _run(server: MockOpenAIServer, rows) -> tuple[list[dict], object]:
    session = Session(model="openai:oracle", settings=ModelSettings(base_url=server.base_url, timeout=0.5),
                      scheduler=Scheduler(16, retries=10, backoff=0.02, max_backoff=0.5, seed=7))
    module = session.load(oracle.PROGRAM)
    out = io.StringIO()
    summary = asyncio.run(run_rows(session, module, oracle.dataset_rows(rows), out))
    return [json.loads(line) for line in out.getvalue().splitlines()], summary


def test_injected_faults_change_no_answer():
    rows = oracle.make_rows(200, words=5, seed=3)
    with MockOpenAIServer(responder=oracle.respond) as clean:
        clean_lines, _ = _run(clean, rows)
    with MockOpenAIServer(responder=oracle.respond, faults=FAULTS, seed=11, timeout_sleep=1.0) as faulty:
        faulty_lines, summary = _run(faulty, rows)
        stats = faulty.stats()
    injected = sum(stats["faults"].values())
    assert injected > 0.15 * stats["requests"], stats  # about a fifth of all requests failed
    assert [r["answer"] for r in faulty_lines] == [r["answer"] for r in clean_lines]
    assert not any("error" in r for r in faulty_lines)
    assert [r["answer"] for r in clean_lines] == [oracle.expected(r["question"]) for r in rows]
    assert max(summary.max_in_flight.values()) <= 16
