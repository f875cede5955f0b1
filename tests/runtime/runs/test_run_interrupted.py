"""An interrupt of `run_dataset` from Python (a real process sent SIGINT midway) raises
`RunInterrupted`, a `KeyboardInterrupt` that says the rows kept and left and the run directory;
`run_dataset(..., resume=True)` on it finishes the rows."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from decomp.runtime.runs.api import RunInterrupted, run_dataset
from tests.runtime.interrupt_helpers import RESPONDER, environment, lines

pytestmark = pytest.mark.slow

ROWS = 10
SCRIPT = '''
import json
import decomp
from decomp.runtime.runs.api import RunInterrupted, RunOptions, run_dataset

try:
    CALL
except RunInterrupted as stop:
    print(json.dumps({"run_dir": str(stop.run_dir), "kept": stop.kept, "rows": stop.rows, "left": stop.left,
                      "said": str(stop), "keyboard": isinstance(stop, KeyboardInterrupt)}))
'''


CALLS = {"run_dataset": 'run_dataset("prog.decomp", "rows.jsonl", model="fake:slow_replies:reply", run_dir="runs/py", '
                         'options=RunOptions(concurrency=1, cache_mode="off"))',
         "Program.run_dataset": 'decomp.load("prog.decomp", model="fake:slow_replies:reply", concurrency=1, '
                                'cache_mode="off").run_dataset("rows.jsonl", run_dir="runs/py", progress=False)'}


@pytest.mark.parametrize("call", CALLS)
def test_an_interrupted_run_raises_run_interrupted_and_resumes(tmp_path, monkeypatch, call):
    (tmp_path / "prog.decomp").write_text('handler ask = prompt(text="Q: {{ query }}\\nA:", max_tokens=8)\n'
                                          "main ask\n", encoding="utf-8")
    (tmp_path / "slow_replies.py").write_text(RESPONDER, encoding="utf-8")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"id": f"r{i}", "question": f"q {i}"}) + "\n"
                                                 for i in range(ROWS)), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.replace("CALL", CALLS[call])], cwd=tmp_path, env=environment(tmp_path, 0.4),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = tmp_path / "runs" / "py" / "results.jsonl"
    deadline = time.monotonic() + 120
    while lines(results) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    stop = json.loads(out)
    assert stop["keyboard"] and stop["run_dir"] == "runs/py" and stop["rows"] == ROWS
    assert 0 < stop["kept"] == lines(results) < ROWS and stop["kept"] + stop["left"] == ROWS
    assert stop["said"] == (f"{stop['kept']} of {ROWS} rows kept in runs/py, {stop['left']} left; "
                            "run_dataset(..., run_dir='runs/py', resume=True) finishes them")
    monkeypatch.chdir(tmp_path)  # the responder is a module of the working folder
    monkeypatch.setenv("DECOMP_CACHE_DIR", str(tmp_path / "cache"))
    done = run_dataset("prog.decomp", "rows.jsonl", run_dir="runs/py", resume=True)
    assert done.rows == ROWS and lines(results) == ROWS


def test_run_interrupted_is_a_keyboard_interrupt_with_its_counts(tmp_path):
    stop = RunInterrupted(tmp_path / "r", 3, 20)
    assert isinstance(stop, KeyboardInterrupt) and (stop.kept, stop.rows, stop.left) == (3, 20, 17)
    assert str(stop).startswith(f"3 of 20 rows kept in {tmp_path / 'r'}, 17 left; ")
