"""Benchmark: `decomp optimize` (bootstrapped few-shot demonstrations) against DSPy's
BootstrapFewShotWithRandomSearch, on the same task, test model, mock server, rows and settings.

The task and the test model are benchmarks/optimize_task.py's: a row asks for one of eight word
operations on three words; the program (benchmarks/optimize/wordops.decomp) splits it into
three sub-questions in Python, a few-shot prompt showing two of the eight operations answers
each, Python joins the answers. The model "student" answers a sub-question right only when its
prompt holds a demonstration of the same operation; "teacher" always answers right. So the
student scores 0.25 on a balanced split with the prompt as written, and what an optimiser can
add is demonstrations of the other operations.

One mock server in a child process (latency --latency, 0.05 s) answers both sides; the train,
dev and test splits (--train/--dev/--test rows, balanced over the kinds, --seed) are written to
a temporary folder. Then:

(a) decomp: `decomp.learning.optimize.optimize` on wordops.decomp (student "openai:student",
    teacher "openai:teacher", --candidates, --max-demos, --seed, concurrency --concurrency, a
    fresh step cache): `calls` = the server's requests during it, `wall_s` its wall time,
    `dev_score` the chosen candidate's; then `run_dataset` of the optimised program
    (`test_score`) and of the original one (`zero_shot_test_score`) on the test rows with the
    student, each with a fresh cache;
(b) DSPy: benchmarks/dspy_optimize.py run by --dspy-python (default /tmp/dspyvenv/bin/python
    when it exists) against the same server and rows, with threads = --concurrency; its
    `dspy_*` figures are merged in. Without DSPy they are null and `dspy_skipped` says why.

    python benchmarks/optimize.py [--latency 0.05] [--candidates 8] [--max-demos 4] [--seed 0]
                                  [--concurrency 8] [--train 32 --dev 16 --test 32]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/optimize.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import REPO, emit, parser  # noqa: E402
from benchmarks.letter_cat_oracle import Server, mock_server  # noqa: E402
from benchmarks.optimize_task import RESPONDER, write_splits  # noqa: E402

PROGRAM = REPO / "benchmarks" / "optimize" / "wordops.decomp"
DSPY_SCRIPT = REPO / "benchmarks" / "dspy_optimize.py"
DSPY_PYTHON = Path("/tmp/dspyvenv/bin/python")
DSPY_FIELDS = ("dspy_test_score", "dspy_dev_score", "dspy_zero_shot_test_score", "dspy_calls", "dspy_wall_s",
               "dspy_demos", "dspy_version")


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per request")
    p.add_argument("--candidates", type=int, default=8, help="candidate demonstration sets (both sides)")
    p.add_argument("--max-demos", type=int, default=4, help="most demonstrations per prompt (both sides)")
    p.add_argument("--seed", type=int, default=0, help="the splits' and the optimiser's seed")
    p.add_argument("--concurrency", type=int, default=8, help="decomp's concurrency and DSPy's num_threads")
    p.add_argument("--no-own-examples", action="store_true",
                   help="decomp's candidates leave op.txt's own examples out, as DSPy's reset_copy does")
    p.add_argument("--train", type=int, default=32, help="training rows (balanced over the 8 kinds)")
    p.add_argument("--dev", type=int, default=16, help="dev rows, the candidates are chosen on")
    p.add_argument("--test", type=int, default=32, help="test rows")
    p.add_argument("--dspy-python", type=Path, default=DSPY_PYTHON if DSPY_PYTHON.exists() else None,
                   help="the interpreter of a venv with DSPy (default: /tmp/dspyvenv/bin/python if it exists)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="decomp-optimize-bench-") as tmp:
        folder = Path(tmp)
        splits = write_splits(folder / "data", train=args.train, dev=args.dev, test=args.test, seed=args.seed)
        with mock_server(args.latency, responder=RESPONDER) as server:
            record = {"benchmark": "optimize", "rows": {"train": args.train, "dev": args.dev, "test": args.test},
                      "latency_s": args.latency, "candidates": args.candidates, "max_demos": args.max_demos,
                      "seed": args.seed, "concurrency": args.concurrency, "own_examples": not args.no_own_examples}
            record.update(measure_decomp(server, splits, folder, args))
            record.update(measure_dspy(server, splits, args))
    return emit(record)


def measure_decomp(server: Server, splits: dict[str, Path], folder: Path, args) -> dict:
    """(a): the optimiser's calls, wall time and chosen dev score, then the test scores."""
    from decomp.learning.optimize import optimize
    from decomp.runtime.runs.api import RunOptions, run_dataset

    def options(name: str) -> RunOptions:
        return RunOptions(base_url=server.base_url, concurrency=args.concurrency, cache_dir=folder / f"cache-{name}")

    server.reset_stats()
    started = time.perf_counter()
    result = optimize(str(PROGRAM), train=splits["train"], dev=splits["dev"], out=folder / "optimized",
                      model="openai:student", teacher="openai:teacher", options=options("optimize"),
                      metric="em", candidates=args.candidates, max_demos=args.max_demos, seed=args.seed,
                      keep_examples=not args.no_own_examples, progress=False)
    wall = time.perf_counter() - started
    calls = server.stats()["requests"]
    report = result.report
    server.reset_stats()
    scores = {}
    for name, program in (("test", result.program), ("zero_shot_test", PROGRAM)):
        summary = run_dataset(program, splits["test"], model="openai:student", options=options(name),
                              run_dir=folder / "runs" / name)
        scores[name] = summary.score
    test_calls = server.stats()["requests"]
    chosen = report.get("chosen") if isinstance(report.get("chosen"), dict) else {}
    return {
        "test_score": scores["test"], "dev_score": chosen.get("dev_score"),
        "zero_shot_test_score": scores["zero_shot_test"], "calls": calls, "wall_s": round(wall, 3),
        "reported_calls": report.get("calls"), "candidates_evaluated": len(report.get("candidates") or ()),
        "chosen": {k: v for k, v in chosen.items() if len(json.dumps(v, default=str)) <= 400},  # no long texts
        "test_calls": test_calls,
    }


def measure_dspy(server: Server, splits: dict[str, Path], args) -> dict:
    """(b): benchmarks/dspy_optimize.py in DSPy's own interpreter against the same server."""
    empty = dict.fromkeys(DSPY_FIELDS)
    if args.dspy_python is None:
        return {**empty, "dspy_skipped": f"no DSPy interpreter: {DSPY_PYTHON} does not exist (--dspy-python)"}
    argv = [str(args.dspy_python), str(DSPY_SCRIPT), "--base-url", server.base_url,
            "--train", str(splits["train"]), "--dev", str(splits["dev"]), "--test", str(splits["test"]),
            "--candidates", str(args.candidates), "--max-demos", str(args.max_demos), "--seed", str(args.seed),
            "--threads", str(args.concurrency)]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # DSPy's interpreter, its own packages; the script finds `benchmarks` itself
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    except OSError as exc:
        return {**empty, "dspy_skipped": f"cannot run {args.dspy_python}: {exc}"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"dspy_optimize.py failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    found = json.loads(lines[-1])
    if "skipped" in found:
        return {**empty, "dspy_skipped": found["skipped"]}
    return {**empty, **{k: v for k, v in found.items() if k.startswith("dspy_")}}


if __name__ == "__main__":
    try:
        main()
    except ImportError as exc:
        if exc.name != "decomp.learning.optimize":
            raise
        sys.exit(f"decomp.learning.optimize is not there (decomp optimize): {exc}")
