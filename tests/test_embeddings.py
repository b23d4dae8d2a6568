"""Sentence embeddings: the real offline MiniLM, and the coalescing/caching machinery."""

from __future__ import annotations

import asyncio
from typing import Sequence

import numpy as np
import pytest

from simloop.search.embeddings import Embedder, MiniLMEmbedder, cosine, get_embedder


class CountingModel:
    """Stands in for SentenceTransformer: deterministic unit vectors, counts calls."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.batches.append(list(texts))
        rows = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % 2**32)
            v = rng.standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


async def test_concurrent_encodes_share_one_model_batch():
    model = CountingModel()
    embedder = MiniLMEmbedder(model)
    texts = [[f"text {i}", f"shared {i % 3}"] for i in range(20)]
    results = await asyncio.gather(*(embedder.encode(t) for t in texts))
    assert len(model.batches) == 1
    assert len(model.batches[0]) == len({t for pair in texts for t in pair})  # deduplicated
    for pair, vecs in zip(texts, results):
        assert vecs.shape == (2, 384) and vecs.dtype == np.float32
        np.testing.assert_allclose(vecs, model.encode(pair))


async def test_cache_skips_repeated_texts_and_respects_its_size():
    model = CountingModel()
    embedder = MiniLMEmbedder(model, cache_size=3)
    await embedder.encode(["a", "b", "c"])
    again = await embedder.encode(["c", "b", "a", "b"])
    assert len(model.batches) == 1 and again.shape == (4, 384)
    np.testing.assert_array_equal(again[1], again[3])
    await embedder.encode(["d"])  # evicts "c", the least recently used
    await embedder.encode(["a", "c"])
    assert model.batches[-1] == ["c"]
    assert embedder.stats["cache_hits"] == 5


async def test_max_batch_splits_between_requests():
    model = CountingModel()
    embedder = MiniLMEmbedder(model, max_batch=4)
    await asyncio.gather(*(embedder.encode([f"x{i}", f"y{i}"]) for i in range(5)))
    assert [len(b) for b in model.batches] == [4, 4, 2]


async def test_empty_input():
    out = await MiniLMEmbedder(CountingModel()).encode([])
    assert out.shape == (0, 384) and out.dtype == np.float32


@pytest.mark.slow
async def test_minilm_vectors_are_normalised_and_meaningful():
    embedder = await get_embedder()
    assert isinstance(embedder, Embedder) and embedder.dim == 384
    assert await get_embedder() is embedder  # loaded once per process
    vecs = await embedder.encode([
        "How do I train for my first marathon?",
        "I signed up for a long-distance running race in October.",
        "The recipe needs two cups of flour and an egg.",
    ])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = cosine(vecs[:1], vecs[1:])[0]
    assert sims[0] > sims[1] + 0.2


@pytest.mark.slow
async def test_minilm_concurrent_calls_coalesce_and_match_single_calls():
    shared = await get_embedder()
    embedder = MiniLMEmbedder(shared.load())  # same model, fresh counters and cache
    texts = [f"sentence number {i} about sharks and whales" for i in range(12)]
    together = await asyncio.gather(*(embedder.encode([t]) for t in texts))
    assert embedder.stats["batches"] == 1
    alone = await MiniLMEmbedder(shared.load()).encode(texts[:1])
    np.testing.assert_allclose(together[0], alone, atol=1e-4)
