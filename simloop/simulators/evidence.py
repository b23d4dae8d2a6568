"""Does an answer agree with the evidence the user holds?

The user holds a reference for each rubric question (an iKAT turn's gold response and
passages, a demo question's corpus summary).  An honest answer is seldom the reference
itself: an assistant paraphrases it, or extracts from other passages.  So claims are
compared sentence by sentence:

1. **align**: each answer sentence is paired with the reference sentence most like it:
   MiniLM cosine plus the share of its content words the reference sentence has.  A pair
   counts when both are high enough (``align_cos``, ``align_overlap``): the two sentences
   speak of the same thing.  An answer sentence with no partner is *unsupported*, which
   is no contradiction (an assistant may know more than the reference);
2. **compare**: an aligned pair contradicts when the answer *substitutes* something of
   the reference sentence (claims.conflicts): a negation added or taken away, a word
   swapped for its opposite, a number or a name the reference lacks standing where the
   reference sentence has another.

``check_evidence`` returns the share of the answer's sentences that contradict their partner; the
grader (graders.py) grades an answer wrong when that share is high enough.

It also reports **support**: how much of the answer is about the reference's subject
(per sentence, the best cosine with a reference sentence, and whether the sentence is
about a name the reference never mentions), which the grader's focus check reads
(``focus_share``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..text import sentences, words
from .claims import Claim, Known, claim, conflicts, core_overlap, foreign_subject, name_words

__all__ = ["Reference", "Check", "Thresholds", "prepare", "check_evidence", "pieces_of", "focus_share"]

# A reference is read in sentences, and an over-long one (a table or a list run into one
# "sentence" in a web passage) in windows of this many words; see ``pieces_of``.
_WINDOW = 40
# A pair whose answer side has every content word of the reference side (names and numbers
# aside) says one statement: any other name in it is a substitution.
_EXACT_FRAME = 0.99


@dataclass(frozen=True)
class Reference:
    """A reference cut into sentences, with what the whole of it states."""

    text: str
    question: str
    pieces: tuple[str, ...]
    claims: tuple[Claim, ...]
    known: Known  # every number and word of the reference and the question


@dataclass(frozen=True)
class Check:
    """What the comparison found for one answer."""

    sentences: int  # answer sentences compared
    aligned: int  # of them, with a partner in the reference
    contradicted: int  # of the aligned, contradicting their partner
    kinds: tuple[str, ...]  # the kinds of contradiction found, one per contradicting sentence
    support: tuple[float, ...]  # per answer sentence: best cosine with a reference sentence
    foreign: tuple[bool, ...] = ()  # per answer sentence: about a name the reference lacks (claims.foreign_subject)

    @property
    def share(self) -> float:
        """Share of the answer's sentences that contradict the reference."""
        return self.contradicted / self.sentences if self.sentences else 0.0


def pieces_of(text: str, size: int = _WINDOW) -> list[str]:
    """``text`` in sentences, each over ``size`` words cut into even runs."""
    out = []
    for s in sentences(text):
        tokens = s.split()
        if len(tokens) <= size:
            out.append(s)
            continue
        n = -(-len(tokens) // size)
        step = -(-len(tokens) // n)
        out += [" ".join(tokens[i:i + step]) for i in range(0, len(tokens), step)]
    return out


@lru_cache(maxsize=512)
def prepare(reference: str, question: str = "") -> Reference:
    """The reference of a rubric question, cut and read once (questions repeat every turn)."""
    pieces = tuple(pieces_of(reference))
    names = name_words(reference, question)
    claims = tuple(claim(p, names) for p in pieces)
    q = claim(question, names) if question else None
    nums = frozenset().union(*(c.numbers for c in claims), q.numbers if q else frozenset())
    return Reference(reference, question, pieces, claims, Known(nums, frozenset(words(f"{reference} {question}"))))


@dataclass(frozen=True)
class Thresholds:
    """When a pair is aligned, and how close it must be for each kind of substitution."""

    align_cos: float
    align_overlap: float
    tight_cos: float  # a negation on one side only flips the pair from this cosine on
    frame_overlap: float  # numbers and names are substituted from this ``core_overlap`` on


def check_evidence(answer: list[str], answer_vecs: np.ndarray, ref: Reference, ref_vecs: np.ndarray,
                   t: Thresholds) -> Check:
    """Compare the answer's sentences (``answer``, MiniLM rows ``answer_vecs``) with the
    reference's pieces (rows ``ref_vecs``); see the module notes."""
    if not answer or not ref.pieces:
        return Check(len(answer), 0, 0, (), tuple(0.0 for _ in answer), tuple(False for _ in answer))
    names = name_words(" ".join(answer), ref.question)
    sims = answer_vecs @ ref_vecs.T  # answer sentences x reference pieces
    # A question in the reference (a web page's heading, "Where can I find ...?") claims nothing.
    claiming = np.array([not p.rstrip().endswith("?") for p in ref.pieces])
    aligned = contradicted = 0
    kinds: list[str] = []
    foreign: list[bool] = []
    for i, sentence in enumerate(answer):
        a = claim(sentence, names)
        foreign.append(foreign_subject(a, ref.known) is not None)
        overlap = np.array([_overlap(a, r) for r in ref.claims])
        score = np.where(claiming, sims[i] + overlap, -np.inf)
        j = int(np.argmax(score))
        if not claiming[j] or sims[i, j] < t.align_cos or overlap[j] < t.align_overlap:
            continue
        aligned += 1
        r = ref.claims[j]
        frame = core_overlap(a, r)
        found = conflicts(a, r, ref.known, tight=sims[i, j] >= t.tight_cos, same_frame=frame >= t.frame_overlap,
                          exact_frame=frame >= _EXACT_FRAME)
        if found:
            contradicted += 1
            kinds.append(found[0])
    return Check(len(answer), aligned, contradicted, tuple(kinds), tuple(float(x) for x in sims.max(axis=1)),
                 tuple(foreign))


def _overlap(a: Claim, r: Claim) -> float:
    """Share of the answer sentence's content stems the reference sentence has."""
    if not a.terms:
        return 0.0
    return len(a.terms & r.terms) / len(a.terms)


def focus_share(support: Sequence[float], foreign: Sequence[bool], counts: list[int], floor: float, full: float,
                foreign_full: float) -> float:
    """Share of the answer's words on another subject than the reference's: each sentence
    counts by how far its ``support`` (best cosine with a reference sentence) falls below
    ``full``, wholly from ``floor`` down; a sentence about a name the reference lacks
    (``Check.foreign``: the cricket World Cup in an answer on the rugby one) counts wholly
    unless its support reaches ``foreign_full``, as close as a paraphrase."""
    total = sum(counts)
    if not total:
        return 0.0
    flags = list(foreign) or [False] * len(counts)
    off = [1.0 if f and s < foreign_full else 1.0 - min(1.0, max(0.0, (s - floor) / (full - floor)))
           for s, f in zip(support, flags)]
    return float(sum(c * o for c, o in zip(counts, off)) / total)
