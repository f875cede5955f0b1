"""What every benchmark script starts with: the path set up so that it runs from any directory, the
options most of them take, and the one JSON line each prints. Standard library only.

A script begins

    if __package__ in (None, ""):  # `python benchmarks/NAME.py`: see harness.bootstrap
        import harness
        harness.bootstrap()

    from benchmarks.harness import arguments, emit  # noqa: E402

(run as `python -m benchmarks.NAME`, or imported by the tests, it is already a module of the
package and `bootstrap` is not needed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def bootstrap() -> None:
    """For a benchmark run as a script (`python benchmarks/NAME.py`, from any directory): the
    repository root on sys.path in place of benchmarks/ (Python's sys.path[0] for a script), so
    that `benchmarks.*` imports from this checkout and the scripts' own names (cache.py,
    memory.py, ...) do not shadow top-level modules of the same names for the dependencies; and,
    where the checkout's folder is named `decomp`, its parent too, so that `import decomp` is
    this checkout rather than another install."""
    here = REPO / "benchmarks"
    if sys.path and Path(sys.path[0] or ".").resolve() == here:
        sys.path[0] = str(REPO)
    elif str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if REPO.name == "decomp" and str(REPO.parent) not in sys.path:
        sys.path.insert(1, str(REPO.parent))


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser described by the first paragraph of `doc` (a script's docstring)."""
    return argparse.ArgumentParser(description=doc.split("\n\n")[0])


def arguments(doc: str, argv: list[str] | None, rows: int, server: bool = True) -> argparse.ArgumentParser:
    """`parser(doc)` with the options every letter_cat benchmark takes: --rows (default `rows`),
    --words, --seed, and where a server runs --latency and --concurrency."""
    p = parser(doc)
    p.add_argument("--rows", type=int, default=rows)
    p.add_argument("--words", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    if server:
        p.add_argument("--latency", type=float, default=0.1, help="seconds the server takes per request")
        p.add_argument("--concurrency", type=int, default=16)
    return p


def emit(record: dict, plain: bool = False) -> dict:
    """Print the benchmark's one JSON line, flushed, and give `record` back. The line is decomp's
    `json_line` (non-ASCII as it is, NaN as a string); with `plain`, `json.dumps` (for
    dspy_critical_path.py, which runs without decomp)."""
    if plain:
        line = json.dumps(record) + "\n"
    else:
        from decomp.runtime.storage.jsonl import json_line

        line = json_line(record)
    sys.stdout.write(line)
    sys.stdout.flush()
    return record
