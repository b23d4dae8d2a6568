"""Length buckets: a coalesced batch is split into model calls of texts of similar length,
so short sentences are not padded to a long answer's length (issue 16)."""

from __future__ import annotations

import asyncio

import numpy as np

from simloop.search.embeddings import MiniLMEmbedder, length_buckets
from tests.helpers.models import CountingModel

SHORT = [f"A short sentence number {i}." for i in range(20)]
ANSWER = " ".join(f"Sentence {i} of a long extractive answer with several clauses in it." for i in range(20))


def test_buckets_keep_long_texts_apart_and_cover_every_text_once():
    texts = [*SHORT[:10], ANSWER, *SHORT[10:], ANSWER + " Residual."]
    groups = length_buckets(texts)
    assert sorted(i for g in groups for i in g) == list(range(len(texts)))
    long_ids = {10, len(texts) - 1}
    assert any(set(g) == long_ids for g in groups)  # the two long ones together, nothing else
    assert all(g == sorted(g) for g in groups)  # each call keeps the callers' order


def test_similar_texts_stay_in_one_call_up_to_64():
    assert length_buckets(SHORT) == [list(range(20))]
    sizes = [len(g) for g in length_buckets([f"text {i:03d}" for i in range(150)])]
    assert sizes == [64, 64, 22]


async def test_a_mixed_batch_is_split_by_length_and_answers_every_caller():
    model = CountingModel()
    embedder = MiniLMEmbedder(model)
    requests = [SHORT[:5], [ANSWER], SHORT[5:12]]
    results = await asyncio.gather(*(embedder.encode(r) for r in requests))
    assert embedder.stats["batches"] == 1  # one coalesced batch ...
    assert sorted(len(b) for b in model.batches) == [1, 12]  # ... encoded in two model calls
    assert embedder.stats["model_calls"] == 2
    for texts, vecs in zip(requests, results):
        np.testing.assert_allclose(vecs, CountingModel().encode(texts))


async def test_without_buckets_a_batch_is_one_model_call():
    model = CountingModel()
    embedder = MiniLMEmbedder(model, buckets=False)
    await embedder.encode([*SHORT[:5], ANSWER])
    assert [len(b) for b in model.batches] == [6]


async def test_a_turn_encodes_each_answer_sentence_once_across_answer_and_grade():
    """The extractive answer's sentences were encoded when the answer was chosen; grading
    it encodes only what is new: the whole answer and its residual."""
    from simloop.parts.generate_focus import focused_answer
    from simloop.schema import RubricQuestion
    from simloop.search import Hit
    from simloop.simulators.graders import EmbeddingGrader
    from simloop.text import sentences

    model = CountingModel()
    embedder = MiniLMEmbedder(model)
    question = "How are cello strings tuned?"
    hits = [Hit("cello", 3.0, "Cello\nThe cello strings are tuned in perfect fifths, from low C up to A, like a viola "
                              "an octave lower. Players of orchestral "
                              "repertoire keep their cello strings tuned with wooden pegs near the scroll and metal "
                              "adjusters on the tailpiece."),
            Hit("violin", 2.0, "Violin\nViolin strings are tuned in fifths as well, but higher than the cello.")]
    response, _ = await focused_answer(embedder, question, hits, utterance=question, on_topic=-1.0)
    before = embedder.stats["texts"]
    await EmbeddingGrader(embedder=embedder).explain(RubricQuestion(id="q", question=question), response)
    encoded = [t for batch in model.batches for t in batch][before:]
    assert len(sentences(response)) >= 2 and not set(sentences(response)) & set(encoded)
    assert embedder.stats["texts"] - before == 2  # the answer and its residual (the question was encoded before)
