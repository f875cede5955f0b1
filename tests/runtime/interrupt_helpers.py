"""A `decomp` command run as a real process and sent SIGINT (Ctrl-C) once it has kept some
rows, for the interrupt tests (test_cli_interrupt.py, optimize/test_optimize_interrupt.py).

The model is a fake responder of the test's folder that sleeps `$SLOW_REPLY_S` seconds before
each answer, so a run is slow while the test interrupts it and quick when it is resumed."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The `decomp` entry point of this venv (the command an interrupt's line names).
DECOMP = str(Path(sys.executable).parent / "decomp")

RESPONDER = '''"""Answers after $SLOW_REPLY_S seconds: `reply` " ok", `oracle` letter_cat_llm's right answer."""
import os
import time


def _wait():
    time.sleep(float(os.environ.get("SLOW_REPLY_S") or 0))


def reply(request):
    _wait()
    return " ok"


def oracle(request):
    from benchmarks.letter_cat_oracle import respond
    _wait()
    return respond(request.prompt)
'''


def environment(folder: Path, slow: float) -> dict[str, str]:
    """This process's environment with the step cache in `folder`, runs under the working folder,
    the repository importable (the oracle's `benchmarks`) and replies `slow` seconds apart."""
    env = {k: v for k, v in os.environ.items() if k not in ("DECOMP_RUNS_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT",
                                                            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")}
    return {**env, "DECOMP_CACHE_DIR": str(folder / "cache"), "PYTHONPATH": str(REPO), "SLOW_REPLY_S": str(slow)}


def lines(path: Path) -> int:
    try:
        return len(path.read_bytes().splitlines())
    except OSError:
        return 0


def interrupt(args: list[str], folder: Path, results, at_least: int = 2,
              timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run `decomp ARGS` in `folder`, slowly; once `results()` (a results.jsonl, found while it
    runs) holds `at_least` lines, send SIGINT; return what it did."""
    proc = subprocess.Popen([DECOMP, *args], cwd=folder, env=environment(folder, 0.4), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while (found := results()) is None or lines(found) < at_least:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the run ended or stalled before {at_least} rows: {proc.communicate()}")
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_printed(command: str, folder: Path) -> subprocess.CompletedProcess:
    """Run the command an interrupt's line printed (`decomp ...`), as a user pasting it would."""
    words = shlex.split(command)
    assert words[0] == "decomp", command
    return subprocess.run([DECOMP, *words[1:]], cwd=folder, env=environment(folder, 0), capture_output=True,
                          text=True, timeout=300)
