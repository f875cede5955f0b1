"""`--max-memory` holds on the probe's foreach (issue 29 B3): items answering megabytes each end
their row near the limit (within 20 %, measured as the command's peak resident memory), and an
answer over `--max-answer-size` is a row error before it is kept, cached or traced."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

HELPERS = '''
def make(query):
    return [str(i) for i in range(int(query))]

def big(query):
    return "x" * ({mib} * 2**20) + query
'''

PROGRAM = '''
handler make = python(function="helpers:make")
handler big = python(function="helpers:big")

program p(question) {
    QS: [make] #question
    QS: (foreach) [big] #1
}
main p
'''


def _peak_run(folder: Path, *options: str) -> tuple[int, int]:
    """(exit status, peak resident MiB) of `decomp run` over rows.jsonl, watched from outside."""
    proc = subprocess.Popen([sys.executable, "-m", "decomp.runtime.cli", "run", "p.decomp", "--input", "rows.jsonl",
                             "--run-dir", "out", *options], cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    peak = 0
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) // 1024)
        except OSError:
            pass
        time.sleep(0.02)
    proc.wait(timeout=10)
    return proc.returncode, peak


def _project(tmp_path: Path, mib: int, items: int) -> Path:
    (tmp_path / "helpers.py").write_text(HELPERS.format(mib=mib))
    (tmp_path / "p.decomp").write_text(PROGRAM)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": str(i), "question": str(items)}) + "\n"
                                                 for i in range(3)))
    return tmp_path


def _errors(folder: Path) -> list[str]:
    return [json.loads(line)["error"] for line in (folder / "out" / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak from /proc (Linux)")
def test_max_memory_holds_within_20_percent_on_a_foreach_of_large_answers(tmp_path):
    folder = _project(tmp_path, mib=8, items=200)  # 3 rows x 200 items x 8 MiB: 4.7 GiB if kept
    code, peak = _peak_run(folder, "--max-memory", "400", "--cache", "off")
    assert code == 3
    errors = _errors(folder)
    assert len(errors) == 3 and all("budget exhausted: memory" in e and "over the limit of 400 MiB" in e
                                    for e in errors), errors
    assert peak <= 400 * 1.2, peak


@pytest.mark.slow
def test_answers_over_the_size_limit_are_refused_before_the_cache_keeps_them(tmp_path):
    folder = _project(tmp_path, mib=50, items=20)  # the probe's 50 MB items
    code, peak = _peak_run(folder, "--max-memory", "500", "--cache-dir", str(tmp_path / "cache"))
    assert code == 3
    errors = _errors(folder)
    assert all("the answer of [big] holds 50.0 MiB of text, over the limit of 16 MiB (raise it with "
               "--max-answer-size MB)" in e for e in errors), errors
    cached = sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert cached < 2**20, cached  # was 1.1 GB: no refused answer reaches the step cache
    assert peak < 250, peak  # sized in the worker: no 50 MiB answer enters the run's process (was 385-605)
