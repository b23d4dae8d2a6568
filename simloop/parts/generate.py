"""Offline extractive generation: the best sentences of the top passages.

No LLM: sentences are scored by the query terms they share (weighted by rarity among
the candidate sentences; terms that only come from the context, such as rewrite
additions, count less than the user's own words), with a small bonus for higher-ranked
passages and for lead sentences (encyclopedic passages define their subject first).
Sentences far below the best one are left out even when words remain, so a short
answer stays on topic.  The chosen sentences are put back in reading order: passage
rank, then position in the passage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..search import Hit
from ..text import content_words, sentences, stem, word_count

__all__ = ["extractive_answer", "scored_sentences", "compose", "leans_on_previous", "Sentence", "NO_ANSWER",
           "NOTHING_NEW"]

NO_ANSWER = "I could not find anything about that in my sources."
# What an answer says when all it found was said already in the dialogue (``focused_answer``).
NOTHING_NEW = "I found nothing on that beyond what I already said."
_MIN_WORDS = 4  # shorter fragments are titles or list debris, not answers
_DUPLICATE = 0.7  # word-overlap ratio above which two sentences say the same thing
_CONTEXT_WEIGHT = 0.3  # a context-only term is weaker evidence than the user's own word
_RELATIVE_FLOOR = 0.4  # keep sentences scoring at least this share of the best one
# A sentence opening with a pronoun leans on the one before it; alone it reads oddly.
_LEANING = re.compile(r"^(he|she|it|its|they|their|this|these|those|that|his|her)\b", re.I)
_LEANING_FACTOR = 0.6


@dataclass
class Sentence:
    rank: int  # 0-based passage rank
    position: int
    docid: str
    text: str
    terms: frozenset[str]
    score: float = 0.0


def leans_on_previous(c: Sentence) -> bool:
    """Does the sentence open on a pronoun for its passage's subject ("He played 20 seasons
    ...")?  Read out of its passage, the pronoun would stand for whatever came before it."""
    return c.position > 0 and bool(_LEANING.match(c.text))


def _heading(hit: Hit, position: int, text: str) -> bool:
    """Is ``text`` the passage's title line?  A corpus line such as "History of computing
    hardware" has four words but is no sentence: glued into an answer it reads as debris."""
    if text == hit.title.strip():
        return True
    return position == 0 and "\n" in hit.text and not text.endswith((".", "!", "?", '"', ")"))


def _candidates(hits: Sequence[Hit], passages: int) -> list[Sentence]:
    out = []
    for rank, hit in enumerate(hits[:passages]):
        for position, text in enumerate(sentences(hit.text)):
            if word_count(text) >= _MIN_WORDS and not _heading(hit, position, text):
                terms = frozenset(stem(w) for w in content_words(text))
                out.append(Sentence(rank, position, hit.docid, text, terms))
    return out


def _score(cands: list[Sentence], query_terms: set[str], focus_terms: set[str]) -> None:
    n = len(cands)
    df = {t: sum(1 for c in cands if t in c.terms) for t in query_terms}
    weight = {t: math.log(1 + n / (1 + df[t])) * (1.0 if t in focus_terms else _CONTEXT_WEIGHT) for t in query_terms}
    for c in cands:
        overlap = sum(weight[t] for t in query_terms & c.terms)
        prior = 0.3 / (1 + c.rank) + (0.2 if c.position <= 1 else 0.0)
        c.score = overlap + (prior if overlap else prior / 10)
        if leans_on_previous(c):
            c.score *= _LEANING_FACTOR


def _similar(a: Sentence, b: Sentence) -> bool:
    small = min(len(a.terms), len(b.terms)) or 1
    return len(a.terms & b.terms) / small > _DUPLICATE


def _select(ranked: list[Sentence], max_words: int) -> list[Sentence]:
    """``ranked`` is best first."""
    chosen: list[Sentence] = []
    budget = max_words
    floor = ranked[0].score * _RELATIVE_FLOOR
    for c in ranked:
        if c.score < floor:
            break
        size = word_count(c.text)
        if size <= budget and not any(_similar(c, d) for d in chosen):
            chosen.append(c)
            budget -= size
    return chosen


def _clip(text: str, max_words: int) -> str:
    parts = text.split()
    return text if len(parts) <= max_words else " ".join(parts[:max_words]).rstrip(",;:") + "…"


def scored_sentences(query: str, hits: Sequence[Hit], passages: int = 5, focus: str | None = None) -> list[Sentence]:
    """Every candidate sentence of the top ``passages`` hits with its lexical score, best
    first (ties: passage rank, position).  ``focus``: see ``extractive_answer``."""
    cands = _candidates(hits, passages)
    if not cands:
        return []
    terms = {stem(w) for w in content_words(query)}
    focus_terms = {stem(w) for w in content_words(focus)} if focus is not None else terms
    _score(cands, terms | focus_terms, focus_terms)
    return sorted(cands, key=lambda c: (-c.score, c.rank, c.position))


def compose(cands: list[Sentence], max_words: int) -> tuple[str, list[str]]:
    """(text, cited docids) of the best ``cands`` (best first) within ``max_words``, in
    reading order; the best one clipped when every sentence is longer than the budget."""
    if not cands:
        return NO_ANSWER, []
    chosen = _select(cands, max_words)
    if not chosen:  # every sentence is longer than the budget: cut the best one
        best = cands[0]
        chosen = [Sentence(best.rank, best.position, best.docid, _clip(best.text, max_words), best.terms, best.score)]
    chosen.sort(key=lambda c: (c.rank, c.position))
    used = list(dict.fromkeys(c.docid for c in chosen))
    return " ".join(c.text for c in chosen), used


def extractive_answer(
    query: str, hits: Sequence[Hit], max_words: int = 220, passages: int = 5, focus: str | None = None
) -> tuple[str, list[str]]:
    """(response, cited docids): the best sentences from the top ``passages`` hits,
    at most ``max_words`` words, and the docids they came from in rank order.

    ``focus`` is the user's own utterance when ``query`` is a rewrite of it: its terms
    count fully, the other query terms less.  Without it every query term counts fully.
    """
    return compose(scored_sentences(query, hits, passages, focus), max_words)
