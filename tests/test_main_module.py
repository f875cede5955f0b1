"""`python -m decomp` is the `decomp` command."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_python_m_decomp_runs_the_cli(tmp_path):
    import decomp

    env = {**os.environ, "PYTHONPATH": str(Path(decomp.__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-m", "decomp", "run", "decomp/letter_cat_symbolic", "-q",
                           'Take the letters at position 1 of the words in "Ada Lovelace" and concatenate them.'],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "AL"
    usage = subprocess.run([sys.executable, "-m", "decomp", "--help"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=60)
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: decomp ")
