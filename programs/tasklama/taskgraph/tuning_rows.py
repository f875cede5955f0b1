"""Training rows for TaskLAMA's soft prompts, from task-graph rows with their gold graphs.

    python -m decomp.programs.tasklama.taskgraph.tuning_rows DIR/train.jsonl --out DIR/tune_train
    python -m decomp.programs.tasklama.taskgraph.tuning_rows DIR/validation.jsonl --out DIR/tune_validation

writes OUT/steps.jsonl, one row per task for the step generators' soft prompts
(`{"id", "task", "assumptions", "completion"}`: the gold steps in an order their graph allows,
numbered one per line as `tasklama/steps` reads them, and the blank line that ends the list),
and OUT/pairs.jsonl, one row per ordered pair of different steps for the pairwise graph's
soft prompt (`{"id", "query", "completion"}`: the query exactly as `tasklama/graphs`' [pairs]
asks it, the completion " yes" when the gold graph has the edge A -> B, else " no"). `decomp
tune ... --target completion` trains on them. Prints the counts as one JSON line.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable

import networkx as nx

from decomp.dsl.values import storable_json
from decomp.runtime.storage.jsonl import write_jsonl
from decomp.programs.tasklama.taskgraph.data import read_jsonl

__all__ = ["gold_order", "pair_rows", "step_rows"]


def gold_order(row: dict) -> list[str]:
    """The row's steps in an order its gold edges allow (the smallest index first among the
    steps free to go next); in file order when the graph has a cycle."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(row["steps"])))
    graph.add_edges_from(tuple(edge) for edge in row["edges"])
    try:
        order = list(nx.lexicographical_topological_sort(graph))
    except nx.NetworkXUnfeasible:  # a cycle in the file's graph
        order = list(range(len(row["steps"])))
    return [row["steps"][i] for i in order]


def step_rows(rows: Iterable[dict]) -> list[dict]:
    """One row per task: its inputs and the numbered gold steps, ended by a blank line."""
    return [{"id": row["id"], "task": row["task"], "assumptions": row.get("assumptions", ""),
             "completion": "".join(f"{n}. {step}\n" for n, step in enumerate(gold_order(row), 1)) + "\n"}
            for row in rows]


def pair_rows(rows: Iterable[dict]) -> list[dict]:
    """One row per ordered pair (i, j) of different steps of each task, in [pairs]' order:
    must step i come before step j? " yes" when the gold graph has the edge i -> j."""
    out = []
    for row in rows:
        steps, edges = row["steps"], {tuple(edge) for edge in row["edges"]}
        for i in range(len(steps)):
            for j in range(len(steps)):
                if i != j:
                    out.append({"id": f"{row['id']}:{i}:{j}",
                                "query": f"Task: {row['task']}\nStep A: {steps[i]}\nStep B: {steps[j]}",
                                "completion": " yes" if (i, j) in edges else " no"})
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m decomp.programs.tasklama.taskgraph.tuning_rows", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rows", type=Path, help="task-graph rows with gold steps and edges (splits' train.jsonl)")
    p.add_argument("--out", type=Path, required=True, help="folder for steps.jsonl and pairs.jsonl")
    args = p.parse_args(argv)
    rows = read_jsonl(args.rows)
    steps, pairs = step_rows(rows), pair_rows(rows)
    write_jsonl(args.out / "steps.jsonl", steps)
    write_jsonl(args.out / "pairs.jsonl", pairs)
    counts = {"tasks": len(rows), "steps_rows": len(steps), "pairs_rows": len(pairs),
              "yes": sum(r["completion"] == " yes" for r in pairs), "out": str(args.out)}
    print(storable_json(counts))
    return counts


if __name__ == "__main__":
    main()
