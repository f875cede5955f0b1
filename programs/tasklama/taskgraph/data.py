"""Task-graph rows, the MSComplexTasks reader and the Linear / random-order baselines.

A row is ``{"id", "task", "assumptions", "steps": [str, ...], "edges": [[i, j], ...]}``
with edges between step indices, i before j.

Cleaning rules of :func:`read_mscomplextasks` (counted in :class:`ReadReport`):

- steps are the ``subtasks`` in file order; a sub-task id maps to its position;
- ``subtask_dependencies`` absent or null -> no edges (24 tasks in the file);
- self-loops (parent == child) are dropped;
- duplicate edges are merged;
- edges naming an unknown sub-task id, or not integers, are dropped;
- a repeated sub-task id keeps its first position (later ones still are steps);
- cycles are kept as in the file (43 tasks; listed in ``ReadReport.cyclic``): the
  graph metrics only use immediate parents and children and need no DAG. Pass
  ``break_cycles=True`` to remove every edge that lies on a cycle instead (the
  design's rule for generated graphs).

The file's snapshot (microsoft/MSComplexTasks @ 5812ba4) has no self-loops, duplicate
or unknown-id edges; the rules are there for other snapshots and hand-made files.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from decomp.dsl.errors import InputError
from decomp.runtime.storage.jsonl import read_lines


@dataclass
class ReadReport:
    """What :func:`read_mscomplextasks` cleaned."""

    tasks: int = 0
    edges_kept: int = 0
    self_loops: int = 0
    duplicates: int = 0
    unknown: int = 0
    no_dependencies: int = 0
    cycle_edges_removed: int = 0
    cyclic: list = field(default_factory=list)


def read_mscomplextasks(path: str | Path, break_cycles: bool = False,
                        report: ReadReport | None = None) -> list[dict]:
    """Rows from ``task_subtask_dataset.json`` (one JSON array), cleaned as the module says."""
    report = report if report is not None else ReadReport()
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [_row(task, report, break_cycles) for task in data]


def _row(task: dict, report: ReadReport, break_cycles: bool) -> dict:
    report.tasks += 1
    subtasks = task.get("subtasks") or []
    steps = [str(s.get("name", "")).strip() for s in subtasks]
    index: dict = {}
    for position, sub in enumerate(subtasks):
        index.setdefault(sub.get("id"), position)
    deps = task.get("subtask_dependencies")
    report.no_dependencies += deps is None
    edges = _clean_edges(deps or [], index, report)
    kept = without_cycles(edges)
    if len(kept) < len(edges):  # self-loops are gone already: only cycles lose edges
        report.cyclic.append(task.get("id"))
        if break_cycles:
            report.cycle_edges_removed += len(edges) - len(kept)
            edges = kept
    report.edges_kept += len(edges)
    return {"id": task.get("id"), "task": task.get("task", ""), "assumptions": "",
            "steps": steps, "edges": [list(e) for e in edges]}


def _clean_edges(deps: list, index: dict, report: ReadReport) -> list[tuple[int, int]]:
    edges: list[tuple[int, int]] = []
    seen: set[tuple[int, int]] = set()
    for dep in deps:
        parent, child = (dep.get("parent"), dep.get("child")) if isinstance(dep, dict) else (None, None)
        if parent not in index or child not in index:
            report.unknown += 1
        elif parent == child:
            report.self_loops += 1
        elif (index[parent], index[child]) in seen:
            report.duplicates += 1
        else:
            seen.add((index[parent], index[child]))
            edges.append((index[parent], index[child]))
    return edges


def without_cycles(edges: list) -> list:
    """`edges` (pairs) but those lying on a cycle: self-loops and edges inside a strongly
    connected component."""
    graph = nx.DiGraph([tuple(e) for e in edges])
    on_cycle = set()
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            on_cycle |= set(graph.subgraph(component).edges)
    return [e for e in edges if e[0] != e[1] and tuple(e) not in on_cycle]


def _chain(row: dict, order: list[int]) -> dict:
    edges = [[a, b] for a, b in zip(order, order[1:])]
    return {**row, "steps": list(row.get("steps") or []), "edges": edges}


def linear(row: dict) -> dict:
    """The Linear baseline: the row's steps in their listed order as a chain 0 -> 1 -> ...
    (steps and their indices unchanged, so matching against the gold row is trivial)."""
    return _chain(row, list(range(len(row.get("steps") or []))))


def linear_closed(row: dict) -> dict:
    """Linear, transitively closed: every step before every later one (i -> j for all i < j).
    MSComplexTasks' gold graphs are often closed (476 of 713 acyclic ones), so this scores far
    above the chain: a baseline any graph program should be compared with."""
    n = len(row.get("steps") or [])
    return {**row, "steps": list(row.get("steps") or []), "edges": [[i, j] for i in range(n) for j in range(i + 1, n)]}


def random_order(row: dict, seed: int = 0) -> dict:
    """The random-order baseline: the row's steps chained in a shuffled order (seeded
    by ``seed`` and the row id, so rows get different but reproducible orders)."""
    order = list(range(len(row.get("steps") or [])))
    random.Random(f"{seed}:{row.get('id')}").shuffle(order)
    return _chain(row, order)


def read_jsonl(path: str | Path) -> list[dict]:
    """The row objects of a JSONL file (blank lines skipped); a ``.json`` file holding an array
    also works. An `InputError` names the file (and line) that is not UTF-8 or not JSON."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: the file is not UTF-8 text (byte {err.start})") from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise InputError(f"{path}: not a JSON array ({err})") from None
    else:
        rows = []
        for line in read_lines(text):
            if line.exception is not None:
                raise InputError(f"{path}:{line.number}: not JSON: {line.exception.msg}") from line.exception
            rows.append(line.value)
    return [r for r in rows if isinstance(r, dict)]


def read_results(path: str | Path) -> list[dict]:
    """Rows of a JSONL file, or the complete results lines of a `decomp run` directory (read as
    `RunDir` reads them: a half-written last line of a killed run is skipped)."""
    path = Path(path)
    if path.is_dir():
        from decomp.runtime.storage.rundir import RunDir
        return RunDir.open(path).records()
    return read_jsonl(path)


def read_predictions(path: str | Path) -> list[dict]:
    """Predicted rows for `decomp eval steps/graph`: task-graph rows as they are, or the results
    of `decomp run` (a run directory or its results.jsonl), whose `answer` is a list of steps
    (step programs) or a {"steps", "edges"} object (graph programs); a failed row (no answer)
    counts as an empty prediction."""
    return [_as_graph_row(row) for row in read_results(path)]


def _as_graph_row(row: dict) -> dict:
    if "steps" in row or "answer" not in row:
        return row
    answer = row["answer"]
    if isinstance(answer, dict):
        return {**row, "steps": answer.get("steps") or [], "edges": answer.get("edges") or []}
    return {**row, "steps": answer if isinstance(answer, list) else [], "edges": []}
