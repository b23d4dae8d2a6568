"""Fakes for the seams (DESIGN §10.8): an in-memory retriever and a hashing embedder.

They implement the real protocols so unit tests and the engine-overhead benchmark can
run the full loop without the JVM or MiniLM.  End-to-end tests never use them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..schema import Hit

__all__ = ["HashEmbedder", "MemoryRetriever"]

_WORD = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class MemoryRetriever:
    """BM25 over a small in-memory corpus of (docid, text) pairs."""

    def __init__(self, docs: Iterable[tuple[str, str]], k1: float = 0.9, b: float = 0.4):
        self.docs = list(docs)
        self._tf = [Counter(_tokens(text)) for _, text in self.docs]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = (sum(self._len) / len(self._len)) if self._len else 1.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self.docs)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.k1, self.b = k1, b
        self.queries: list[str] = []

    async def search(self, query: str, k: int = 10) -> list[Hit]:
        self.queries.append(query)
        terms = set(_tokens(query))
        scored = []
        for i, tf in enumerate(self._tf):
            s = 0.0
            for t in terms & tf.keys():
                f = tf[t]
                norm = f + self.k1 * (1 - self.b + self.b * self._len[i] / self._avg)
                s += self._idf[t] * f * (self.k1 + 1) / norm
            if s > 0:
                scored.append((s, i))
        scored.sort(key=lambda x: (-x[0], x[1]))
        return [Hit(self.docs[i][0], round(s, 4), self.docs[i][1]) for s, i in scored[:k]]

    async def aclose(self) -> None:
        return None


class HashEmbedder:
    """Bag-of-words vectors hashed into ``dim`` buckets: texts sharing words are similar."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for t in _tokens(text):
            h = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=4).digest(), "little")
            v[h % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vec(t) for t in texts])
