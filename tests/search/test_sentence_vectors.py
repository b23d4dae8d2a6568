"""Sentence vectors stored with the index (issue 16): the extractive answer's candidate
sentences are a lookup, not a MiniLM call, and the stored rows are the fresh vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simloop.search import build_index
from simloop.search.embeddings import MiniLMEmbedder, open_embedder
from simloop.search.vectors import SENTENCES_META, SentenceVectors, corpus_sentences, write_sentence_vectors
from simloop.text import sentences
from tests.helpers.data import DOCS, write_jsonl
from tests.helpers.models import CountingModel

TWO = [{"id": "a", "contents": "Cellos are tuned in fifths. Short one. The bow is strung with horsehair."},
       {"id": "b", "contents": "Cellos are tuned in fifths. Porto lies on the Douro river."}]


def test_sentences_are_split_like_hits_deduplicated_and_fragments_left_out(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", TWO)
    assert corpus_sentences([corpus]) == ["Cellos are tuned in fifths.", "The bow is strung with horsehair.",
                                          "Porto lies on the Douro river."]


async def test_stored_sentences_skip_the_model_and_other_texts_do_not(tmp_path: Path):
    stored_by = CountingModel()
    corpus = write_jsonl(tmp_path / "c.jsonl", TWO)
    assert write_sentence_vectors(tmp_path, [corpus], stored_by.encode) == 3
    model = CountingModel()
    embedder = MiniLMEmbedder(model, index=tmp_path)
    texts = ["Porto lies on the Douro river.", "A question nobody stored?"]
    vecs = await embedder.encode(texts)
    assert model.batches == [["A question nobody stored?"]] and embedder.stats["stored_hits"] == 1
    np.testing.assert_allclose(vecs, CountingModel().encode(texts), atol=1e-6)
    plain = MiniLMEmbedder(CountingModel())  # no index: everything encoded
    await plain.encode(texts)
    assert plain.stats["texts"] == 2 and plain.stats["stored_hits"] == 0


def test_broken_sentence_vectors_are_a_data_error(tmp_path: Path):
    from simloop.errors import DataFileError

    write_sentence_vectors(tmp_path, [write_jsonl(tmp_path / "c.jsonl", TWO)], CountingModel().encode)
    (tmp_path / SENTENCES_META).write_text("{not json")
    with pytest.raises(DataFileError, match="sentence vectors"):
        SentenceVectors.open(tmp_path)


@pytest.mark.slow
async def test_an_index_built_with_embeddings_serves_real_minilm_sentence_vectors(tmp_path: Path):
    index = tmp_path / "index"
    build_index(write_jsonl(tmp_path / "c.jsonl", DOCS), index, threads=1, embeddings=True)
    said = [s for d in DOCS for s in sentences(d["contents"])]
    stored = await open_embedder(index=index)
    fresh = await open_embedder()
    try:
        a, b = await stored.encode(said), await fresh.encode(said)
        assert stored.stats["stored_hits"] == len(said) and stored.stats["texts"] == 0
        assert float((a * b).sum(axis=1).min()) > 0.9999  # the same vectors, up to rounding
    finally:
        await stored.aclose()
        await fresh.aclose()
