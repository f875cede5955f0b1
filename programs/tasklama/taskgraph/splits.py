"""Fixed, seeded splits of MSComplexTasks for the TaskLAMA programs.

    python -m decomp.programs.tasklama.taskgraph.splits ../shared/data/mscomplextasks/task_subtask_dataset.json --out DIR

writes DIR/train.jsonl (tasks for training: the S&F scorer, soft prompts), DIR/validation.jsonl
(tasks for choosing a soft prompt's size: `decomp tune --validation`), DIR/test.jsonl (step generation:
rows {"id", "task", "assumptions", "steps", "edges"}, the gold included) and
DIR/graph_test.jsonl (graph construction: test tasks with at most `max_graph_steps` steps, as
pairwise questions grow with the square of the steps). Disjoint; drawn by `seed` from the
tasks with 3 or more steps, test first, then train, then validation: a larger `--train` or
`--validation` keeps the same test tasks (and the same first training tasks). Prints the sizes
as one JSON line.
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from decomp.dsl.values import storable_json
from decomp.runtime.storage.jsonl import write_jsonl
from decomp.programs.tasklama.taskgraph.data import read_mscomplextasks


def split(rows: list[dict], seed: int = 0, test: int = 20, train: int = 30, max_graph_steps: int = 6,
          validation: int = 0) -> dict[str, list[dict]]:
    """{"train", "validation", "test", "graph_test"}: disjoint random samples (graph_test within
    test), drawn in that order from one seeded shuffle: test, train, validation."""
    pool = [r for r in rows if len(r["steps"]) >= 3]
    random.Random(seed).shuffle(pool)
    chosen_test, chosen_train = pool[:test], pool[test:test + train]
    chosen_validation = pool[test + train:test + train + validation]
    return {"train": chosen_train, "validation": chosen_validation, "test": chosen_test,
            "graph_test": [r for r in chosen_test if len(r["steps"]) <= max_graph_steps]}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m decomp.programs.tasklama.taskgraph.splits", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", type=Path, help="task_subtask_dataset.json")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test", type=int, default=20)
    p.add_argument("--train", type=int, default=30)
    p.add_argument("--validation", type=int, default=0)
    p.add_argument("--max-graph-steps", type=int, default=6)
    args = p.parse_args(argv)
    parts = split(read_mscomplextasks(args.dataset), args.seed, args.test, args.train, args.max_graph_steps,
                  args.validation)
    for name, rows in parts.items():
        write_jsonl(args.out / f"{name}.jsonl", rows)
    sizes = {name: len(rows) for name, rows in parts.items()}
    print(storable_json({**sizes, "seed": args.seed, "out": str(args.out)}))
    return sizes


if __name__ == "__main__":
    main()
