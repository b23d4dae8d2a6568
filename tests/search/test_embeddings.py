"""Sentence embeddings: the real offline MiniLM, and the coalescing/caching machinery."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from simloop.errors import RetrievalError
from simloop.search.embeddings import Embedder, MiniLMEmbedder, cosine, open_embedder
from tests.helpers.models import CountingModel


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
    embedder = await open_embedder()
    assert isinstance(embedder, Embedder) and embedder.dim == 384
    try:
        vecs = await embedder.encode([
            "How do I train for my first marathon?",
            "I signed up for a long-distance running race in October.",
            "The recipe needs two cups of flour and an egg.",
        ])
    finally:
        await embedder.aclose()
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = cosine(vecs[:1], vecs[1:])[0]
    assert sims[0] > sims[1] + 0.2


@pytest.mark.slow
async def test_minilm_concurrent_calls_coalesce_and_match_single_calls():
    shared = await open_embedder()
    await shared.aclose()
    embedder = MiniLMEmbedder(shared.load())  # same model, fresh counters and cache
    texts = [f"sentence number {i} about sharks and whales" for i in range(12)]
    together = await asyncio.gather(*(embedder.encode([t]) for t in texts))
    assert embedder.stats["batches"] == 1
    alone = await MiniLMEmbedder(shared.load()).encode(texts[:1])
    np.testing.assert_allclose(together[0], alone, atol=1e-4)


async def test_a_closed_embedder_stops_its_thread_and_refuses_work():
    import threading

    def workers() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("simloop-embed")}

    before = workers()
    embedders = [MiniLMEmbedder(CountingModel()) for _ in range(3)]  # three runs, one after another
    for embedder in embedders:
        await embedder.encode(["warm"])
        await embedder.aclose()
        await embedder.aclose()  # idempotent
    await asyncio.sleep(0.05)
    assert workers() <= before  # nothing leaked (earlier tests' embedders may still be open)
    with pytest.raises(RetrievalError, match="closed"):
        await embedders[0].encode(["again"])


@pytest.mark.slow
async def test_context_owns_and_closes_its_embedder():
    """Each run's Context makes its own embedder and closes it."""
    from simloop.config import RunConfig
    from simloop.run.plugins import Context

    ctxs = [Context(RunConfig()) for _ in range(2)]
    embedders = [await ctx.embedder() for ctx in ctxs]
    assert embedders[0] is not embedders[1]
    assert await ctxs[0].embedder() is embedders[0]  # shared inside a run
    for ctx, embedder in zip(ctxs, embedders):
        await embedder.encode(["hello"])
        await ctx.aclose()
        with pytest.raises(RetrievalError):
            await embedder.encode(["hello again"])


# ----------------------------------------------------------------------------- fixed texts and passages


async def test_fixed_texts_outlive_the_lru():
    model = CountingModel()
    embedder = MiniLMEmbedder(model, cache_size=2)
    await embedder.encode(["ptkb 1", "ptkb 2"], fixed=True)
    await embedder.encode(["u1", "u2", "u3"])  # would have evicted both from a plain LRU of 2
    await embedder.encode(["ptkb 2", "ptkb 1", "u3"])
    assert model.batches == [["ptkb 1", "ptkb 2"], ["u1", "u2", "u3"]]


def _store(tmp_path, docs: dict[str, str], model: CountingModel):
    from simloop.search.vectors import PassageVectors, write_vectors

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(f'{{"id": "{d}", "contents": "{t}"}}\n' for d, t in docs.items()))
    assert write_vectors(tmp_path, [corpus], model.encode) == len(docs)
    return PassageVectors.open(tmp_path)


async def test_passages_come_from_the_stored_vectors_when_their_text_matches(tmp_path):
    from simloop.search.embeddings import encode_passages

    stored_by = CountingModel()
    store = _store(tmp_path, {"a": "alpha text", "b": "beta text"}, stored_by)
    assert len(store) == 2 and store.lookup("a", "changed text") is None
    model = CountingModel()
    embedder = MiniLMEmbedder(model, index=lambda: tmp_path)
    # "b" is stored for another text, "c" not at all: only those two are encoded
    vecs = await encode_passages(embedder, ["a", "b", "c"], ["alpha text", "beta, edited", "gamma"])
    assert model.batches == [["beta, edited", "gamma"]] and embedder.stats["stored_hits"] == 1
    np.testing.assert_allclose(vecs, stored_by.encode(["alpha text", "beta, edited", "gamma"]), atol=1e-6)
    await encode_passages(embedder, ["a", "b", "c"], ["alpha text", "beta, edited", "gamma"])
    assert len(model.batches) == 1  # the encoded ones are kept by docid for later turns


async def test_broken_vector_files_are_a_data_error(tmp_path):
    from simloop.errors import DataFileError
    from simloop.search.vectors import META_FILE, PassageVectors

    _store(tmp_path, {"a": "alpha"}, CountingModel())
    (tmp_path / META_FILE).write_text("{not json")
    with pytest.raises(DataFileError, match="rebuild with --embeddings"):
        PassageVectors.open(tmp_path)
