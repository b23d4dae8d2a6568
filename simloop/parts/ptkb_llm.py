"""PTKB selection with an LLM, and ways to combine selectors (DESIGN §6).

- ``classify_ptkb_llm``: binary relevance over numbered statements (GenAIus; also the
  per-model selector of NII GtR);
- ``score_ptkb_llm``: an LLM re-ranker giving each candidate a 0-10 score (IIUoT's RankGPT);
- ``lexical_scores``: content-word overlap, a cheap third opinion for voting;
- ``vote_ptkb``: IIUoT's weighted score plus vote (eq. 1 and 2) with a dynamic threshold;
- ``union_ptkb``: NII GtR's union of two models' selections (score = share of models).

Indices are 1-based as in iKAT; whatever a model answers is checked against the PTKB,
so an out-of-range or repeated number never reaches a transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..schema import PtkbUse, Stage
from ..text import content_words, stem
from .prompts import prompt_sections

if TYPE_CHECKING:
    from ..llm import ChatModel

__all__ = [
    "format_ptkb", "uses_from_indices", "classify_ptkb_llm", "score_ptkb_llm", "lexical_scores",
    "vote_ptkb", "union_ptkb", "PtkbChoice", "PtkbScores", "ranking_from_set", "used_only",
]

_CLASSIFY_SYSTEM = (
    "You decide which facts about a user matter for the assistant's next reply. You get the user's "
    "personal knowledge base as numbered statements, the conversation so far and the user's newest "
    "message. Judge every statement on its own: it is relevant only if it helps to understand what "
    "the user means now, or to tailor the reply to their situation, needs or tastes. The newest "
    "message counts most; earlier turns only help to interpret it. Often no statement is relevant - "
    "then return an empty list. Answer with the numbers of the relevant statements only."
)
_SCORE_SYSTEM = (
    "You rate how much each numbered fact about a user matters for answering the user's request. "
    "Give every listed statement a score from 0 (irrelevant) to 10 (essential to a good, personal "
    "answer). Rate only the statements listed, by their numbers."
)


class PtkbChoice(BaseModel):
    relevant: list[int] = Field(description="numbers of the relevant statements, most relevant first; may be empty")


class _Scored(BaseModel):
    index: int = Field(description="the statement's number")
    score: int = Field(ge=0, le=10, description="0 = irrelevant, 10 = essential")


class PtkbScores(BaseModel):
    scores: list[_Scored]


def format_ptkb(ptkb: Sequence[str], indices: Sequence[int] | None = None) -> str:
    """Numbered statements ("3: I live in Lisbon."), 1-based; ``indices`` picks a subset."""
    chosen = indices if indices is not None else range(1, len(ptkb) + 1)
    return "\n".join(f"{i}: {ptkb[i - 1]}" for i in chosen if 1 <= i <= len(ptkb))


def uses_from_indices(ptkb: Sequence[str], indices: Sequence[Any], score: float | None = 1.0) -> list[PtkbUse]:
    """Valid, distinct 1-based indices as ``PtkbUse`` in the given order; others dropped."""
    out: list[PtkbUse] = []
    seen: set[int] = set()
    for raw in indices:
        try:
            i = int(raw)
        except (TypeError, ValueError):
            continue
        if 1 <= i <= len(ptkb) and i not in seen:
            seen.add(i)
            out.append(PtkbUse(index=i, statement=ptkb[i - 1], score=score))
    return out


def ranking_from_set(ptkb: Sequence[str], chosen: Sequence[PtkbUse]) -> list[PtkbUse]:
    """A set selection as a ranking (DESIGN §4): the chosen statements first, in their
    order, ``used``; then every other statement, ``used = False`` with score 0, in PTKB
    order (the selector judged them all and kept none of them)."""
    picked = [c.model_copy(update={"used": True}) for c in chosen]
    seen = {c.index for c in picked}
    rest = [PtkbUse(index=i, statement=s, score=0.0, used=False)
            for i, s in enumerate(ptkb, start=1) if i not in seen]
    return [*picked, *rest]


def used_only(uses: Sequence[PtkbUse]) -> list[PtkbUse]:
    """The statements a ranking marks ``used``, best first: what an answer relies on."""
    return [u for u in uses if u.used]


async def classify_ptkb_llm(chat: ChatModel, ptkb: Sequence[str], utterance: str, context: str = "", *,
                            stage: str = "ptkb.classify") -> tuple[list[PtkbUse], Stage]:
    """Every statement, the ones an LLM marks relevant to ``utterance`` first (``used``,
    score 1.0), the rest after them (``ranking_from_set``)."""
    if not ptkb:
        return [], Stage(name=stage)
    content = prompt_sections(utterance, context, extra=[("Personal knowledge base", format_ptkb(ptkb))])
    messages = [{"role": "system", "content": _CLASSIFY_SYSTEM}, {"role": "user", "content": content}]
    choice, st = await chat.structured(messages, PtkbChoice, stage=stage, temperature=0.0)
    return ranking_from_set(ptkb, uses_from_indices(ptkb, choice.relevant)), st


async def score_ptkb_llm(chat: ChatModel, ptkb: Sequence[str], candidates: Sequence[PtkbUse], query: str, *,
                         stage: str = "ptkb.rerank") -> tuple[dict[int, float], Stage]:
    """0-1 scores for ``candidates`` (by index); unscored candidates get 0."""
    if not candidates:
        return {}, Stage(name=stage)
    listed = format_ptkb(ptkb, [c.index for c in candidates])
    messages = [{"role": "system", "content": _SCORE_SYSTEM},
                {"role": "user", "content": f"User request:\n{query}\n\nStatements:\n{listed}"}]
    rated, st = await chat.structured(messages, PtkbScores, stage=stage, temperature=0.0)
    wanted = {c.index for c in candidates}
    scores = {i: 0.0 for i in wanted}
    for s in rated.scores:
        if s.index in wanted:
            scores[s.index] = max(scores[s.index], s.score / 10)
    return scores, st


def lexical_scores(candidates: Sequence[PtkbUse], query: str) -> dict[int, float]:
    """Share of a statement's content words (stemmed) that the query also uses."""
    q = {stem(w) for w in content_words(query)}
    out: dict[int, float] = {}
    for c in candidates:
        terms = {stem(w) for w in content_words(c.statement)}
        out[c.index] = len(q & terms) / len(terms) if terms else 0.0
    return out


def vote_ptkb(candidates: Sequence[PtkbUse], scores: Mapping[str, Mapping[int, float]],
              thresholds: Mapping[str, float], weights: Mapping[str, float], *, min_votes: int = 2,
              floor: float = 0.3, relative: float = 0.5) -> list[PtkbUse]:
    """IIUoT's decision: keep a statement when its weighted score S_rel reaches the dynamic
    threshold and at least ``min_votes`` models call it relevant (score >= their own
    threshold).  The threshold is ``max(floor, relative * best S_rel)``: it follows the
    turn, so a turn with one clearly relevant statement does not drag weak ones along.
    Kept statements come best first, with S_rel as their score."""
    total = sum(weights.get(m, 0.0) for m in scores) or 1.0
    fused: dict[int, float] = {}
    votes: dict[int, int] = {}
    for c in candidates:
        fused[c.index] = sum(weights.get(m, 0.0) * s.get(c.index, 0.0) for m, s in scores.items()) / total
        votes[c.index] = sum(1 for m, s in scores.items() if s.get(c.index, 0.0) >= thresholds.get(m, 0.5))
    if not fused:
        return []
    theta = max(floor, relative * max(fused.values()))
    kept = [c for c in candidates if fused[c.index] >= theta and votes[c.index] >= min_votes]
    kept.sort(key=lambda c: (-fused[c.index], c.index))
    return [c.model_copy(update={"score": round(fused[c.index], 4)}) for c in kept]


def union_ptkb(*selections: Sequence[PtkbUse]) -> list[PtkbUse]:
    """A ranking by the share of selections that use each statement (its score); the
    statements any selection uses are ``used``, the others follow with score 0."""
    count: dict[int, int] = {}
    first: dict[int, PtkbUse] = {}
    for sel in selections:
        for use in {u.index: u for u in sel}.values():
            count[use.index] = count.get(use.index, 0) + int(use.used)
            first.setdefault(use.index, use)
    n = len(selections) or 1
    order = sorted(count, key=lambda i: (-count[i], i))
    return [first[i].model_copy(update={"score": round(count[i] / n, 4), "used": count[i] > 0}) for i in order]
