"""The per-turn terms tried against the PTKB ranker: for each 2023 train turn, under one
encoder, the cosines the ranker pools (``S``) and each single-row term the explorations add
to it (``explore.py``, ``mpnet_cv.py``)."""

from __future__ import annotations

import math
from typing import Any

import bench_ptkb as B
import numpy as np

from simloop.parts import heuristic_rewrite, lexical_matrix, query_texts, similarities
from simloop.search import encode_fixed, open_embedder
from simloop.text import content_words, stem


def bm25(query: str, docs: list[str], k1: float = 1.2, b: float = 0.75) -> np.ndarray:
    """BM25 of each statement for ``query`` (statements as the collection), scaled to max 1."""
    toks = [[stem(w) for w in content_words(d)] for d in docs]
    q = {stem(w) for w in content_words(query)}
    avg = float(np.mean([len(t) for t in toks])) or 1.0
    df = {w: sum(w in t for t in toks) for w in q}
    out = np.array([sum(math.log(1 + (len(docs) - df[w] + 0.5) / (df[w] + 0.5)) * t.count(w) * (k1 + 1)
                        / (t.count(w) + k1 * (1 - b + b * len(t) / avg)) for w in q if w in t) for t in toks])
    return out / out.max() if out.max() > 0 else out


def generic(statements: np.ndarray) -> np.ndarray:
    """How generic each statement is in its PTKB: centred cosine to the PTKB's mean vector
    (a prior that reads only the statements; tried as a penalty, not adopted)."""
    if len(statements) < 2:
        return np.zeros(len(statements))
    centre = statements.mean(axis=0)
    closeness = statements @ (centre / np.linalg.norm(centre))
    return closeness - closeness.mean()


async def features(ts: B.TopicSet, encoder: str = "minilm") -> list[dict[str, np.ndarray]]:
    """``turn_features`` under ``encoder`` (an embedder opened for it)."""
    emb = await open_embedder(encoder=encoder)
    try:
        return await turn_features(ts, emb)
    finally:
        await emb.aclose()


async def turn_features(ts: B.TopicSet, emb: Any) -> list[dict[str, np.ndarray]]:
    """Per turn, under ``emb``'s encoder: the cosines ``S`` the ranker pools, and each
    single-row term tried against it."""
    rows = []
    for _, ptkb, u, h in ts.turns():
        extra = [" ".join([u, *h[-1:]]), h[0] if h else u, heuristic_rewrite(u, [(x, "") for x in h]),
                 " ".join([*h[-2:], u])]
        e = await similarities(emb, extra, ptkb)
        statements = np.asarray(await encode_fixed(emb, ptkb), dtype=np.float64)
        rows.append({"S": await similarities(emb, query_texts(u, h, B.TUNE_HISTORY), ptkb), "joined": e[0],
                     "first": e[1], "rewrite": e[2], "joined3": e[3], "bm25": bm25(u, ptkb),
                     "bm25_joined": bm25(extra[0], ptkb), "lex": lexical_matrix([u], ptkb)[0],
                     "centroid": centroid_cosine(statements, np.asarray(await emb.encode([u, *h]), dtype=np.float64)),
                     "generic": generic(statements)})
    return rows


def centroid_cosine(statements: np.ndarray, said: np.ndarray) -> np.ndarray:
    """Cosine of each statement to the mean of the user's utterances so far (the conversation's gist)."""
    centre = said.mean(axis=0)
    return statements @ (centre / np.linalg.norm(centre)) / np.linalg.norm(statements, axis=1)
