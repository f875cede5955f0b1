"""Write MSComplexTasks gold rows and the Linear / random-order baselines as JSONL, and
print their graph metrics (Linear also transitively closed) against the gold graphs.

    python -m decomp.programs.tasklama.taskgraph.baselines ../shared/data/mscomplextasks/task_subtask_dataset.json --out /tmp/msct
"""
from __future__ import annotations

import argparse
from pathlib import Path

from decomp.dsl.values import storable_json
from decomp.runtime.storage.jsonl import write_jsonl
from decomp.programs.tasklama.taskgraph import data, metrics
from decomp.programs.tasklama.taskgraph.similarity import get_similarity


def main(argv: list[str] | None = None) -> dict:
    """Write gold.jsonl, linear.jsonl, linear_closed.jsonl, random.jsonl under --out; print and
    return the metrics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="task_subtask_dataset.json")
    parser.add_argument("--out", default=None, help="folder for the JSONL files (optional)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--encoder", default="exact", choices=["exact", "use"])
    args = parser.parse_args(argv)
    gold = data.read_mscomplextasks(args.path)
    runs = {"linear": [data.linear(r) for r in gold],
            "linear_closed": [data.linear_closed(r) for r in gold],
            "random": [data.random_order(r, args.seed) for r in gold]}
    if args.out:
        for name, rows in {"gold": gold, **runs}.items():
            write_jsonl(Path(args.out) / f"{name}.jsonl", rows)
    similarity = get_similarity(args.encoder)
    result = {name: metrics.evaluate_graphs(gold, rows, similarity) for name, rows in runs.items()}
    print(storable_json(result, indent=1))
    return result


if __name__ == "__main__":
    main()
