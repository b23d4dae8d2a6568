"""PTKB selection by embedding similarity (DESIGN §6: the embedding ranker)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..schema import PtkbUse
from ..search import Embedder, cosine, encode_fixed

__all__ = ["rank_ptkb_by_embedding", "DEFAULT_THRESHOLD"]

# Calibrated on all-MiniLM-L6-v2 (notes in agents/bm25_extractive.py): obviously related
# persona statements score about 0.30-0.60 against a question, unrelated ones below 0.24.
DEFAULT_THRESHOLD = 0.30


async def rank_ptkb_by_embedding(
    embedder: Embedder,
    query_text: str,
    ptkb: Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    top_k: int = 3,
) -> list[PtkbUse]:
    """The PTKB statements most similar to ``query_text``, best first.

    Only statements scoring at least ``threshold`` are kept (possibly none: most turns
    need no personal fact), at most ``top_k``.  ``index`` is 1-based as in iKAT.
    """
    if not ptkb or not query_text.strip() or top_k <= 0:
        return []
    # The statements repeat every turn of the dialogue: kept as fixed texts, never re-encoded.
    query, statements = await asyncio.gather(embedder.encode([query_text]), encode_fixed(embedder, ptkb))
    scores = cosine(query, statements)[0]
    order = sorted(range(len(ptkb)), key=lambda i: (-float(scores[i]), i))
    return [
        PtkbUse(index=i + 1, statement=ptkb[i], score=round(float(scores[i]), 4))
        for i in order[:top_k]
        if float(scores[i]) >= threshold
    ]
