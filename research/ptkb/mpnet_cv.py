"""The earlier families re-run on the default ranker's encoder, all-mpnet-base-v2, on 2023 train ONLY.

``explore.py --mpnet`` runs this (issue 12).  The alternatives of
``explore.py`` and ``--signals`` were judged against the MiniLM ranker; a family
that lost there may still help MPNet, whose cosines sit on another scale.  Two kinds:

- a per-turn term joined to the ranker's pooled score (``Term``): added, max-pooled or
  subtracted with a weight: the utterance joined with the previous one (``joined``) or the
  previous two (``joined3``), the conversation's first utterance, the heuristic rewrite, BM25
  over the statements (of the utterance or the joined query), content-word overlap
  (``lex``), cosine to the centroid of the user's utterances so far, the generic-statement
  prior (subtracted);
- a per-utterance signal mixed into the cosines before the history pooling, as
  ``signals_cv.py`` does (``Signal``): clause-level matching, content words only, and
  late interaction (MaxSim) on MPNet's own contextual token vectors (``MPNetTokens``).

Judged as ``context_cv.py`` judges (leave one conversation out; every family starts
with the plain ranker's history grid).  The bar, fixed before measuring: a family is worth
adopting only if its CV figure beats the plain MPNet ranker's by >= 0.015 and it wins at
least as many held-out conversations as it loses.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import bench_ptkb as B
import numpy as np
from context_cv import judge_families
from features import turn_features
from signals_cv import MIX, Signal, clause_features, content_text_features, token_features, token_record

from simloop.parts import query_texts
from simloop.search import load_mpnet, open_embedder

ENCODER = "mpnet"
TOKEN_HISTORY = 6  # utterances the signals read: the current one and 5 back (the ranker pools 4 back)
# around MPNet's 0.6 / 0.5
HISTORY = [(hw, d) for hw, d in itertools.product((0.4, 0.5, 0.6, 0.7, 0.8), (0.3, 0.5, 0.7))]
TERMS = {  # term -> (modes, weights)
    "joined": (("add", "max"), (0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)),
    "joined3": (("add", "max"), (0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)),
    "first": (("add",), (0.1, 0.2, 0.3)),
    "rewrite": (("add", "max"), (0.2, 0.5, 0.8, 1.0)),
    "bm25": (("add",), (0.05, 0.1, 0.2, 0.3)),
    "bm25_joined": (("add",), (0.05, 0.1, 0.2, 0.3)),
    "lex": (("add",), (0.1, 0.2, 0.3, 0.5)),
    "centroid": (("add", "max"), (0.1, 0.2, 0.3, 0.5, 0.8)),
    "generic": (("sub",), (0.25, 0.5, 1.0, 1.5)),
}


@dataclass(frozen=True)
class Term(Signal):
    """The plain ranker (``history_weight``, ``decay``) with one per-turn term, ``mix`` times
    ``feats[name]``, joined to its pooled score by ``mode`` (not mixed before pooling as a
    ``Signal`` is); the defaults are MPNet's values."""

    history_weight: float = 0.6
    decay: float = 0.5
    mode: str = "add"

    def scores(self, f: Mapping[str, np.ndarray]) -> np.ndarray:
        s = Signal(self.history_weight, self.decay).scores(f)
        if not self.has_term:
            return s
        term = self.mix * f[self.name]
        return {"add": s + term, "max": np.maximum(s, term), "sub": s - term}[self.mode]


class MPNetTokens:
    """MPNet's contextual token vectors, from the shipped encoder (``tokens`` as
    ``signals_cv.TokenModel`` gives MiniLM's: unit vectors without <s>/</s>, a
    content-token mask, each token's whole word)."""

    def __init__(self, model: Any = None) -> None:
        self.model = model if model is not None else load_mpnet()  # a run's loaded SentenceModel, or a fresh load
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        if text not in self._cache:
            enc = self.model.tokenizer.encode(text)
            ids, mask, types = (np.array([x]) for x in (enc.ids, enc.attention_mask, enc.type_ids))
            self._cache[text] = token_record(text, enc, self.model.model(ids, mask, types)[0])
        return self._cache[text]


async def features(ts: B.TopicSet) -> list[dict[str, np.ndarray]]:
    """Per turn: the single-row terms (``features.turn_features`` on MPNet's vectors) and
    the per-utterance signals of ``signals_cv`` (token signals over the last
    ``TOKEN_HISTORY`` utterances: the shipped ranker reads 4)."""
    embedder = await open_embedder(encoder=ENCODER)  # one model load for every signal
    try:
        rows = await turn_features(ts, embedder)
        tm = MPNetTokens(embedder.load())
        for row, (_, ptkb, u, h) in zip(rows, ts.turns()):
            texts = query_texts(u, h, TOKEN_HISTORY)
            row["S"] = row["S"][: len(texts)]
            row.update(await clause_features(embedder, texts, ptkb))
            row.update(await content_text_features(embedder, texts, ptkb))
            row.update(token_features(tm, texts, ptkb))
        return rows
    finally:
        await embedder.aclose()


def families(signals: list[str]) -> dict[str, list]:
    """Each family starts with the plain ranker's history grid, so it can always choose "no term"."""
    plain = [Term(hw, d) for hw, d in HISTORY]
    out: dict[str, list] = {"plain MPNet ranker": plain}
    for name, (modes, weights) in TERMS.items():
        out[f"term {name}"] = plain + [Term(hw, d, name, w, m)
                                        for (hw, d), m, w in itertools.product(HISTORY, modes, weights)]
    for name in signals:
        out[f"signal {name}"] = plain + [Signal(hw, d, name, a) for (hw, d), a in itertools.product(HISTORY, MIX)]
    return out


def explore_mpnet(ts: B.TopicSet) -> int:
    feats = asyncio.run(features(ts))
    signals = [k for k in feats[0] if k not in TERMS and k not in ("S", "zS")]
    judge_families(ts, feats, families(signals), lambda v: v.has_term)
    return 0
