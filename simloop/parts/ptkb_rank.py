"""A no-LLM PTKB ranker that reads the dialogue so far.

CONTRACT:
    await rank_ptkb(embedder, utterance, history_utterances, ptkb, params) -> [(index, score)]
        every statement, best first, ties by index; ``index`` 1-based as in iKAT
    select_used(ranking, params) -> [index]   the statements the assistant relies on (set metrics)
    await rank_ptkb_uses(...) -> [PtkbUse]     both, as a turn's ``ptkb_provenance``

The score of statement s at turn t, with c_j = cosine(s, user utterance t-j) under the
ranker's encoder (``encoder``: all-mpnet-base-v2 by default; ``"minilm"`` is the fast ranker,
about a sixth of the CPU, with its own values in ``ENCODER_DEFAULTS``):

    score(s) = max( c_0 , history_weight * max_{j>=1} decay**(j-1) * c_j )

The current utterance decides, and a statement that matched an earlier user utterance well
keeps a discounted claim: iKAT relevance is sticky ("Which one is closest to me?" needs the
statement the previous turn was about).  Max-pooling, not a weighted sum, because a sum lets
a vague utterance drown in its history.  An optional lexical term (content-word overlap,
``lexical_scores``) is added to each c_j with ``lexical_weight``.

``used`` keeps, of the ``used_top_k`` best statements, those scoring at least
``used_threshold`` and within ``used_gap`` of the turn's best score, and at least
``used_min`` of them: a turn with one clear winner uses one statement, a turn where three
statements score alike uses all three.

Defaults (all-mpnet-base-v2): history_weight 0.6, decay 0.5, used = the top 3 within 0.175 of
the turn's best, no floor.  MiniLM: history_weight 0.5, decay 0.2, used = the top 3 within
0.175 of the best and >= 0.05, at least one.  Both were chosen on the iKAT 2023 train topics
only, by leave-one-conversation-out; how, and the alternatives that lost, are in
``research/ptkb/README.md``.  The ranker reads the user's utterances only, never gold
responses, so a replay shows it what a live dialogue would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

import numpy as np

from ..schema import PtkbUse
from ..search import Embedder, cosine, encode_fixed
from .ptkb_llm import lexical_scores

__all__ = [
    "RankParams", "DEFAULT_PARAMS", "MINILM_PARAMS", "ENCODER_DEFAULTS", "rank_ptkb", "select_used", "score_statements",
    "similarities", "query_texts",
    "lexical_matrix", "order_scores", "as_uses", "rank_ptkb_uses", "ranker_embedder",
]


@dataclass(frozen=True)
class RankParams:
    """Ranker and ``used`` parameters; the defaults are all-mpnet-base-v2's (module docstring)."""

    history_weight: float = 0.6
    decay: float = 0.5
    lexical_weight: float = 0.0
    max_history: int = 4  # the window both encoders' values were chosen with (MiniLM: decay**4 < 0.002)
    used_threshold: float = -0.2  # no floor: the gap decides
    used_top_k: int = 3
    used_min: int = 0
    used_gap: float = 0.175  # 2.0: no gap rule (scores are cosines plus a small lexical term)
    encoder: str = "mpnet"  # whose cosines: "mpnet", or "minilm" (~1/6 of the CPU, worse: ENCODER_DEFAULTS)

    def __post_init__(self) -> None:
        if self.encoder not in ENCODER_DEFAULTS:
            raise ValueError(f"encoder must be {' or '.join(map(repr, ENCODER_DEFAULTS))}, got {self.encoder!r}")
        for name in ("history_weight", "decay", "lexical_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {getattr(self, name)!r}")
        if self.max_history < 0 or self.used_top_k < 0 or not 0 <= self.used_min <= max(self.used_top_k, 0):
            raise ValueError("need max_history >= 0, used_top_k >= 0 and 0 <= used_min <= used_top_k")
        if not -1.0 <= self.used_threshold <= 2.0:
            raise ValueError(f"used_threshold must be between -1 and 2, got {self.used_threshold!r}")
        if not 0.0 <= self.used_gap <= 2.0:
            raise ValueError(f"used_gap must be between 0 and 2, got {self.used_gap!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> RankParams:
        """Parameters from agent params (unknown names rejected by name); what they leave out
        is the chosen encoder's own default (``ENCODER_DEFAULTS``)."""
        values = dict(values or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown PTKB ranker parameter {unknown[0]!r}; known: {', '.join(sorted(known))}")
        defaults = ENCODER_DEFAULTS.get(values.get("encoder", cls.encoder), {})
        return cls(**{**defaults, **values})  # a bad encoder: __post_init__ says so


# Each encoder's values (module docstring): the encoders' cosines sit on different scales, so
# MPNet's values would not fit MiniLM.  The dataclass defaults are MPNet's.
ENCODER_DEFAULTS: dict[str, dict[str, Any]] = {
    "mpnet": {},
    "minilm": {"encoder": "minilm", "history_weight": 0.5, "decay": 0.2, "used_threshold": 0.05, "used_min": 1},
}
DEFAULT_PARAMS = RankParams()
MINILM_PARAMS = RankParams.from_mapping({"encoder": "minilm"})


class EncoderSource(Protocol):
    """What hands out the run's embedder per encoder (``minilm``, ``mpnet``): the plugin ``Context``."""

    async def embedder(self, encoder: str) -> Embedder: ...


async def ranker_embedder(ctx: EncoderSource, params: RankParams | None = None) -> Embedder:
    """The run's embedder for the ranker's encoder (``ctx``: a run ``Context``)."""
    return await ctx.embedder((params or DEFAULT_PARAMS).encoder)


def lexical_matrix(texts: Sequence[str], ptkb: Sequence[str]) -> np.ndarray:
    """(len(texts), len(ptkb)) content-word overlap: share of a statement's words each text uses."""
    cands = [PtkbUse(index=i + 1, statement=s) for i, s in enumerate(ptkb)]
    rows = []
    for text in texts:
        overlap = lexical_scores(cands, text)
        rows.append([overlap[c.index] for c in cands])
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), len(ptkb))


def score_statements(sims: np.ndarray, params: RankParams = DEFAULT_PARAMS) -> np.ndarray:
    """Scores per statement from per-utterance similarities.

    ``sims`` is (1 + h, n): row 0 the current utterance, row j the utterance j turns back
    (cosine plus any lexical term).  Pure numpy, so the tuning grid can reuse it.
    """
    sims = np.atleast_2d(np.asarray(sims, dtype=np.float64))
    current = sims[0]
    back = sims[1: 1 + params.max_history]
    if len(back) == 0 or params.history_weight == 0.0:
        return current
    discount = params.decay ** np.arange(len(back), dtype=np.float64)
    remembered = (discount[:, None] * back).max(axis=0)
    return np.maximum(current, params.history_weight * remembered)


def order_scores(scores: Sequence[float] | np.ndarray) -> list[tuple[int, float]]:
    """``(index, score)`` best first, scores rounded to 4 places, ties by index."""
    rounded = [round(float(s), 4) for s in scores]
    order = sorted(range(len(rounded)), key=lambda i: (-rounded[i], i))
    return [(i + 1, rounded[i]) for i in order]


def query_texts(utterance: str, history_utterances: Sequence[str], max_history: int) -> list[str]:
    """The current utterance, then the earlier ones newest first (row j = j turns back)."""
    recent = list(history_utterances)[-max_history:] if max_history > 0 else []
    return [utterance, *reversed(recent)]


async def similarities(embedder: Embedder, texts: Sequence[str], ptkb: Sequence[str]) -> np.ndarray:
    """(len(texts), len(ptkb)) cosines under the embedder (the ranker's encoder) in one encode
    call (statements and earlier utterances usually come from the embedder's cache)."""
    if not texts or not ptkb:
        return np.zeros((len(texts), len(ptkb)), dtype=np.float32)
    said, statements = await asyncio.gather(embedder.encode(list(texts)), encode_fixed(embedder, ptkb))
    return cosine(said, statements)


async def rank_ptkb(
    embedder: Embedder,
    utterance: str,
    history_utterances: Sequence[str],
    ptkb: Sequence[str],
    params: RankParams | None = None,
) -> list[tuple[int, float]]:
    """Every PTKB statement as ``(index, score)``, best first (ties by index).

    ``history_utterances`` are the earlier raw user utterances, oldest first.
    """
    params = params or DEFAULT_PARAMS
    if not ptkb:
        return []
    texts = query_texts(utterance, history_utterances, params.max_history)
    sims = await similarities(embedder, texts, ptkb)
    if params.lexical_weight:
        sims = sims + params.lexical_weight * lexical_matrix(texts, ptkb)
    return order_scores(score_statements(sims, params))


def select_used(ranking: Sequence[tuple[int, float]], params: RankParams | None = None) -> list[int]:
    """Indices the assistant relies on, best first: of the top ``used_top_k``, those scoring
    at least ``used_threshold`` and within ``used_gap`` of the turn's best score, topped up
    to ``used_min`` from the head of the ranking."""
    params = params or DEFAULT_PARAMS
    head = list(ranking[: params.used_top_k])
    floor = max(params.used_threshold, head[0][1] - params.used_gap) if head else params.used_threshold
    used = [i for i, score in head if score >= floor]
    if len(used) < params.used_min:
        used = [i for i, _ in head[: params.used_min]]
    return used


def as_uses(ranking: Sequence[tuple[int, float]], ptkb: Sequence[str], used: Sequence[int]) -> list[PtkbUse]:
    """The ranking as a turn's ``ptkb_provenance``: every statement, best first, ``used``
    set on the chosen ones."""
    chosen = set(used)
    return [PtkbUse(index=i, statement=ptkb[i - 1], score=score, used=i in chosen) for i, score in ranking]


async def rank_ptkb_uses(
    embedder: Embedder,
    utterance: str,
    history_utterances: Sequence[str],
    ptkb: Sequence[str],
    params: RankParams | None = None,
) -> list[PtkbUse]:
    """``rank_ptkb`` + ``select_used`` as a turn's ``ptkb_provenance``; what the no-LLM
    agents record (``[p for p in uses if p.used]`` are the statements they rely on)."""
    params = params or DEFAULT_PARAMS
    ranking = await rank_ptkb(embedder, utterance, history_utterances, ptkb, params)
    return as_uses(ranking, ptkb, select_used(ranking, params))
