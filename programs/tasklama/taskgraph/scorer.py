"""The S&F scorer: a ridge regression that predicts how well a step sequence matches the gold
steps of its task (Hungarian F1 under the sentence-encoder similarity), from embeddings.

Training data are (task, sequence, score) triples: sequences sampled by a step-generation
program on a training split, each scored against that task's gold steps. Features of a
sequence (all from the `use` sentence encoder, unit vectors):

    the task's embedding, the mean of its steps' embeddings, their element-wise product,
    cos(task, mean step), the number of steps (log), the mean greatest similarity of a step
    to another step of the sequence (repetition), and the share of steps shorter than 3 words.

The ridge penalty is chosen by k-fold cross-validation (Spearman correlation of predicted and
true scores on held-out tasks); the model (weights, feature scaling, penalty, its
cross-validated figures) is saved as one .npz file and loaded by `Scorer.load`.

    python -m decomp.programs.tasklama.taskgraph.scorer train --gold train.jsonl --samples RUN_DIR \\
        --out programs/tasklama/scorer.npz
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from decomp.dsl.values import storable_json
from decomp.programs.tasklama.taskgraph.metrics import hungarian
from decomp.programs.tasklama.taskgraph.similarity import EncoderSimilarity, get_similarity

PENALTIES = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)


def features(sim: EncoderSimilarity, task: str, steps: Sequence[str]) -> np.ndarray:
    """The feature vector of one (task, step sequence)."""
    task_vec = sim.embed([task])[0]
    dim = task_vec.shape[0]
    if not steps:
        return np.concatenate([task_vec, np.zeros(2 * dim), [0.0, 0.0, 0.0, 1.0]])
    vectors = sim.embed(list(steps))
    mean = vectors.mean(axis=0)
    pairwise = vectors @ vectors.T
    np.fill_diagonal(pairwise, -1.0)
    repetition = float(pairwise.max(axis=1).mean()) if len(steps) > 1 else 0.0
    short = float(np.mean([len(s.split()) < 3 for s in steps]))
    cos = float(task_vec @ mean / (np.linalg.norm(mean) or 1.0))
    return np.concatenate([task_vec, mean, task_vec * mean, [cos, np.log1p(len(steps)), repetition, short]])


@dataclass
class Scorer:
    """A trained scorer: predicts a sequence's F1 against the (unseen) gold steps."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray
    penalty: float
    cv_spearman: float
    trained_on: int

    def score(self, sim: EncoderSimilarity, task: str, steps: Sequence[str]) -> float:
        x = (features(sim, task, steps) - self.mean) / self.scale
        return float(x @ self.weights + self.bias)

    def save(self, path: str | Path) -> None:
        np.savez(path, weights=self.weights, bias=self.bias, mean=self.mean, scale=self.scale,
                 penalty=self.penalty, cv_spearman=self.cv_spearman, trained_on=self.trained_on)

    @classmethod
    def load(cls, path: str | Path) -> "Scorer":
        with np.load(path) as data:
            return cls(data["weights"], float(data["bias"]), data["mean"], data["scale"], float(data["penalty"]),
                       float(data["cv_spearman"]), int(data["trained_on"]))


def fit_ridge(x: np.ndarray, y: np.ndarray, penalty: float) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
    """Ridge regression on standardised features: (weights, bias, feature means, feature scales)."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    bias = float(y.mean())
    weights = np.linalg.solve(z.T @ z + penalty * np.eye(z.shape[1]), z.T @ (y - bias))
    return weights, bias, mean, scale


def train(x: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int = 5, seed: int = 0) -> Scorer:
    """Pick the penalty by grouped k-fold CV (no task in both train and held-out; on a tie the
    larger penalty), then fit on all."""
    from scipy.stats import spearmanr

    tasks = np.unique(groups)
    rng = np.random.default_rng(seed)
    fold_of = dict(zip(rng.permutation(tasks), np.arange(len(tasks)) % max(2, min(folds, len(tasks)))))
    assignment = np.array([fold_of[g] for g in groups])
    best = (-np.inf, PENALTIES[-1])
    for penalty in reversed(PENALTIES):  # strongest first: a tie keeps the simpler model
        predicted = np.zeros_like(y)
        for fold in np.unique(assignment):
            held = assignment == fold
            w, b, m, s = fit_ridge(x[~held], y[~held], penalty)
            predicted[held] = ((x[held] - m) / s) @ w + b
        rho = spearmanr(predicted, y).statistic if np.ptp(y) > 0 else 0.0
        rho = float(np.nan_to_num(rho))
        if rho > best[0]:
            best = (rho, penalty)
    weights, bias, mean, scale = fit_ridge(x, y, best[1])
    return Scorer(weights, bias, mean, scale, best[1], best[0], len(y))


def triples(gold_rows: list[dict], sample_rows: list[dict], sim: EncoderSimilarity):
    """(features, F1 against gold, task id) for every sampled sequence of every gold task."""
    gold = {str(r["id"]): r for r in gold_rows}
    xs, ys, groups = [], [], []
    for row in sample_rows:
        task = gold.get(str(row.get("id")))
        sequences = row.get("answer")
        if task is None or not isinstance(sequences, list):
            continue
        for steps in sequences:
            if not isinstance(steps, list):
                continue
            steps = [s for s in steps if isinstance(s, str)]
            xs.append(features(sim, task["task"], steps))
            ys.append(hungarian(sim(steps, task["steps"])).f1)
            groups.append(str(task["id"]))
    return np.array(xs), np.array(ys), np.array(groups)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m decomp.programs.tasklama.taskgraph.scorer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train a scorer from sampled sequences and gold steps")
    t.add_argument("--gold", type=Path, required=True, help="gold rows {id, task, steps} (JSONL)")
    t.add_argument("--samples", type=Path, required=True,
                   help="a run directory (or its results.jsonl) whose answers are lists of step lists")
    t.add_argument("--out", type=Path, required=True, help="where to save the scorer (.npz)")
    args = p.parse_args(argv)
    from decomp.programs.tasklama.taskgraph.data import read_jsonl, read_results

    sim = get_similarity("use")
    x, y, groups = triples(read_jsonl(args.gold), read_results(args.samples), sim)
    if len(y) < 4:
        sys.exit(f"only {len(y)} scored sequences: need at least 4 to train")
    scorer = train(x, y, groups)
    scorer.save(args.out)
    report = {"sequences": len(y), "tasks": len(set(groups)), "penalty": scorer.penalty,
              "cv_spearman": round(scorer.cv_spearman, 4), "mean_f1": round(float(y.mean()), 4),
              "out": str(args.out)}
    print(storable_json(report))
    return report


if __name__ == "__main__":
    main()
