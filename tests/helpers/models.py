"""Fakes at the model seams, for tests only: a counting sentence model (SentenceTransformer's
``encode``) and a scripted judge (ChatModel's ``structured``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simloop.evaluate.judge import DialogueVerdict, RubricVerdict
from simloop.schema import Stage

__all__ = ["CountingModel", "ScriptedJudge"]


class CountingModel:
    """Stands in for SentenceTransformer: deterministic unit vectors, counts calls."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.batches: list[list[str]] = []

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        self.batches.append(list(texts))
        rows = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % 2**32)
            v = rng.standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows)


class ScriptedJudge:
    """Fixed verdicts: every rubric group perfect, the dialogue mid-scale."""

    def __init__(self):
        self.calls: list[str] = []
        self.prompts: list[str] = []

    async def structured(self, messages, schema, *, stage):
        self.calls.append(stage)
        self.prompts.append(messages[-1]["content"])
        if schema is RubricVerdict:
            v = RubricVerdict(engagement=5, relevance_and_usefulness=5, overall_quality=5, rater_confidence=3)
        else:
            v = DialogueVerdict(mixed_initiative=3, personalization=3, information_flow=3, trustworthiness=3,
                                user_satisfaction=3, rater_confidence=2)
        return v, Stage(name=stage, model="scripted", role="judge", prompt_tokens=10, completion_tokens=5)
