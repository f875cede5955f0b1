"""The Python side of the TaskLAMA programs in programs/tasklama/ (python handlers).

Steps:    `numbered` (a model's numbered list -> steps), `samples` (each sample -> steps),
          `merge` (MultSeq: steps of all samples, near-duplicates dropped), `best` (S&F: the
          sample the trained scorer rates highest), `best_merged` (MultSeq + S&F: the top
          samples by the scorer, merged).
Graphs:   `chain` (Linear), `pairs` + `pair_edges` (pairwise questions and their answers ->
          edges), `swaps` + `consensus` (LLM scoring: sequences with two steps swapped, their
          log-likelihoods -> edges A -> B when A precedes B in every top sequence), `acyclic`
          (drop the edges on cycles) giving the graph row {"steps", "edges"}.

Thresholds and counts can be changed per row or with `decomp run --field NAME=VALUE`:
`threshold` (MultSeq near-duplicates, cosine, 0.8), `top` (sequences kept, 2 for
`best_merged`, 3 for `consensus`), `swaps` (5), `seed` (0), `scorer` (path of a trained
scorer, default programs/tasklama/scorer.npz).
"""
from __future__ import annotations

import random
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from decomp.programs.tasklama.taskgraph.data import linear, without_cycles
from decomp.programs.tasklama.taskgraph.metrics import valid_edge


_NUMBERED = re.compile(r"^\s*(?:\d+\s*[.)]|[-*•])\s*(.*\S)\s*$")
DEFAULT_SCORER = Path(__file__).resolve().parent / "scorer.npz"


# ---------------------------------------------------------------- steps
def parse_steps(text: Any) -> list[str]:
    """Steps from a numbered (or bulleted) list; other lines end the list once it has begun.

    A list already given is cleaned the same way (strings kept, duplicates dropped)."""
    if isinstance(text, list):
        lines = [str(t) for t in text if isinstance(t, (str, int, float))]
        return _unique(s.strip() for s in lines if s.strip())
    steps: list[str] = []
    for line in str(text or "").splitlines():
        match = _NUMBERED.match(line)
        if match:
            steps.append(match.group(1))
        elif steps and line.strip():
            break
    return _unique(steps)


def _unique(steps) -> list[str]:
    seen, out = set(), []
    for step in steps:
        key = " ".join(step.lower().rstrip(" .;!").split())
        if key and key not in seen:
            seen.add(key)
            out.append(step)
    return out


def numbered(values: Sequence[Any]) -> list[str]:
    """A model's numbered list (the referenced answer) as steps."""
    return parse_steps(values[0] if values else "")


def samples(values: Sequence[Any]) -> list[list[str]]:
    """Each sample (a prompt handler with n > 1 answers a list) as steps."""
    found = values[0] if values else []
    return [parse_steps(s) for s in (found if isinstance(found, list) else [found])]


def merge(values: Sequence[Any], inputs: Mapping[str, Any]) -> list[str]:
    """MultSeq: the first sample's steps, then each other sample's steps that are not near
    duplicates (cosine >= threshold) of a step already kept."""
    return _merged(samples(values), float(inputs.get("threshold", 0.8)))


def _merged(sequences: list[list[str]], threshold: float) -> list[str]:
    kept: list[str] = []
    sim = _similarity()
    for steps in sequences:
        for step in steps:
            if not kept or sim([step], kept).max() < threshold:
                kept.append(step)
    return kept


def best(values: Sequence[Any], inputs: Mapping[str, Any]) -> list[str]:
    """S&F: the sample the trained scorer rates highest (the first on ties)."""
    ranked = _ranked(samples(values), inputs)
    return ranked[0] if ranked else []


def best_merged(values: Sequence[Any], inputs: Mapping[str, Any]) -> list[str]:
    """MultSeq + S&F: the `top` best-rated samples, merged as MultSeq merges."""
    top = int(inputs.get("top", 2))
    return _merged(_ranked(samples(values), inputs)[:top], float(inputs.get("threshold", 0.8)))


def _ranked(sequences: list[list[str]], inputs: Mapping[str, Any]) -> list[list[str]]:
    scorer = _scorer(str(inputs.get("scorer") or DEFAULT_SCORER))
    task = str(inputs.get("task", ""))
    scores = [scorer.score(_similarity(), task, steps) for steps in sequences]
    order = sorted(range(len(sequences)), key=lambda i: (-scores[i], i))
    return [sequences[i] for i in order]


@lru_cache(maxsize=1)
def _similarity():
    from decomp.programs.tasklama.taskgraph.similarity import get_similarity

    return get_similarity("use")


@lru_cache(maxsize=4)
def _scorer(path: str):
    from decomp.programs.tasklama.taskgraph.scorer import Scorer

    if not Path(path).is_file():
        raise FileNotFoundError(f"no trained scorer at {path}: train one with python -m decomp.programs.tasklama.taskgraph.scorer")
    return Scorer.load(path)


# ---------------------------------------------------------------- graphs
def chain(values: Sequence[Any]) -> list[list[int]]:
    """Linear: each step before the next, in the listed order."""
    return linear({"steps": parse_steps(values[0]) if values else []})["edges"]


def pairs(values: Sequence[Any]) -> list[str]:
    """One question per ordered pair of different steps (i, j): "must i come before j?"."""
    task, steps = values[0], parse_steps(values[1])
    return [f"Task: {task}\nStep A: {steps[i]}\nStep B: {steps[j]}" for i, j in _ordered_pairs(len(steps))]


def _ordered_pairs(n: int) -> list[tuple[int, int]]:
    """The ordered pairs (i, j) of different steps, in the order `pairs` asks about them."""
    return [(i, j) for i in range(n) for j in range(n) if i != j]


def pair_edges(values: Sequence[Any]) -> list[list[int]]:
    """Edges i -> j for the pairs answered yes (a chain-of-thought reply counts by its last
    "yes"/"no"); answers are in `pairs` order."""
    steps, answers = parse_steps(values[0]), values[1] if len(values) > 1 else []
    return [[i, j] for (i, j), answer in zip(_ordered_pairs(len(steps)), answers or []) if _says_yes(answer)]


def _says_yes(answer: Any) -> bool:
    if isinstance(answer, bool):
        return answer
    words = re.findall(r"\b(yes|no)\b", str(answer).lower())
    return bool(words) and words[-1] == "yes"


def swaps(values: Sequence[Any], inputs: Mapping[str, Any]) -> list[str]:
    """The listed order and `swaps` orders each with two random steps exchanged, as numbered
    lists (seeded by `seed` and the task, so reruns ask the same)."""
    task, steps = values[0], parse_steps(values[1])
    rng = random.Random(f"{inputs.get('seed', 0)}:{task}")
    orders = [list(range(len(steps)))]
    for _ in range(int(inputs.get("swaps", 5)) if len(steps) > 1 else 0):
        order = list(orders[0])
        i, j = rng.sample(range(len(steps)), 2)
        order[i], order[j] = order[j], order[i]
        orders.append(order)
    return [_numbered_text([steps[k] for k in order]) for order in orders]


def _numbered_text(steps: list[str]) -> str:
    return "".join(f"{n}. {s}\n" for n, s in enumerate(steps, 1))


def consensus(values: Sequence[Any], inputs: Mapping[str, Any]) -> list[list[int]]:
    """Edges A -> B when A comes before B in every one of the `top` best-scored sequences."""
    steps, sequences, scores = parse_steps(values[0]), values[1], values[2]
    position = {s: i for i, s in enumerate(steps)}
    ranked = sorted(range(len(sequences)), key=lambda k: (-float(scores[k]), k))[: int(inputs.get("top", 3))]
    orders = [[position[s] for s in parse_steps(sequences[k]) if s in position] for k in ranked]
    n = len(steps)
    return [[i, j] for i in range(n) for j in range(n)
            if i != j and orders and all(_before(order, i, j) for order in orders)]


def _before(order: list[int], i: int, j: int) -> bool:
    return i in order and j in order and order.index(i) < order.index(j)


def acyclic(values: Sequence[Any]) -> dict:
    """The graph row: the steps and the edges that lie on no cycle (every edge inside a
    strongly connected component is dropped), self-loops and bad indices removed."""
    steps, edges = parse_steps(values[0]), values[1] if len(values) > 1 else []
    clean = sorted({(e[0], e[1]) for e in edges or [] if valid_edge(e, len(steps))})
    return {"steps": steps, "edges": [[a, b] for a, b in without_cycles(clean)]}
