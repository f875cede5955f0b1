"""The MSComplexTasks reader, the baselines, and `decomp eval steps|graph`."""
import json

import networkx as nx
import pytest
from click.testing import CliRunner
from decomp.runtime.cli import main
from decomp.programs.tasklama.taskgraph import data, metrics
from decomp.programs.tasklama.taskgraph.similarity import ExactSimilarity

from tests.helpers import FIXTURES

# MSComplexTasks' first 32 tasks, in the original layout (tests/fixtures/README.md): two tasks
# without dependencies and two cyclic ones among them
MSCT = FIXTURES / "mscomplextasks" / "task_subtask_dataset_first32.json"


def test_reader_cleaning_rules(tmp_path):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([
        {"id": 7, "task": "t", "subtasks": [{"id": 10, "name": " a "}, {"id": 20, "name": "b"}, {"id": 30, "name": "c"}],
         "subtask_dependencies": [{"parent": 10, "child": 10}, {"parent": 10, "child": 20},
                                  {"parent": 10, "child": 20}, {"parent": 20, "child": 99},
                                  {"parent": 20, "child": 30}, {"parent": 30, "child": 20}]},
        {"id": 8, "task": "u", "subtasks": [{"id": 0, "name": "x"}], "subtask_dependencies": None},
    ]))
    report = data.ReadReport()
    rows = data.read_mscomplextasks(path, report=report)
    assert rows[0] == {"id": 7, "task": "t", "assumptions": "", "steps": ["a", "b", "c"],
                       "edges": [[0, 1], [1, 2], [2, 1]]}
    assert rows[1]["edges"] == [] and rows[1]["steps"] == ["x"]
    assert (report.self_loops, report.duplicates, report.unknown, report.no_dependencies) == (1, 1, 1, 1)
    assert report.cyclic == [7]
    broken = data.read_mscomplextasks(path, break_cycles=True)
    assert broken[0]["edges"] == [[0, 1]]


def test_baselines_are_chains():
    row = {"id": 3, "task": "t", "steps": list("abcde"), "edges": [[4, 0]]}
    assert data.linear(row)["edges"] == [[0, 1], [1, 2], [2, 3], [3, 4]]
    shuffled = data.random_order(row, seed=1)
    assert shuffled["steps"] == row["steps"] and len(shuffled["edges"]) == 4
    assert nx.is_directed_acyclic_graph(nx.DiGraph([tuple(e) for e in shuffled["edges"]]))
    assert shuffled == data.random_order(row, seed=1)
    assert data.linear({"id": 0, "steps": []})["edges"] == []
    assert data.linear_closed({"id": 0, "steps": list("abc")})["edges"] == [[0, 1], [0, 2], [1, 2]]


def _check_rows(path, rows, report):
    """What holds for any snapshot of the file: clean steps and edges, and break_cycles yields DAGs."""
    assert report.self_loops == 0 and report.duplicates == 0 and report.unknown == 0
    assert report.edges_kept == sum(len(r["edges"]) for r in rows)
    for row in rows:
        assert row["steps"] and all(0 <= i < len(row["steps"]) and 0 <= j < len(row["steps"]) and i != j
                                    for i, j in row["edges"])
    dags = data.read_mscomplextasks(path, break_cycles=True)
    assert all(nx.is_directed_acyclic_graph(metrics.row_graph(r)) for r in dags)
    assert [r["steps"] for r in dags] == [r["steps"] for r in rows]


def test_reader_on_the_first_32_real_tasks():
    report = data.ReadReport()
    rows = data.read_mscomplextasks(MSCT, report=report)
    assert len(rows) == 32 and report.tasks == 32
    assert [r["id"] for r in rows][:3] == [0, 2, 4]
    assert rows[0]["task"] == "get stimulus check 2020" and rows[0]["edges"] == [[1, 0]]
    assert report.no_dependencies == 2 and report.cyclic == [26, 30]
    assert report.edges_kept == 517
    _check_rows(MSCT, rows, report)
    broken = data.ReadReport()
    data.read_mscomplextasks(MSCT, break_cycles=True, report=broken)
    assert broken.cyclic == [26, 30] and broken.cycle_edges_removed == 10 and broken.edges_kept == 507


@pytest.mark.slow  # about a second
def test_baseline_graph_metrics_on_the_first_32_real_tasks():
    rows = data.read_mscomplextasks(MSCT)
    sim = ExactSimilarity()  # the baselines keep the gold steps: matching is the identity
    linear = metrics.evaluate_graphs(rows, [data.linear(r) for r in rows], sim)
    shuffled = metrics.evaluate_graphs(rows, [data.random_order(r, 0) for r in rows], sim)
    closed = metrics.evaluate_graphs(rows, [data.linear_closed(r) for r in rows], sim)
    gold = metrics.evaluate_graphs(rows, rows, sim)
    assert gold["in_degree"] == gold["out_degree"] == gold["proximity"] == 1.0
    # the numbers on these 32 real graphs (on so few, Linear and random order tie on proximity;
    # the whole-file test below checks that Linear beats random order on all three)
    expected = {"linear": (0.374998, 0.341845, 0.514583), "shuffled": (0.349687, 0.339683, 0.515058),
                "closed": (0.542279, 0.523030, 0.871884)}
    for name, got in (("linear", linear), ("shuffled", shuffled), ("closed", closed)):
        assert (got["count"], got["missing"]) == (32, 0)
        assert [got[k] for k in ("in_degree", "out_degree", "proximity")] == \
            pytest.approx(expected[name], abs=1e-6), name
    assert linear["in_degree"] - shuffled["in_degree"] > 0.02
    for key in ("in_degree", "out_degree", "proximity"):
        assert closed[key] > max(linear[key], shuffled[key])


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_cli_eval_steps_and_graph(tmp_path):
    gold = _write(tmp_path / "g.jsonl", [{"id": 1, "task": "t", "assumptions": "", "steps": ["a b", "c d"],
                                          "edges": [[0, 1]]}])
    pred = _write(tmp_path / "p.jsonl", [{"id": 1, "steps": ["c d", "a b"], "edges": [[1, 0]]}])
    steps = CliRunner().invoke(main, ["eval", "steps", "--gold", gold, "--pred", pred, "--encoder", "exact"])
    assert steps.exit_code == 0, steps.output
    summary = json.loads(steps.output)
    assert set(summary) >= {"hungarian", "relaxed", "one_to_many", "rouge"}
    assert summary["hungarian"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "f2": 1.0}
    graph = CliRunner().invoke(main, ["eval", "graph", "--gold", gold, "--pred", pred, "--encoder", "exact"])
    assert graph.exit_code == 0, graph.output
    assert json.loads(graph.output)["proximity"] == 1.0


def test_cli_eval_help_documents_both_uses():
    result = CliRunner().invoke(main, ["eval", "--help"])
    assert result.exit_code == 0
    for text in ("--metric", "--gold", "steps", "graph"):
        assert text in result.output
    missing = CliRunner().invoke(main, ["eval"])
    assert missing.exit_code == 2 and "--gold" in missing.output
