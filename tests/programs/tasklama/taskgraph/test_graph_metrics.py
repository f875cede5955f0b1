"""Graph metrics (In-Degree, Out-Degree, Step Proximity) by hand, and bad inputs."""
import math

import pytest
from decomp.programs.tasklama.taskgraph import metrics as m
from decomp.programs.tasklama.taskgraph.similarity import ExactSimilarity

A, B, C, D = "alpha", "beta", "gamma", "delta"


def scores(gold_steps, gold_edges, pred_steps, pred_edges):
    return m.graph_scores({"steps": gold_steps, "edges": gold_edges},
                          {"steps": pred_steps, "edges": pred_edges}, ExactSimilarity())


def test_identical_graphs_score_one():
    steps, edges = [A, B, C, D], [[0, 1], [0, 2], [1, 3], [2, 3]]
    assert scores(steps, edges, steps, edges) == {"in_degree": 1.0, "out_degree": 1.0, "proximity": 1.0}


def test_hand_computed_small_graph():
    # gold A->B, A->C; predicted A->B, B->C (same steps)
    s = scores([A, B, C], [[0, 1], [0, 2]], [A, B, C], [[0, 1], [1, 2]])
    # parents: A {} vs {} = 1; B {A} vs {A} = 1; C {A} vs {B} = 0
    assert s["in_degree"] == pytest.approx(2 / 3)
    # children: A {B,C} vs {B}: P=1, R=1/2 -> 2/3; B {} vs {C} = 0; C {} vs {} = 1
    assert s["out_degree"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    # both: A {B,C} vs {B} 2/3; B {A} vs {A,C} 2/3; C {A} vs {B} 0
    assert s["proximity"] == pytest.approx(4 / 9)


def test_matching_follows_similarity_not_position():
    # predicted steps listed in another order: C, A, B with edges A->B, A->C
    s = scores([A, B, C], [[0, 1], [0, 2]], [C, A, B], [[1, 2], [1, 0]])
    assert s == {"in_degree": 1.0, "out_degree": 1.0, "proximity": 1.0}


def test_unmatched_nodes_pair_with_the_dummy():
    extra = scores([A, B], [[0, 1]], [A, B, D], [[0, 1]])  # D unmatched: a dummy pair scoring 0
    assert extra["in_degree"] == pytest.approx(2 / 3) and extra["out_degree"] == pytest.approx(2 / 3)
    fewer = scores([A, B, C], [[0, 1], [1, 2]], [A, B], [[0, 1]])  # gold C unmatched
    assert fewer["in_degree"] == pytest.approx(2 / 3)
    assert fewer["out_degree"] == pytest.approx(1 / 3)  # A 1, B {C} vs {} 0, dummy 0


def test_to_graph_cleans_edges():
    g = m.to_graph([A, B, C], [[0, 0], [0, 1], [0, 1], [1, 7], [-1, 2], ["x", 1], [1], None, [True, 2], [2, 0]])
    assert sorted(g.edges) == [(0, 1), (2, 0)]
    assert g.nodes[2]["text"] == C


BAD_GOLD = [
    {"id": "empty", "steps": [], "edges": []},
    {"id": "null", "steps": None, "edges": None},
    {"id": "one", "steps": [A], "edges": [[0, 0]]},
    {"id": "missing", "steps": [A, B], "edges": [[0, 1], [1, 5]]},
    {"id": "loop", "steps": [A, B], "edges": [[0, 0], [0, 1]]},
    {"id": "cycle", "steps": [A, B, C], "edges": [[0, 1], [1, 2], [2, 0]]},
    {"id": "nopred", "steps": [A, B], "edges": [[0, 1]]},
    {"steps": [C], "edges": "garbage"},
]
BAD_PRED = [
    {"id": "empty", "steps": [A], "edges": []},
    {"id": "null", "steps": [], "edges": []},
    {"id": "one", "steps": [A], "edges": []},
    {"id": "missing", "steps": [B, A], "edges": [[1, 0], [3, 4]]},
    {"id": "loop", "steps": [A, B], "edges": [[1, 1]]},
    {"id": "cycle", "steps": [A, B, C], "edges": [[0, 1], [1, 0]]},
    {"id": "unknown", "steps": [D]},
]


def _finite(summary):
    for value in summary.values():
        if isinstance(value, dict):
            _finite(value)
        else:
            assert isinstance(value, (int, float)) and math.isfinite(value)
            assert 0.0 <= value or isinstance(value, int)


def test_bad_inputs_give_finite_summaries():
    steps = m.evaluate_steps(BAD_GOLD, BAD_PRED, ExactSimilarity())
    graphs = m.evaluate_graphs(BAD_GOLD, BAD_PRED, ExactSimilarity())
    _finite(steps), _finite(graphs)
    assert steps["count"] == graphs["count"] == 8 and graphs["missing"] == 2
    for key in ("in_degree", "out_degree", "proximity"):
        assert 0.0 <= graphs[key] <= 1.0


def test_bad_inputs_per_row_conventions():
    sim = ExactSimilarity()
    one = m.graph_scores(BAD_GOLD[2], BAD_PRED[2], sim)  # one step each, self-loop dropped
    assert one == {"in_degree": 1.0, "out_degree": 1.0, "proximity": 1.0}
    assert m.graph_scores(BAD_GOLD[1], BAD_PRED[1], sim)["proximity"] == 1.0  # both empty
    assert m.graph_scores(BAD_GOLD[0], BAD_PRED[0], sim)["proximity"] == 0.0  # only the prediction has a step
    assert m.graph_scores(BAD_GOLD[3], BAD_PRED[3], sim)["in_degree"] == 1.0  # missing-step edges ignored


def test_no_rows_gives_zeros():
    summary = m.evaluate_graphs([], [], ExactSimilarity())
    assert summary == {"in_degree": 0.0, "out_degree": 0.0, "proximity": 0.0, "count": 0, "missing": 0}
    _finite(m.evaluate_steps([], [], ExactSimilarity()))
