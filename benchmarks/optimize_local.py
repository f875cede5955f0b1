"""Benchmark: `decomp optimize` on the embedded local model (Gemma 3 270M), before and after.

The bundled `math/cot_regex` (a chain-of-thought prompt of our own, then a regular expression
takes what follows "answer is") on arithmetic word problems from five templates of our own
(`make_problems`: seeded, integers, one to three operations). The local model is the teacher and
the student: the training rows it solves give the chain of thought demonstrations, candidates
are scored on the development rows, and the program chosen is scored on held-out test rows
beside the original one. Everything runs offline on the CPU; minutes (about 2.5 s a call on
two busy cores).

    python benchmarks/optimize_local.py [--train 20 --dev 20 --test 40] [--candidates 4]
                                        [--max-demos 2] [--seed 0]

One JSON line: zero_shot_dev_score, dev_score, zero_shot_test_score, test_score, chosen,
calls (the optimisation's model calls), wall_s (its wall time), test_wall_s.
"""
from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # `python benchmarks/optimize_local.py`: see harness.bootstrap
    import harness
    harness.bootstrap()

from benchmarks.harness import emit, parser  # noqa: E402

NAMES = ("Ana", "Ben", "Chloe", "Dev", "Ema", "Femi", "Gus", "Hana", "Ivo", "Jia")
THINGS = ("apples", "stamps", "marbles", "pencils", "shells", "cards")


def _problem(rng: random.Random) -> tuple[str, int]:
    name, things = rng.choice(NAMES), rng.choice(THINGS)
    a, b, c = rng.randint(3, 12), rng.randint(2, 9), rng.randint(1, 5)
    templates = [
        (f"{name} has {a + c} {things}. {name} gets {b} more and gives away {c}. How many {things} does {name} "
         f"have now?", a + b),
        (f"There are {a} bags with {b} {things} in each bag. How many {things} are there in all?", a * b),
        (f"{name} reads {b} pages a day for {a} days. How many pages does {name} read?", a * b),
        (f"A box holds {b} {things}. {name} fills {a} boxes and then loses {c} {things}. How many {things} "
         f"are left?", a * b - c),
        (f"{name} had {a + b + c} dollars, spent {b} on lunch and {c} on a book. How many dollars are left?", a),
    ]
    return rng.choice(templates)


def make_problems(n: int, seed: int) -> list[dict]:
    """`n` distinct word problems {id, question, answer}, the same for the same seed."""
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        question, answer = _problem(rng)
        if question not in seen:
            seen.add(question)
            rows.append({"id": f"w{len(rows):03d}", "question": question, "answer": answer})
    return rows


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__)
    p.add_argument("--train", type=int, default=20)
    p.add_argument("--dev", type=int, default=20)
    p.add_argument("--test", type=int, default=40)
    p.add_argument("--candidates", type=int, default=4)
    p.add_argument("--max-demos", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="local:gemma-3-270m")
    args = p.parse_args(argv)
    from decomp.learning.optimize import optimize
    from decomp.runtime.runs.api import RunOptions, find_program, run_dataset

    folder = Path(tempfile.mkdtemp(prefix="optimize-local-"))
    rows = make_problems(args.train + args.dev + args.test, args.seed)
    splits = {"train": rows[:args.train], "dev": rows[args.train:args.train + args.dev],
              "test": rows[args.train + args.dev:]}
    paths = {}
    for name, part in splits.items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in part))
    options = RunOptions(cache_dir=folder / "cache")
    started = time.perf_counter()
    done = optimize(find_program("math/cot_regex"), paths["train"], paths["dev"], out=folder / "out",
                    model=args.model, options=options, candidates=args.candidates, max_demos=args.max_demos,
                    seed=args.seed)
    wall = time.perf_counter() - started
    started = time.perf_counter()
    before = run_dataset("math/cot_regex", paths["test"], model=args.model, options=options,
                         run_dir=folder / "test-zero-shot")
    after = run_dataset(done.program, paths["test"], model=args.model, options=options,
                        run_dir=folder / "test-optimized")
    report = done.report
    return emit({"benchmark": "optimize_local", "model": args.model, "program": "math/cot_regex",
                 "rows": {k: len(v) for k, v in splits.items()}, "candidates": args.candidates,
                 "max_demos": args.max_demos, "seed": args.seed,
                 "teacher_passed": report["bootstrap"]["passed"],
                 "zero_shot_dev_score": report["candidates"][0]["dev_score"], "dev_score": report["chosen"]["dev_score"],
                 "chosen": report["chosen"]["name"], "demos": report["chosen"]["demos"],
                 "zero_shot_test_score": before.score, "test_score": after.score, "calls": report["calls"],
                 "wall_s": round(wall, 1), "test_wall_s": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
