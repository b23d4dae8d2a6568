"""BM25 hits read each stored passage once: later hits of the same passage reuse its parsed
text (issue 16: reading a document from Python cost as much as searching for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simloop.search import BM25Retriever, Hit, RetrievalConfig, build_index
from tests.helpers.data import DOCS, write_jsonl


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("doccache")
    out = base / "index"
    assert build_index(write_jsonl(base / "corpus.jsonl", DOCS), out, threads=1) == len(DOCS)
    return out


@pytest.mark.slow
async def test_repeated_hits_read_their_document_once_and_keep_their_own_scores(small_index: Path):
    retriever = BM25Retriever(small_index, RetrievalConfig(index=small_index))
    try:
        first = await retriever.search("cello porto", k=2)
        assert retriever.stats["doc_reads"] == 2
        again = await retriever.search("cello porto", k=2)
        other = await retriever.search("bowed string instrument cello", k=1)
        assert retriever.stats["doc_reads"] == 2  # nothing read again
        assert again == first
        assert other[0] == Hit("cello", other[0].score, DOCS[0]["contents"], "Cello")
        assert other[0].score != next(h.score for h in first if h.docid == "cello")  # the score is per query
        many = await retriever.search_many(["tofu soy", "cello"], k=1)  # batch_search hits share the cache
        assert [h[0].docid for h in many] == ["tofu", "cello"] and retriever.stats["doc_reads"] == 3
    finally:
        await retriever.aclose()


@pytest.mark.slow
async def test_a_zero_cache_reads_every_hit(small_index: Path):
    retriever = BM25Retriever(small_index, RetrievalConfig(index=small_index, doc_cache=0))
    try:
        first = await retriever.search("cello porto", k=2)
        again = await retriever.search("cello porto", k=2)
        assert again == first and retriever.stats["doc_reads"] == 4
    finally:
        await retriever.aclose()
