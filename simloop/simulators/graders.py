"""Graders: how well does the assistant's response answer the rubric question (0-5)?

``EmbeddingGrader`` is the offline grader.  It must not be gameable: a
restatement of the question, padding with off-topic sentences, or a clarifying question
in place of an answer never passes (> 3.0).  Per grade, MiniLM encodes the answer, its
*residual* and each of its sentences in one batch; the question and the reference (if
any) are fixed texts, encoded once per run:

* the **answer** is the response without its questions: what the assistant asks back
  ("Would you like to know more?") answers nothing;
* the **residual** is the answer with every word of the question removed.  Its cosine with
  the question measures what the answer adds *beyond the question's own words*: a
  restatement leaves only filler ("is an interesting subject"), a real answer keeps its
  facts ("in winter, October to April").  Relevance is the lesser of the answer's and
  the residual's (ramped) cosine, so echoing the question earns nothing by itself;
* a sentence is **off topic** when it is far from the question (and the reference) and
  from every sentence that is on topic; the grade is scaled by the on-topic share of the
  answer's words, so an answer that is 40% padding can never pass;
* an answer with fewer than ``min_novel`` content words beyond the question's is capped
  (a bare clarifying question, "Good luck!"), as are refusals and "it depends" replies;
* so is an answer that is not prose (prose.py): a list of terms that states nothing
  ("Gout: uric acid, joint, arthritis"), or words in an order English never has (the
  real answer shuffled); and one longer than ``max_words`` (iKAT allows 250 tokens).

With ``question.reference`` the relevance mixes in (``w_reference``) how well the
reference bears the answer out: each answer sentence's best cosine with a reference
sentence, by words; rubric ``keywords`` add their coverage.  The reference is also
*evidence* (evidence.py):

* an answer whose sentences contradict the reference (a negation, an opposite, another
  number or name in a sentence aligned with one of the reference's) loses that share of
  its grade, and from ``wrong_share`` on it is a wrong answer (capped: "contradicts");
* focus is read against it: a sentence far from every sentence of the reference (below
  ``focus_floor``..``focus_full``) is on another subject, and the grade is scaled by the
  on-topic share of the answer's words, as the off-topic rule does without a reference;
* an answer that is about an earlier rubric question rather than this one (closer to it by
  ``earlier_margin``) answers nothing new (capped: "earlier").

How every constant was chosen is noted where it is set: on ``2023_train_topics.json``
only (scripts/bench_grader.py reports 2023 test and 2024).

A grader may return ``None`` when it abstains on an answer it got (a plugin grader's
choice); the policy then asks for clarification, as iKAT does.  A grader whose model or
service failed raises instead (the LLM grader lets ``StructuredOutputError`` through):
an infrastructure failure must end the dialogue as an error, never read as what the
user did.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ..run import Context
from ..schema import RubricQuestion, Stage
from ..search import Embedder, encode_fixed
from ..text import content_words, sentences, stem, term_coverage, word_count, words
from .cues import is_asking  # the one asking rule, shared with the policy
from .evidence import Thresholds, check_evidence, focus_share, prepare
from .policy import SimContext
from .prose import scrambled_pairs, states_nothing
from .voices import EmbedderSource

__all__ = ["Grader", "EmbeddingGrader", "GradeParts", "is_evasive", "residual"]

# A reply that declines or defers, with no substance after it.
_EVASIVE = re.compile(
    r"\b(i'?m sorry|i am sorry|i don'?t know|i do not know|i'?m not sure|i am not sure|can'?t (?:really )?say|"
    r"cannot (?:say|answer|help)|not able to|unable to|no information|hard to say|it depends|depends on many|"
    r"everyone is different|i can'?t help|as an ai)\b"
)
# Person words swap between a user's question and a reply ("my cat" / "your cat"): never new content.
_PERSONS = frozenset("i me my mine myself you your yours yourself we us our ours".split())


@runtime_checkable
class Grader(Protocol):
    async def grade(
        self, question: RubricQuestion, response: str, context: SimContext | None = None
    ) -> tuple[float | None, list[Stage]]: ...


def is_evasive(response: str) -> bool:
    """A short reply built around a refusal or a non-committal phrase."""
    return bool(_EVASIVE.search(response.lower())) and len(content_words(response)) < 25


def residual(text: str, question: str) -> str:
    """``text`` without any word of ``question`` (nor person words): what it adds."""
    gone = {stem(w) for w in words(question)} | _PERSONS
    kept = [tok for tok in text.split() if not (ws := words(tok)) or any(stem(w) not in gone for w in ws)]
    return " ".join(kept)


def novel_terms(text: str, question: str) -> set[str]:
    """Content-word stems of ``text`` that the question does not contain."""
    asked = {stem(w) for w in content_words(question)}
    return {stem(w) for w in content_words(text)} - asked


@dataclass(frozen=True)
class GradeParts:
    """The ingredients of a grade, for calibration reports and tests."""

    cosine: float  # answer vs question
    residual: float  # residual vs question
    reference: float | None  # relevance against the reference answer, when there is one
    keywords: float | None  # share of rubric keywords covered, when there are any
    off_topic: float  # share of the answer's words in off-topic sentences
    novel: int  # content words beyond the question's
    capped: str | None  # "empty", "asking", "echo", "evasive", "long", "list", "scrambled", "contradicts" or "earlier"
    grade: float
    contradicts: float = 0.0  # share of the answer's sentences that contradict the reference
    conflicts: tuple[str, ...] = ()  # what they substitute: "polarity", "antonym", "number", "entity"
    earlier: float = 0.0  # how much closer the answer is to an earlier rubric question than to this one


class EmbeddingGrader:
    """Offline 0-5 grade from MiniLM similarities (see the module notes).

    Relevance is the lesser of two ramps: the answer's cosine with the question mapped
    from ``cos_floor``..``cos_full`` onto 0..1, and the residual's from
    ``res_floor``..``res_full`` (an answer must be on the question *and* add to it).
    With a reference, the reference side is mixed in with weight ``w_reference``: the
    answer's *support* (each sentence's best cosine with a reference sentence, averaged by
    words) ramped from ``ref_floor`` to ``ref_full``.  Keywords are mixed in with weight
    ``w_keywords``; the result is multiplied by the focus factor, by ``1 - contradicted
    share`` and by 5.

    Constants without a reference, chosen on iKAT 2023 train (84 answered turns, 6
    candidates each): the ramps trade the human answers' pass rate (0.68) against the AUC
    of a human answer vs the answer of another turn (0.84, flat between 0.83 and 0.85 over
    the grid tried) and pass no restatement.  ``min_novel`` = 3 caps all 84 clarifying
    questions and, of the human answers, only three acknowledgements ("Best of luck!") and
    two that ask back.  The off-topic constants: see ``_off_topic_share``.

    Constants with a reference, chosen on 2023 train in the *honest* mode of
    scripts/bench_evidence.py (the reference is the turn's passages, which do not contain
    the graded answer; 75 turns cite passages), with the first generator of each adversary
    (the second is the held-out check):

    * ``align_cos`` 0.4, ``align_overlap`` 0.2, ``tight_cos`` 0.8, ``frame_overlap`` 0.6:
      of a grid (0.4-0.6 x 0.2-0.4 x 0.5-0.8 x 0.5-0.7), the best sum of the AUCs of the
      contradicted share (human answer vs negated 0.78, vs names swapped 0.73) less the
      share of human answers with any contradiction found (0.09);
    * ``wrong_share`` 0.34: the smallest share tried (0.15, 0.2, 0.25, 0.34, 0.5) at which
      at most 5% of the human answers are graded wrong (1.3%; 26% of the negated ones);
    * ``ref_floor``..``ref_full`` 0.4..0.7: of the ramps tried (0.3..0.6, 0.3..0.7,
      0.4..0.7, 0.4..0.8; with the weights below at 0.5 and 1), the largest lead of the
      human answers' pass rate (0.71) over another turn's answer's (0.08);
    * ``focus_floor``..``focus_full`` 0.3..0.5: a sentence with support below 0.3 is off
      the reference's subject, above 0.5 on it (below 0.3: 8% of the human answers'
      sentences, 44% of the inserted neighbour sentences; below 0.5: 21% and 95%);
    * ``w_reference`` 0.7 and ``focus_weight`` 2: of (0.5, 0.7) x (1, 1.5, 2), the best
      AUC of human vs padded answers (0.76) among those passing at least 60% of the human
      answers (the issue's floor; 0.60 here, 0.75 on the same turns without a reference:
      a passage seldom bears out every sentence of a human answer).  ``foreign_full`` 0.7:
      a sentence about a name the reference lacks is on topic only as close to a reference
      sentence as the median human sentence is (0.68); 5% of the human sentences are about
      such a name, 21% of the neighbour sentences;
    * ``earlier_margin`` 0.05: the smallest margin at which at most 5% of the human
      answers are taken for an earlier question's (3%; 81% of the earlier turns' answers).

    ``scripts/bench_evidence.py --tune`` prints the alignment grid and the wrong-share,
    earlier-margin and weight tables.

    The form caps (prose.py), on the 95 human answers of 2023 train: ``max_stop_share`` =
    0.3 is the largest share at which no human answer is taken for a list of terms (0.35
    takes one); it catches all 96 keyword dumps and word salads of a review set, and with the
    question's echo left out, dumps led in by the restated question.
    ``min_scrambled`` = 2 out-of-order pairs: no human answer has even one, the answers
    with their words shuffled within each sentence have two or more in 40 of 95 (and in
    101 of 115 bm25_extractive answers).  ``max_words`` = 400 is generous for an LLM
    assistant (iKAT caps a response at 250 tokens; bm25_extractive writes at most 220).
    """

    def __init__(
        self,
        ctx: Context | None = None,
        embedder: Embedder | None = None,
        cos_floor: float = 0.2,
        cos_full: float = 0.65,
        res_floor: float = 0.1,
        res_full: float = 0.35,
        ref_floor: float = 0.4,
        ref_full: float = 0.7,
        w_keywords: float = 0.3,
        w_reference: float = 0.7,
        off_cos: float = 0.2,
        anchor_cos: float = 0.3,
        off_coherence: float = 0.4,
        off_weight: float = 1.0,
        min_novel: int = 3,
        cap: float = 1.0,
        max_words: int = 400,
        max_stop_share: float = 0.3,
        min_scrambled: int = 2,
        window: int = 40,
        align_cos: float = 0.4,
        align_overlap: float = 0.2,
        tight_cos: float = 0.8,
        frame_overlap: float = 0.6,
        wrong_share: float = 0.34,
        focus_floor: float = 0.3,
        focus_full: float = 0.5,
        focus_weight: float = 2.0,
        foreign_full: float = 0.7,
        earlier_margin: float = 0.05,
    ):
        if not (cos_floor < cos_full and res_floor < res_full and ref_floor < ref_full):
            raise ValueError("each floor (cos_floor, res_floor, ref_floor) must be below its full mark")
        if not 0.0 <= w_keywords <= 1.0 or not 0.0 <= off_weight <= 1.0 or not 0.0 <= w_reference <= 1.0:
            raise ValueError("w_keywords, w_reference and off_weight are shares between 0 and 1")
        if max_words < 1:
            raise ValueError(f"max_words must be at least 1, got {max_words}")
        if not 0.0 <= max_stop_share <= 1.0:
            raise ValueError(f"max_stop_share is a share between 0 and 1, got {max_stop_share}")
        if min_scrambled < 1 or window < 1:
            raise ValueError("min_scrambled and window must be at least 1")
        if not 0.0 < wrong_share <= 1.0 or not focus_floor < focus_full:
            raise ValueError("wrong_share is a share in (0, 1], and focus_floor must be below focus_full")
        self.embeddings = EmbedderSource(ctx, embedder)
        self.cos_ramp, self.res_ramp = (cos_floor, cos_full), (res_floor, res_full)
        self.ref_ramp = (ref_floor, ref_full)
        self.w_keywords, self.w_reference = w_keywords, w_reference
        self.off_cos, self.anchor_cos = off_cos, anchor_cos
        self.off_coherence, self.off_weight = off_coherence, off_weight
        self.min_novel, self.cap = min_novel, cap
        self.max_words, self.max_stop_share, self.min_scrambled, self.window = (
            max_words, max_stop_share, min_scrambled, window)
        self.evidence = Thresholds(align_cos, align_overlap, tight_cos, frame_overlap)
        self.wrong_share, self.focus_ramp, self.earlier_margin = wrong_share, (focus_floor, focus_full), earlier_margin
        self.focus_weight, self.foreign_full = focus_weight, foreign_full

    async def grade(
        self, question: RubricQuestion, response: str, context: SimContext | None = None
    ) -> tuple[float | None, list[Stage]]:
        t0 = time.perf_counter()
        facts = list(context.scenario.persona.ptkb) if context is not None and context.scenario is not None else None
        parts = await self.explain(question, response, _utterance(context, response), _earlier(context, question),
                                   facts)
        stage = Stage(name="simulator.grade", latency_ms=round((time.perf_counter() - t0) * 1000, 3))
        return parts.grade, [stage]

    async def explain(self, question: RubricQuestion, response: str, utterance: str = "",
                      earlier: list[RubricQuestion] | None = None, facts: list[str] | None = None) -> GradeParts:
        """The grade with its ingredients.  ``utterance`` is what the user said for this
        answer: its words, like the question's, are echo rather than content (a parrot
        repeating the keywords a user spelled out has still said nothing new).  ``earlier``:
        the rubric questions asked before this one (an answer to one of them is no answer
        to this one).  ``facts``: what the user knows of themselves (the persona's PTKB): a
        sentence about them ("Given that you run marathons, ...") is on the user's subject,
        not another one."""
        said = [s for s in sentences(response) if not is_asking(s)]
        if not said:
            return GradeParts(0.0, 0.0, None, None, 0.0, 0, "asking" if response.strip() else "empty", 0.0)
        answer = " ".join(said)
        ref = (question.reference or "").strip() or None
        evidence = prepare(ref, question.question) if ref else None
        before = [q for q in earlier or [] if q.question.strip()]
        # The question, reference (whole and in sentences) and earlier questions repeat every
        # turn: fixed texts, kept all run.  For the earlier-question check, this question and
        # the earlier ones come alike as "question reference" (``_goal_text``).
        fixed = [question.question, *([ref] if ref else []), *(evidence.pieces if evidence else ()),
                 *(_goal_text(q) for q in ([question, *before] if before else [])), *(facts or [])]
        echo = f"{question.question} {utterance}"
        # Off topic is judged per sentence, and an over-long "sentence" per window of it:
        # padding glued on with lower-case "and ..." is one sentence for the splitter.
        pieces = [w for s in said for w in _windows(s, self.window)]
        embedder = await self.embeddings.get()
        goal, vecs = await asyncio.gather(encode_fixed(embedder, fixed),
                                          embedder.encode([answer, residual(answer, echo), *pieces]))
        goal, vecs = np.asarray(goal, dtype=np.float32), np.asarray(vecs, dtype=np.float32)
        n_goal = 2 if ref else 1
        n_ref = len(evidence.pieces) if evidence else 0
        n_before = len(before) + 1 if before else 0
        ref_vecs, before_vecs = goal[n_goal:n_goal + n_ref], goal[n_goal + n_ref:n_goal + n_ref + n_before]
        fact_vecs = goal[n_goal + n_ref + n_before:]
        ans, res, sents = vecs[0], vecs[1], vecs[2:]
        cos, res_cos = float(goal[0] @ ans), float(goal[0] @ res)
        sim = min(_ramp(cos, *self.cos_ramp), _ramp(res_cos, *self.res_ramp))
        counts = [word_count(s) for s in pieces]
        verdict = check_evidence(pieces, sents, evidence, ref_vecs, self.evidence) if evidence else None
        ref_sim = None
        if verdict is not None:
            # How well the reference bears the answer out: its sentences' best cosines with
            # the reference's, by words (a long reference as one text says little).
            support = float(np.dot(verdict.support, counts) / max(1, sum(counts)))
            ref_sim = _ramp(support, *self.ref_ramp)
            sim = (1 - self.w_reference) * sim + self.w_reference * ref_sim
        keywords = term_coverage(question.keywords, answer) if question.keywords else None
        if keywords is not None:
            sim = (1 - self.w_keywords) * sim + self.w_keywords * keywords
        if verdict is not None:
            about_user = (sents @ fact_vecs.T).max(axis=1) if len(fact_vecs) else np.zeros(len(sents))
            support = np.maximum(np.asarray(verdict.support), about_user)
            off = focus_share(support, verdict.foreign, counts, *self.focus_ramp, self.foreign_full)
            focus = max(0.0, 1.0 - self.focus_weight * off)
        else:
            off = self._off_topic_share(goal[:n_goal], sents, counts)
            focus = 1.0 - self.off_weight * off
        contradicts = verdict.share if verdict else 0.0
        grade = 5.0 * sim * focus * (1.0 - contradicts)
        novel = len(novel_terms(answer, echo))
        drift = float((before_vecs[1:] @ ans).max() - before_vecs[0] @ ans) if before else 0.0
        capped = self._cap_reason(response, said, novel, answer, echo)
        if capped is None and contradicts >= self.wrong_share:
            capped = "contradicts"
        if capped is None and drift >= self.earlier_margin:
            capped = "earlier"
        if capped:
            grade = min(grade, self.cap)
        return GradeParts(round(cos, 4), round(res_cos, 4), ref_sim, keywords, round(off, 4), novel, capped,
                          round(grade, 2), round(contradicts, 4), verdict.kinds if verdict else (), round(drift, 4))

    def _cap_reason(self, response: str, said: list[str], novel: int, answer: str, echo: str) -> str | None:
        """Why the grade is capped: too little beyond the question's words (a bare
        clarifying question, an echo, "Good luck!"), a refusal, more words than a user
        reads (``max_words``), or no prose (a list of terms, shuffled words)."""
        if novel < self.min_novel:
            return "asking" if len(said) < len(sentences(response)) else "echo"
        if is_evasive(response):
            return "evasive"
        if word_count(response) > self.max_words:
            return "long"
        if states_nothing(answer, self.max_stop_share, echo):
            return "list"
        return "scrambled" if scrambled_pairs(answer) >= self.min_scrambled else None

    def _off_topic_share(self, goals: np.ndarray, sents: np.ndarray, counts: list[int]) -> float:
        """Share of words in sentences far from the question (and reference) and from every
        on-topic sentence.  On 2023 train, thresholds 0.2 / 0.3 / 0.4 flag 4.5% of the human
        answers' sentences and 92% of the sentences inserted from other topics."""
        to_goal = (sents @ goals.T).max(axis=1)
        anchors = sents[to_goal >= self.anchor_cos]
        coherence = (sents @ anchors.T).max(axis=1) if len(anchors) else np.zeros(len(sents))
        off = (to_goal < self.off_cos) & (coherence < self.off_coherence)
        total = sum(counts)
        return float(sum(c for c, o in zip(counts, off) if o) / total) if total else 0.0


def _goal_text(q: RubricQuestion) -> str:
    """An earlier rubric question as one text: the question, then its reference (cut by
    the encoder's length, so mostly its opening)."""
    return f"{q.question} {q.reference or ''}".strip()


def _earlier(context: SimContext | None, question: RubricQuestion) -> list[RubricQuestion]:
    """The rubric questions before ``question`` in the dialogue's topic."""
    if context is None or context.scenario is None:
        return []
    rubric = context.scenario.topic.rubric
    ids = [q.id for q in rubric]
    return list(rubric[:ids.index(question.id)]) if question.id in ids else []


def _utterance(context: SimContext | None, response: str) -> str:
    """The user utterance that ``response`` answered, from the dialogue so far."""
    if context is None:
        return ""
    return next((user for user, reply in reversed(context.history) if reply == response), "")


def _windows(sentence: str, size: int) -> list[str]:
    """``sentence`` as is, or cut into even runs of at most ``size`` words when longer.
    ``size`` = 40 words: 2023 train's human sentences are 14 words at the median and 45 at
    the 99th percentile, bm25_extractive's 23 and 52, so real sentences are rarely cut."""
    tokens = sentence.split()
    if len(tokens) <= size:
        return [sentence]
    n = -(-len(tokens) // size)
    step = -(-len(tokens) // n)
    return [" ".join(tokens[i:i + step]) for i in range(0, len(tokens), step)]


def _ramp(x: float, floor: float, full: float) -> float:
    return float(np.clip((x - floor) / (full - floor), 0.0, 1.0))
