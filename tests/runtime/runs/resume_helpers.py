"""The `decomp` command line, killed with SIGKILL at one exact point (for test_resume.py).

    python resume_helpers.py POINT N decomp-arguments...

POINT is where the process kills itself (a real SIGKILL, no cleanup of any kind runs):

    create      while run.json is first written: the program copied, run.json not yet in place
    trace-only  when the Nth row has ended: its trace committed, its results line not written
    half-line   when the Nth row has ended: its trace committed, half its results line written
    summary     once every row is written, before the session ends and summary.json is written

The row points let the row be written whole, then cut the file back to where a kill in the
middle of the write would have left it, so they depend only on `RunDir.add`'s contract (trace
first, then the line, flushed) and not on how it writes. A hook that never fires lets the
command finish normally; the tests check for the SIGKILL exit status.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(point: str, n: int) -> None:
    from decomp.runtime.storage import rundir
    from decomp.runtime.storage.layout import MANIFEST, RESULTS
    from decomp.runtime.storage.rundir import RunDir
    if point == "create":
        write_json = rundir.write_json

        def dying_write_json(path, value):
            if Path(path).name == MANIFEST and not Path(path).exists():
                tmp = Path(path).with_name(Path(path).name + ".tmp")
                tmp.write_text('{"format": 1, "decomp_ver', encoding="utf-8")  # cut mid-write
                _die()
            write_json(path, value)

        rundir.write_json = dying_write_json
    elif point in ("trace-only", "half-line"):
        add = RunDir.add
        seen = [0]

        def dying_add(self, record, trace):
            add(self, record, trace)
            seen[0] += 1
            if seen[0] == n:
                file = Path(self.path) / RESULTS
                data = file.read_bytes()
                start = data.rstrip(b"\n").rfind(b"\n") + 1  # where the last line begins
                keep = start if point == "trace-only" else start + (len(data) - start) // 2
                with file.open("r+b") as f:
                    f.truncate(keep)
                _die()

        RunDir.add = dying_add
    elif point == "summary":
        RunDir.finish = lambda self, rows, seconds: _die()
    else:
        raise SystemExit(f"unknown kill point {point!r}")


if __name__ == "__main__":
    install(sys.argv[1], int(sys.argv[2]))
    from decomp.runtime.cli import main

    main(args=sys.argv[3:], prog_name="decomp")
