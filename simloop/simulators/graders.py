"""Graders: how well does the assistant's response answer the rubric question (0-5)?

``EmbeddingGrader`` is the offline grader: MiniLM cosine between the question and the
response (the best window of a few sentences, so a long answer is not diluted by its
preamble), mixed with how many of the question's keywords and content words the response
covers.  Refusals and "it depends" non-answers are capped.  The constants were fitted on
real all-MiniLM-L6-v2 with hand-made Wikipedia-style examples (see tests/test_graders.py):
on-point answers score about 0.78-0.84 cosine, topical-but-not-answering ones 0.33-0.51,
off-topic ones about 0, evasive ones 0.02-0.38.

A grader returns ``None`` when it could not produce a grade (the LLM grader's reply did
not parse); the policy then asks for clarification, as iKAT does.
"""

from __future__ import annotations

import re
import time
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..search.embeddings import Embedder
from ..schema import RubricQuestion, Stage
from .policy import SimContext
from ..text import content_terms, sentences, term_coverage
from .voices import EmbedderSource

__all__ = ["Grader", "EmbeddingGrader", "GradeParts", "is_evasive"]

# A reply that declines or defers, with no substance after it.
_EVASIVE = re.compile(
    r"\b(i'?m sorry|i am sorry|i don'?t know|i do not know|i'?m not sure|i am not sure|can'?t (?:really )?say|"
    r"cannot (?:say|answer|help)|not able to|unable to|no information|hard to say|it depends|depends on many|"
    r"everyone is different|i can'?t help|as an ai)\b"
)


@runtime_checkable
class Grader(Protocol):
    async def grade(
        self, question: RubricQuestion, response: str, context: SimContext | None = None
    ) -> tuple[float | None, list[Stage]]: ...


def is_evasive(response: str) -> bool:
    """A short reply built around a refusal or a non-committal phrase."""
    return bool(_EVASIVE.search(response.lower())) and len(content_terms(response)) < 25


class GradeParts:
    """The ingredients of a grade, kept for calibration reports and tests."""

    __slots__ = ("cosine", "keywords", "terms", "evasive", "grade")

    def __init__(self, cosine: float, keywords: float | None, terms: float, evasive: bool, grade: float):
        self.cosine, self.keywords, self.terms, self.evasive, self.grade = cosine, keywords, terms, evasive, grade

    def __repr__(self) -> str:
        kw = "-" if self.keywords is None else f"{self.keywords:.2f}"
        return f"GradeParts(cos={self.cosine:.3f}, kw={kw}, terms={self.terms:.2f}, evasive={self.evasive}, grade={self.grade})"


class EmbeddingGrader:
    """Offline 0-5 grade: similarity (weight ``w_sim``) plus term coverage.

    ``cos_floor``/``cos_full`` map cosine linearly onto 0..1: at or below the floor the
    response is unrelated, at or above ``cos_full`` it is as close as on-point answers get.
    """

    def __init__(
        self,
        ctx: Any = None,
        embedder: Embedder | None = None,
        cos_floor: float = 0.25,
        cos_full: float = 0.75,
        w_sim: float = 0.7,
        window: int = 3,
        evasive_cap: float = 1.0,
    ):
        if not cos_floor < cos_full:
            raise ValueError("cos_floor must be below cos_full")
        self.embeddings = EmbedderSource(ctx, embedder)
        self.cos_floor, self.cos_full = cos_floor, cos_full
        self.w_sim = w_sim
        self.window = window
        self.evasive_cap = evasive_cap

    async def grade(
        self, question: RubricQuestion, response: str, context: SimContext | None = None
    ) -> tuple[float | None, list[Stage]]:
        t0 = time.perf_counter()
        parts = await self.explain(question, response)
        stage = Stage(name="simulator.grade", latency_ms=round((time.perf_counter() - t0) * 1000, 3))
        return parts.grade, [stage]

    async def explain(self, question: RubricQuestion, response: str) -> GradeParts:
        """The grade with its ingredients."""
        if not response.strip():
            return GradeParts(0.0, None, 0.0, True, 0.0)
        cos = await self._best_cosine(question.question, response)
        sim = float(np.clip((cos - self.cos_floor) / (self.cos_full - self.cos_floor), 0.0, 1.0))
        terms = term_coverage(content_terms(question.question), response)
        keywords = term_coverage(question.keywords, response) if question.keywords else None
        coverage = terms if keywords is None else (terms + keywords) / 2
        grade = 5.0 * (self.w_sim * sim + (1.0 - self.w_sim) * coverage)
        evasive = is_evasive(response)
        if evasive:
            grade = min(grade, self.evasive_cap)
        return GradeParts(cos, keywords, terms, evasive, round(grade, 2))

    def _windows(self, response: str) -> list[str]:
        """The whole response plus overlapping windows of ``window`` sentences."""
        sents = sentences(response)
        if len(sents) <= self.window:
            return [response]
        step = max(1, self.window - 1)
        wins = [" ".join(sents[i : i + self.window]) for i in range(0, len(sents) - 1, step)]
        return [response, *wins]

    async def _best_cosine(self, question: str, response: str) -> float:
        sims = await self.embeddings.similarities(question, self._windows(response))
        return float(np.max(sims))
