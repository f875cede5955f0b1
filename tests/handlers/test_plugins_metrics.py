"""A metric from an installed package's entry point (group `decomp`, hook `register_metrics`),
used by `decomp eval --metric NAME` and listed by `decomp plugins`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.handlers.plugin_helpers import DECOMP, plugin_package

METRIC_PLUGIN = textwrap.dedent('''
    from decomp import hookimpl

    def shorter(prediction, gold):
        """1.0 when the prediction is no longer than the gold."""
        return float(len(str(prediction)) <= len(" ".join(gold)))

    @hookimpl
    def register_metrics(register):
        register("shorter", shorter)
''')


@pytest.mark.slow
def test_an_installed_plugins_metric_is_used_by_decomp_eval(tmp_path):
    target = tmp_path / "site"
    package = plugin_package(tmp_path, "decomp-shorter", "decomp_shorter", METRIC_PLUGIN)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                           str(package)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "gold.jsonl").write_text('{"id": "1", "answer": "abc"}\n{"id": "2", "answer": "xy"}\n')
    (tmp_path / "pred.jsonl").write_text('{"id": "1", "answer": "ab"}\n{"id": "2", "answer": "xyz"}\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}

    def decomp(*args):
        return subprocess.run([str(DECOMP), *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)

    done = decomp("eval", "--gold", "gold.jsonl", "--pred", "pred.jsonl", "--metric", "shorter")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"metric": "shorter", "score": 0.5, "n": 2, "missing": 0}
    listed = decomp("plugins").stdout
    assert "decomp_shorter (entry point decomp_shorter): metrics: shorter" in listed
    assert "decomp.runtime.scoring.metrics (builtin): metrics: em, set_em, f1, exact" in listed
    unknown = decomp("eval", "--gold", "gold.jsonl", "--pred", "pred.jsonl", "--metric", "longer")
    assert unknown.returncode == 1 and "known metrics are: em, exact, f1, set_em, shorter" in unknown.stderr
