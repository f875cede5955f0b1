"""TaskLAMA metrics (Yuan et al. 2023, "TaskLAMA", section "Metrics").

Conventions used throughout (``sim`` is a matrix with ``sim[i, j] = S(pred_i, gold_j)``,
cleaned to [0, 1]: NaN -> 0, negative cosine -> 0):

- Step metrics (:func:`hungarian`, :func:`relaxed`, :func:`one_to_many`) return
  :class:`Scores`. Precision divides the matched similarity by the number of
  predicted steps, recall by the number of gold steps. F-beta is
  ``(1 + b^2) P R / (b^2 P + R)`` (0 when P = R = 0); F2 weighs recall twice.
- Empty step lists: both empty -> every score 1.0; exactly one empty -> 0.0.
- ROUGE (``rouge-score``) defaults to ROUGE-1 with the Porter stemmer: the steps are
  a set, so an order-free unigram overlap fits both the concatenated-steps score and
  the parent/child overlap (the paper does not name the variant). ``rouge_type``
  selects another (``rouge2``, ``rougeL``, ``rougeLsum``).
- Graph metrics: gold and predicted nodes are paired by Hungarian matching; every
  unmatched node is paired with a dummy node that has no parents or children and
  scores 0. The overlap of two neighbour sets is the ROUGE F1 of their texts
  (joined by newlines, in node order); two empty sets score 1.0 (both nodes are,
  say, roots: they agree); one empty set scores 0.0. A task whose gold and predicted
  graphs are both empty scores 1.0.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

import networkx as nx
import numpy as np

from decomp.programs.tasklama.taskgraph.similarity import Similarity, clean_matrix

Pair = tuple[int | None, int | None]  # (gold node, predicted node); None is the dummy node


@dataclass(frozen=True)
class Scores:
    """Precision, recall, F1 and F2 of one comparison."""

    precision: float
    recall: float
    f1: float
    f2: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def fbeta(precision: float, recall: float, beta: float) -> float:
    """F-beta of ``precision`` and ``recall``; 0.0 when both are 0."""
    b2 = beta * beta
    denominator = b2 * precision + recall
    return 0.0 if denominator <= 0 else (1 + b2) * precision * recall / denominator


def scores(precision: float, recall: float) -> Scores:
    """:class:`Scores` with F1 and F2 computed from ``precision`` and ``recall``."""
    p, r = float(precision), float(recall)
    return Scores(p, r, fbeta(p, r, 1.0), fbeta(p, r, 2.0))


def _empty_case(sim: np.ndarray) -> Scores | None:
    n_pred, n_gold = sim.shape
    if n_pred and n_gold:
        return None
    value = 1.0 if n_pred == n_gold == 0 else 0.0
    return Scores(value, value, value, value)


def _matrix(sim) -> np.ndarray:
    m = np.asarray(sim, dtype=np.float64)
    if m.ndim != 2:
        m = m.reshape(0, 0) if m.size == 0 else np.atleast_2d(m)
    return clean_matrix(m)


def hungarian(sim) -> Scores:
    """One-to-one matching maximising total similarity (``linear_sum_assignment``)."""
    sim = _matrix(sim)
    if (empty := _empty_case(sim)) is not None:
        return empty
    rows, cols = _assignment(sim, maximize=True)
    total = sim[rows, cols].sum()
    return scores(total / sim.shape[0], total / sim.shape[1])


def _assignment(sim: np.ndarray, maximize: bool = True):
    """scipy's ``linear_sum_assignment`` (scipy imported on first use: loading a program imports
    this module through the plugin table, and scipy.optimize costs a fifth of a second)."""
    from scipy.optimize import linear_sum_assignment

    return linear_sum_assignment(sim, maximize=maximize)


def _capacity_total(sim: np.ndarray, k: int) -> float:
    """Best total when each row takes one column and each column serves up to ``k`` rows."""
    tiled = np.tile(sim, (1, k))
    rows, cols = _assignment(tiled, maximize=True)
    return float(tiled[rows, cols].sum())


def relaxed(sim, k: int = 2) -> Scores:
    """Relaxed Hungarian matching: a step may match up to ``k`` steps of the other side.

    Precision: each predicted step is matched to one gold step, a gold step may
    absorb up to ``k`` predicted steps ("add salt" + "add pepper" -> "add salt and
    pepper"). Recall: symmetrically, each gold step to one predicted step, a
    predicted step covering up to ``k`` gold steps. ``k = 1`` is :func:`hungarian`.
    """
    sim = _matrix(sim)
    if (empty := _empty_case(sim)) is not None:
        return empty
    return scores(_capacity_total(sim, k) / sim.shape[0], _capacity_total(sim.T, k) / sim.shape[1])


def one_to_many(sim) -> Scores:
    """The older formula (Zhang et al. 2021): P = mean_i max_j S, R = mean_j max_i S."""
    sim = _matrix(sim)
    if (empty := _empty_case(sim)) is not None:
        return empty
    return scores(sim.max(axis=1).mean(), sim.max(axis=0).mean())


@lru_cache(maxsize=8)
def _scorer(rouge_type: str):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([rouge_type], use_stemmer=True)


def rouge_pr(reference: str, candidate: str, rouge_type: str = "rouge1") -> tuple[float, float]:
    """ROUGE (precision, recall) of ``candidate`` against ``reference``."""
    score = _scorer(rouge_type).score(reference, candidate)[rouge_type]
    return float(score.precision), float(score.recall)


def rouge_scores(gold_steps: Sequence[str], pred_steps: Sequence[str],
                 rouge_type: str = "rouge1") -> dict[str, float]:
    """ROUGE F1 and F2 of the predicted steps, concatenated one per line, against the gold ones."""
    if not gold_steps or not pred_steps:
        value = 1.0 if not gold_steps and not pred_steps else 0.0
        return {"f1": value, "f2": value}
    p, r = rouge_pr("\n".join(gold_steps), "\n".join(pred_steps), rouge_type)
    return {"f1": fbeta(p, r, 1.0), "f2": fbeta(p, r, 2.0)}


# ---------------------------------------------------------------- graphs

def to_graph(steps: Sequence[str], edges: Iterable = ()) -> nx.DiGraph:
    """A DiGraph over step indices (node attribute ``text``) from ``edges`` ``[i, j]``
    (i before j). Dropped silently: self-loops, malformed edges and edges naming a
    missing step; duplicates merge. Cycles are kept (the graph metrics only look at
    immediate parents and children)."""
    graph = nx.DiGraph()
    graph.add_nodes_from((i, {"text": str(s)}) for i, s in enumerate(steps))
    for edge in edges or ():
        if valid_edge(edge, len(steps)):
            graph.add_edge(int(edge[0]), int(edge[1]))
    return graph


def valid_edge(edge, n: int) -> bool:
    """An edge [i, j] of two different step indices below `n` (ints, not bools)."""
    if not isinstance(edge, (list, tuple)) or len(edge) != 2:
        return False
    i, j = edge
    ints = all(isinstance(x, int) and not isinstance(x, bool) for x in (i, j))
    return ints and 0 <= i < n and 0 <= j < n and i != j


def match_nodes(sim) -> list[tuple[int, int]]:
    """Hungarian pairs ``(gold_index, pred_index)`` for ``sim[pred, gold]``."""
    sim = _matrix(sim)
    if 0 in sim.shape:
        return []
    rows, cols = _assignment(sim, maximize=True)
    return sorted((int(g), int(p)) for p, g in zip(rows, cols))


def node_pairs(gold: nx.DiGraph, pred: nx.DiGraph, matching: Sequence[tuple[int, int]]) -> list[Pair]:
    """Matched pairs, plus every unmatched node paired with the dummy node (None)."""
    pairs: list[Pair] = list(matching)
    matched_gold = {g for g, _ in matching}
    matched_pred = {p for _, p in matching}
    pairs += [(g, None) for g in gold.nodes if g not in matched_gold]
    pairs += [(None, p) for p in pred.nodes if p not in matched_pred]
    return pairs


def set_overlap(gold_texts: Sequence[str], pred_texts: Sequence[str], rouge_type: str = "rouge1") -> float:
    """ROUGE F1 of two neighbour sets' texts; two empty sets 1.0, one empty 0.0."""
    if not gold_texts or not pred_texts:
        return 1.0 if not gold_texts and not pred_texts else 0.0
    gold_doc, pred_doc = "\n".join(gold_texts), "\n".join(pred_texts)
    if " ".join(gold_doc.lower().split()) == " ".join(pred_doc.lower().split()):
        return 1.0
    return fbeta(*rouge_pr(gold_doc, pred_doc, rouge_type), 1.0)


Neighbours = Callable[[nx.DiGraph, int], Iterable[int]]


def _texts(graph: nx.DiGraph, nodes: Iterable[int]) -> list[str]:
    return [graph.nodes[n].get("text", str(n)) for n in sorted(set(nodes))]


def graph_overlap(gold: nx.DiGraph, pred: nx.DiGraph, matching: Sequence[tuple[int, int]],
                  neighbours: Neighbours, rouge_type: str = "rouge1") -> float:
    """Mean neighbour-set overlap over matched pairs and dummy pairs (dummy pairs score 0)."""
    pairs = node_pairs(gold, pred, matching)
    if not pairs:
        return 1.0
    total = 0.0
    for g, p in pairs:
        if g is not None and p is not None:
            total += set_overlap(_texts(gold, neighbours(gold, g)), _texts(pred, neighbours(pred, p)), rouge_type)
    return total / len(pairs)


def _parents(graph: nx.DiGraph, node: int):
    return graph.predecessors(node)


def _children(graph: nx.DiGraph, node: int):
    return graph.successors(node)


def _both(graph: nx.DiGraph, node: int):
    return set(graph.predecessors(node)) | set(graph.successors(node))


def in_degree(gold: nx.DiGraph, pred: nx.DiGraph, matching, rouge_type: str = "rouge1") -> float:
    """In-Degree: mean overlap of the parents of matched nodes."""
    return graph_overlap(gold, pred, matching, _parents, rouge_type)


def out_degree(gold: nx.DiGraph, pred: nx.DiGraph, matching, rouge_type: str = "rouge1") -> float:
    """Out-Degree: mean overlap of the children of matched nodes."""
    return graph_overlap(gold, pred, matching, _children, rouge_type)


def proximity(gold: nx.DiGraph, pred: nx.DiGraph, matching, rouge_type: str = "rouge1") -> float:
    """Step Proximity: mean overlap of parents-and-children of matched nodes."""
    return graph_overlap(gold, pred, matching, _both, rouge_type)


# ---------------------------------------------------------------- datasets

def row_steps(row: dict | None) -> list[str]:
    """The row's steps as strings (missing or null -> [])."""
    steps = (row or {}).get("steps") or []
    return [str(s) for s in steps] if isinstance(steps, (list, tuple)) else []


def _align(gold_rows: Sequence[dict], pred_rows: Sequence[dict]):
    """Yield (gold_row, pred_row or None) by ``id`` (row position when absent).
    Predictions for unknown ids are ignored; a repeated prediction id keeps the last."""
    preds = {str(r.get("id", i)): r for i, r in enumerate(pred_rows)}
    for i, row in enumerate(gold_rows):
        yield row, preds.get(str(row.get("id", i)))


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else 0.0


def evaluate_steps(gold_rows: Sequence[dict], pred_rows: Sequence[dict], similarity: Similarity,
                   rouge_type: str = "rouge1") -> dict:
    """Mean step metrics over the gold rows: ``hungarian``, ``relaxed``, ``one_to_many``
    (each precision/recall/f1/f2) and ``rouge`` (f1/f2), plus ``count`` (gold rows)
    and ``missing`` (gold rows without a prediction, scored as an empty prediction).
    No gold rows -> every mean is 0.0."""
    per: dict[str, list[dict[str, float]]] = {"hungarian": [], "relaxed": [], "one_to_many": [], "rouge": []}
    missing = 0
    for gold_row, pred_row in _align(gold_rows, pred_rows):
        missing += pred_row is None
        gold, pred = row_steps(gold_row), row_steps(pred_row)
        sim = similarity(pred, gold) if gold and pred else np.zeros((len(pred), len(gold)))
        per["hungarian"].append(hungarian(sim).to_dict())
        per["relaxed"].append(relaxed(sim).to_dict())
        per["one_to_many"].append(one_to_many(sim).to_dict())
        per["rouge"].append(rouge_scores(gold, pred, rouge_type))
    summary = {name: {key: _mean([d[key] for d in rows]) for key in _keys(name)} for name, rows in per.items()}
    return {**summary, "count": len(gold_rows), "missing": missing}


def _keys(name: str) -> tuple[str, ...]:
    return ("f1", "f2") if name == "rouge" else ("precision", "recall", "f1", "f2")


def row_graph(row: dict | None) -> nx.DiGraph:
    """:func:`to_graph` of a row's ``steps`` and ``edges``."""
    edges = (row or {}).get("edges") or []
    return to_graph(row_steps(row), edges if isinstance(edges, (list, tuple)) else [])


def graph_scores(gold_row: dict, pred_row: dict | None, similarity: Similarity,
                 rouge_type: str = "rouge1") -> dict[str, float]:
    """In-Degree, Out-Degree and Step Proximity of one task."""
    gold_g, pred_g = row_graph(gold_row), row_graph(pred_row)
    gold, pred = row_steps(gold_row), row_steps(pred_row)
    matching = match_nodes(similarity(pred, gold)) if gold and pred else []
    return {
        "in_degree": in_degree(gold_g, pred_g, matching, rouge_type),
        "out_degree": out_degree(gold_g, pred_g, matching, rouge_type),
        "proximity": proximity(gold_g, pred_g, matching, rouge_type),
    }


def evaluate_graphs(gold_rows: Sequence[dict], pred_rows: Sequence[dict], similarity: Similarity,
                    rouge_type: str = "rouge1") -> dict:
    """Mean ``in_degree``, ``out_degree``, ``proximity`` over the gold rows, plus
    ``count`` and ``missing`` (a missing prediction is an empty graph: 0.0, or 1.0
    when the gold graph is empty too). No gold rows -> every mean is 0.0."""
    per: list[dict[str, float]] = []
    missing = 0
    for gold_row, pred_row in _align(gold_rows, pred_rows):
        missing += pred_row is None
        per.append(graph_scores(gold_row, pred_row, similarity, rouge_type))
    summary = {key: _mean([d[key] for d in per]) for key in ("in_degree", "out_degree", "proximity")}
    return {**summary, "count": len(gold_rows), "missing": missing}
