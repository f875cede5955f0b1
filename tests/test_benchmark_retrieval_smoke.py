"""benchmarks/retrieval.py runs (a tiny index, in a subprocess, from outside the checkout) and
prints one sane JSON line; like tests/test_benchmarks_smoke.py, nothing about speed is asserted."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_retrieval_benchmark(tmp_path):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the script must find `benchmarks` by itself
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "retrieval.py"), "--paragraphs", "2000",
                           "--queries", "20", "--warmup", "2", "--repeat", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    r = json.loads(lines[0])
    assert r["benchmark"] == "retrieval" and r["paragraphs"] == r["documents"] == 2000 and r["queries"] == 20
    assert r["build_s"] > 0 and r["index_mb"] > 0
    for key in ("raw_search_median_ms", "raw_median_ms", "raw_p95_ms", "raw_in_thread_median_ms",
                "handler_median_ms", "handler_p95_ms"):
        assert r[key] > 0, key
    assert r["raw_p95_ms"] >= r["raw_median_ms"] and r["handler_p95_ms"] >= r["handler_median_ms"]
    # The medians are printed to 0.001 ms, so the overhead computed back from them is only known to a range.
    h, raw, half = r["handler_median_ms"], r["raw_median_ms"], 0.0005
    low, high = (h - half) / (raw + half) - 1, (h + half) / (raw - half) - 1
    assert low - half <= r["handler_overhead"] <= high + half, (r["handler_overhead"], low, high)


def test_generated_text_is_deterministic():
    sys.path.insert(0, str(REPO))
    try:
        from benchmarks.retrieval import paragraphs, queries, vocabulary
    finally:
        sys.path.remove(str(REPO))
    words = vocabulary()
    assert len(words) == len(set(words)) == 30_000
    first = list(paragraphs(50, seed=3))
    assert first == list(paragraphs(50, seed=3)) and first != list(paragraphs(50, seed=4))
    assert all(30 <= len(r.text.split()) <= 70 and r.title and r.id == f"p{i}" for i, r in enumerate(first))
    assert queries(5, seed=1) == queries(5, seed=1) and all(q.endswith("?") for q in queries(5, seed=1))
