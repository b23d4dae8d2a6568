"""Retrieval parts: multi-query fusion, embedding re-ranking, passages in prompts.

- ``multi_query``: several queries in one batch, fused by reciprocal rank (RRF, k=60),
  one entry per docid;
- ``embedding_rerank``: MiniLM bi-encoder cosine between a query text and the candidates,
  optionally blended with a user-profile similarity and the first-stage rank (ACMS's
  personalised document score).  The published pipelines re-rank with cross-encoders
  (ms-marco-MiniLM, BGE); none ships offline here, so a bi-encoder stands in;
- ``format_passage`` / ``fit_passages``: how a passage appears in a prompt, and how many
  fit a token budget, counted the same way as every context (``simloop.text.count_tokens``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..schema import Passage
from ..search import RERANK_CHARS, Embedder, Hit, Retriever, cosine, encode_passages, passage_text
from ..text import count_tokens

__all__ = ["search_all", "rrf_fuse", "multi_query", "embedding_rerank", "format_passage", "fit_passages",
           "to_passages", "PASSAGE_CHARS", "SNIPPET_CHARS", "RERANK_CHARS", "RRF_K"]

RRF_K = 60  # the usual constant (Cormack et al. 2009): damps the head of each list
PASSAGE_CHARS = 1200  # passage text shown to a model; the demo summaries are mostly shorter
SNIPPET_CHARS = 300  # passage text kept in the transcript, as bm25_extractive does


async def search_all(retriever: Retriever, queries: Sequence[str], k: int) -> list[list[Hit]]:
    """Hits per query: one ``search_many`` batch when the retriever has it."""
    if not queries:
        return []
    many = getattr(retriever, "search_many", None)
    if many is not None:
        return await many(list(queries), k)
    return list(await asyncio.gather(*(retriever.search(q, k) for q in queries)))


def rrf_fuse(rankings: Sequence[Sequence[Hit]], k: int = RRF_K, limit: int | None = None) -> list[Hit]:
    """Reciprocal-rank fusion: score(d) = sum over lists of 1 / (k + rank); ties keep first-seen order."""
    fused: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits in rankings:
        for rank, hit in enumerate(hits, 1):
            fused[hit.docid] = fused.get(hit.docid, 0.0) + 1.0 / (k + rank)
            first.setdefault(hit.docid, hit)
    order = sorted(fused, key=lambda d: -fused[d])  # stable: first-seen wins ties
    out = [replace(first[d], score=round(fused[d], 6)) for d in order]
    return out[:limit] if limit is not None else out


async def multi_query(retriever: Retriever, queries: Sequence[str], k_per_query: int,
                      limit: int | None = None) -> list[Hit]:
    """Search every distinct query, then fuse and de-duplicate by docid."""
    distinct = list(dict.fromkeys(" ".join(q.split()) for q in queries if q.strip()))
    return rrf_fuse(await search_all(retriever, distinct, k_per_query), limit=limit)


async def embedding_rerank(embedder: Embedder, query: str, hits: Sequence[Hit], top_n: int | None = None, *,
                           profile: str | None = None, profile_weight: float = 0.0, prior_weight: float = 0.0,
                           chars: int = RERANK_CHARS) -> list[Hit]:
    """Hits re-scored by ``(1 - pw - rw) * cos(query, doc) + pw * cos(profile, doc) + rw * prior``
    (prior = 1 for the first-stage top hit down to 0 for the last), best first.

    Passage vectors come from the index when it stores them (``index build --embeddings``)
    or from earlier turns; only the query (and profile) and unseen passages are encoded."""
    if not hits:
        return []
    texts = [passage_text(h.title, h.text, chars) for h in hits]
    heads = [query, profile] if profile and profile_weight > 0 else [query]
    head_vecs, doc_vecs = await asyncio.gather(embedder.encode(heads),
                                               encode_passages(embedder, texts))
    sims = cosine(head_vecs, doc_vecs)
    n = len(hits)
    prior = np.linspace(1.0, 0.0, n) if n > 1 else np.ones(1)
    pw = profile_weight if len(heads) == 2 else 0.0
    score = (1 - pw - prior_weight) * sims[0] + (pw * sims[1] if pw else 0.0) + prior_weight * prior
    order = sorted(range(n), key=lambda i: (-float(score[i]), i))
    ranked = [replace(hits[i], score=round(float(score[i]), 4)) for i in order]
    return ranked[:top_n] if top_n is not None else ranked


def format_passage(hit: Hit, chars: int = PASSAGE_CHARS) -> str:
    """``[docid] text`` - the bracketed id is what a model cites back."""
    return f"[{hit.docid}] {' '.join(hit.text[:chars].split())}"


def fit_passages(hits: Sequence[Hit], budget_tokens: int, max_passages: int | None = None,
                 chars: int = PASSAGE_CHARS) -> list[Hit]:
    """The leading hits whose prompt form fits ``budget_tokens`` (always at least one,
    so a grounded answer has something to cite)."""
    out: list[Hit] = []
    used = 0
    for hit in hits[: max_passages if max_passages is not None else len(hits)]:
        cost = count_tokens(format_passage(hit, chars))
        if out and used + cost > budget_tokens:
            break
        out.append(hit)
        used += cost
    return out


def to_passages(hits: Sequence[Hit], used: Sequence[str] = (), snippet_chars: int = SNIPPET_CHARS) -> list[Passage]:
    """Transcript passages, ranked from 1; ``used`` marks the cited docids."""
    cited = set(used)
    return [Passage(rank=i, docid=h.docid, score=h.score, used=h.docid in cited, text=h.text[:snippet_chars])
            for i, h in enumerate(hits, 1)]
