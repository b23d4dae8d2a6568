"""LLM judge on the iKAT-25 interactive rubric (SIMULATION_API.md §6), in our own words.

Two levels, as the organisers rated runs:
- rubric level, once per rubric question (the turns sharing a ``user.rubric_id``; a turn
  of its own when a run has no rubric ids): engagement, relevance and usefulness,
  overall quality (1–5) and the rater's confidence (1–3);
- dialogue level, once per conversation: mixed initiative, personalisation, flow,
  trustworthiness, user satisfaction (1–5) and confidence (1–3).

Every value is mapped to [0, 1] by ``(x - 1) / (top - 1)``.  A level's score is the mean
of its quality sub-scores (confidence excluded); a dialogue's overall score is the
harmonic mean of its rubric-level and dialogue-level scores.  The official aggregation
is not published (§6 "open points"): these choices are ours and stated here.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from ..errors import LLMError, SimloopError
from ..progress import NO_PROGRESS, ProgressSink
from ..schema import Stage, Transcript, Turn, Usage
from .formats import DialogueJudgeScores, JudgeSummary, RubricGroupScores

__all__ = [
    "ChatLike", "RubricVerdict", "DialogueVerdict", "Grade", "RubricGrade", "DialogueJudgement", "Judge", "JudgeResult",
    "harmonic_mean", "normalise", "rubric_groups", "rubric_messages", "dialogue_messages", "summarise",
    "judge_transcripts", "RUBRIC_KEYS", "DIALOGUE_KEYS",
]

V = TypeVar("V", bound=BaseModel)


class ChatLike(Protocol):
    """The judge's model: a validated ``schema`` instance for ``messages``, and the stage it cost."""

    async def structured(self, messages: Sequence[dict[str, Any]], schema: type[V], *, stage: str
                         ) -> tuple[V, Stage]: ...


class RubricVerdict(BaseModel):
    justification: str = Field("", description="two or three sentences explaining the scores")
    engagement: int = Field(ge=1, le=5)
    relevance_and_usefulness: int = Field(ge=1, le=5)
    overall_quality: int = Field(ge=1, le=5)
    rater_confidence: int = Field(ge=1, le=3)


class DialogueVerdict(BaseModel):
    justification: str = Field("", description="two or three sentences explaining the scores")
    mixed_initiative: int = Field(ge=1, le=5)
    personalization: int = Field(ge=1, le=5)
    information_flow: int = Field(ge=1, le=5)
    trustworthiness: int = Field(ge=1, le=5)
    user_satisfaction: int = Field(ge=1, le=5)
    rater_confidence: int = Field(ge=1, le=3)


# summary key -> (verdict field, top of its scale)
RUBRIC_KEYS = {
    "engagement": ("engagement", 5), "relevance": ("relevance_and_usefulness", 5),
    "quality": ("overall_quality", 5), "confidence": ("rater_confidence", 3),
}
DIALOGUE_KEYS = {
    "mixed_initiative": ("mixed_initiative", 5), "personalization": ("personalization", 5),
    "flow": ("information_flow", 5), "trustworthiness": ("trustworthiness", 5),
    "satisfaction": ("user_satisfaction", 5), "confidence": ("rater_confidence", 3),
}

_RUBRIC_SYSTEM = """You assess one part of a conversation between a user and a personal assistant that searches the web.
The part under assessment is the user's pursuit of one sub-question, possibly over several turns.
Rate it on these scales (5 is best, 1 is worst):
- engagement: does the assistant drive the exploration forward and take up the user's corrections?
  5 a true partner that anticipates the next step; 3 a tool that answers only what is asked; 1 an obstacle that ignores the user.
- relevance_and_usefulness: given the earlier conversation, the latest request and what the assistant knows about the user,
  how well does the answer serve the need? 5 completely; 4 largely; 3 partly; 2 barely; 1 not at all.
- overall_quality: 5 exceptional, 4 good, 3 acceptable, 2 poor, 1 unacceptable.
- rater_confidence: how sure you are of these ratings: 3 high, 2 medium, 1 low.
Reply with JSON only: a short justification first, then integer scores."""  # noqa: E501 (prompt text as sent)

_DIALOGUE_SYSTEM = """You assess a whole conversation between a user and a personal assistant that searches the web.
Rate it on these scales (5 is best, 1 is worst):
- mixed_initiative: clarifying questions, asking for preferences, follow-ups and suggested next steps, at the right moments.
  5 masterful and adaptive; 3 limited but functional; 1 purely reactive.
- personalization: does the content and style fit what the assistant knows about the user, applied consistently across turns?
  5 deeply personal; 3 superficial; 2 wrongly personalised; 1 entirely generic.
- information_flow: does it build from general to specific at a pace the user can follow, without verbosity,
  repetition or contradiction? 5 seamless; 3 functional but clunky; 1 incoherent.
- trustworthiness: open about sources and uncertainty, refers to experts on medical, legal or money matters.
  5 exemplary; 3 inconsistent; 1 actively misleading.
- user_satisfaction: was the user's task done? Ignore polite thanks from the user. 5 perfected; 4 accomplished;
  3 partly met; 2 failed; 1 undermined.
- rater_confidence: how sure you are of these ratings: 3 high, 2 medium, 1 low.
Reply with JSON only: a short justification first, then integer scores."""  # noqa: E501 (prompt text as sent)


def normalise(value: int, top: int) -> float:
    return (value - 1) / (top - 1)


def harmonic_mean(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def rubric_groups(t: Transcript) -> list[tuple[str, list[Turn]]]:
    """Turns grouped by rubric question, in order of first appearance."""
    groups: dict[str, list[Turn]] = {}
    for turn in t.turns:
        key = turn.user.rubric_id or f"turn-{turn.index}"
        groups.setdefault(key, []).append(turn)
    return list(groups.items())


def _lines(turns: Sequence[Turn]) -> str:
    out = []
    for turn in turns:
        out.append(f"user: {turn.user.utterance}")
        out.append(f"system: {turn.assistant.response}")
    return "\n".join(out)


def _cited_ptkb(t: Transcript) -> str:
    """The PTKB statements the run itself cited (what the organisers' judge saw)."""
    seen: dict[int, str] = {}
    for turn in t.turns:
        for p in turn.assistant.ptkb_provenance:
            if p.used:  # the ranking's tail is what the assistant did not rely on
                seen.setdefault(p.index, p.statement)
    if not seen:
        return "(the assistant cited no facts about the user)"
    return "\n".join(f"- {s}" for _, s in sorted(seen.items()))


def rubric_messages(t: Transcript, turns: Sequence[Turn]) -> list[dict[str, str]]:
    before = [x for x in t.turns if x.index < turns[0].index]
    user = (f"What the assistant knows about the user:\n{_cited_ptkb(t)}\n\n"
            f"Earlier conversation:\n{_lines(before) or '(none)'}\n\n"
            f"Part to assess:\n{_lines(turns)}")
    return [{"role": "system", "content": _RUBRIC_SYSTEM}, {"role": "user", "content": user}]


def dialogue_messages(t: Transcript) -> list[dict[str, str]]:
    user = (f"What the assistant knows about the user:\n{_cited_ptkb(t)}\n\n"
            f"Conversation:\n{_lines(t.turns) or '(empty)'}")
    return [{"role": "system", "content": _DIALOGUE_SYSTEM}, {"role": "user", "content": user}]


@dataclass
class Grade:
    """One verdict on [0, 1]: each scale's score (summary key -> value), ``"score"`` their
    mean (confidence excluded), and the judge's justification."""

    scores: dict[str, float]
    justification: str

    @classmethod
    def of(cls, verdict: RubricVerdict | DialogueVerdict, keys: dict[str, tuple[str, int]]) -> Grade:
        vals = {k: round(normalise(getattr(verdict, f), top), 4) for k, (f, top) in keys.items()}
        vals["score"] = round(fmean(v for k, v in vals.items() if k != "confidence"), 4)
        return cls(vals, verdict.justification)

    @property
    def score(self) -> float:
        return self.scores["score"]


@dataclass
class RubricGrade(Grade):
    """The grade of one rubric question's turns."""

    rubric_id: str = ""
    turns: list[int] = field(default_factory=list)

    def record(self) -> RubricGroupScores:
        return RubricGroupScores.model_validate({"rubric_id": self.rubric_id, "turns": self.turns, **self.scores,
                                                 "justification": self.justification})


@dataclass
class DialogueJudgement:
    """Scores of one dialogue, written to its scores.jsonl line under ``"judge"``."""

    rubric: list[RubricGrade] = field(default_factory=list)   # one per rubric group
    dialogue: Grade | None = None
    stages: list[Stage] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def overall(self) -> tuple[float | None, float | None, float | None]:
        """(rubric level, dialogue level, their harmonic mean), rounded."""
        r = fmean(g.score for g in self.rubric) if self.rubric else None
        d = self.dialogue.score if self.dialogue else None
        return _r(r), _r(d), _r(harmonic_mean(r, d))

    def record(self) -> DialogueJudgeScores:
        rubric, dialogue, overall = self.overall()
        scores: dict[str, float | str | None] | None = None
        if self.dialogue is not None:
            scores = {**self.dialogue.scores, "justification": self.dialogue.justification}
        return DialogueJudgeScores(rubric=rubric, dialogue=dialogue, overall=overall,
                                   rubric_groups=[g.record() for g in self.rubric], dialogue_scores=scores,
                                   errors=self.errors, stages=self.stages)


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


class Judge:
    """Runs the judge calls of many dialogues, at most ``concurrency`` at a time."""

    def __init__(self, chat: ChatLike, concurrency: int = 8, progress: ProgressSink = NO_PROGRESS):
        self.chat = chat
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self.progress = progress  # one count per call answered or failed

    async def _ask(self, messages: list[dict[str, str]], schema: type[V], stage: str, out: DialogueJudgement
                   ) -> V | None:
        async with self._sem:
            try:
                verdict, st = await self.chat.structured(messages, schema, stage=stage)
            except SimloopError as exc:  # one failed call costs one score, not the evaluation
                out.errors.append(f"{stage}: {type(exc).__name__}: {exc}")
                if isinstance(exc, LLMError) and exc.stage is not None:  # what the failed attempt cost
                    out.stages.append(exc.stage)
                return None
            finally:
                self.progress.advance()
        out.stages.append(st)
        return verdict

    async def _rubric(self, t: Transcript, rid: str, turns: list[Turn], out: DialogueJudgement) -> RubricGrade | None:
        v = await self._ask(rubric_messages(t, turns), RubricVerdict, "judge.rubric", out)
        if v is None:
            return None
        grade = Grade.of(v, RUBRIC_KEYS)
        return RubricGrade(grade.scores, grade.justification, rubric_id=rid, turns=[x.index for x in turns])

    async def _dialogue(self, t: Transcript, out: DialogueJudgement) -> None:
        v = await self._ask(dialogue_messages(t), DialogueVerdict, "judge.dialogue", out)
        if v is not None:
            out.dialogue = Grade.of(v, DIALOGUE_KEYS)

    async def judge(self, t: Transcript) -> DialogueJudgement:
        out = DialogueJudgement()
        if not t.turns:
            out.errors.append("no turns to judge")
            return out
        tasks = [self._rubric(t, rid, turns, out) for rid, turns in rubric_groups(t)]
        _, *groups = await asyncio.gather(self._dialogue(t, out), *tasks)
        out.rubric = [g for g in groups if isinstance(g, RubricGrade)]
        return out


def _level_means(rows: Sequence[Mapping[str, float]], keys: Sequence[str]) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {k: _r(fmean(r[k] for r in rows)) if rows else None for k in keys}
    out["n"] = len(rows)
    return out


@dataclass
class JudgeResult:
    summary: JudgeSummary
    per_dialogue: dict[str, DialogueJudgeScores]


def summarise(judgements: dict[str, DialogueJudgement], model: str | None = None) -> JudgeSummary:
    """The ``"judge"`` block of summary.json: means of normalised scores over the run."""
    groups = [g.scores for j in judgements.values() for g in j.rubric]
    dialogues = [j.dialogue.scores for j in judgements.values() if j.dialogue]
    rubric = _level_means(groups, [*RUBRIC_KEYS, "score"])
    dialogue = _level_means(dialogues, [*DIALOGUE_KEYS, "score"])
    per_overall = [o for o in (j.overall()[2] for j in judgements.values()) if o is not None]
    stages = [s for j in judgements.values() for s in j.stages]
    errors: dict[str, int] = defaultdict(int)
    for j in judgements.values():
        for e in j.errors:
            errors[e.split(":", 2)[1].strip() if e.count(":") >= 2 else e] += 1
    return JudgeSummary(
        rubric=rubric, dialogue=dialogue,
        # mean over dialogues of each dialogue's harmonic mean (GP Table 2 style) ...
        overall=_r(fmean(per_overall)) if per_overall else None,
        # ... and the harmonic mean of the two run-level scores, for comparison.
        overall_of_means=_r(harmonic_mean(rubric["score"], dialogue["score"])),
        dialogues=len(judgements), model=model, usage=Usage.from_stages(stages), errors=dict(errors),
    )


def judge_calls(transcripts: Sequence[Transcript]) -> int:
    """How many calls ``judge_transcripts`` makes: per dialogue with turns, one for the
    dialogue and one per rubric group."""
    return sum(1 + len(rubric_groups(t)) for t in transcripts if t.turns)


async def judge_transcripts(transcripts: Sequence[Transcript], chat: ChatLike, concurrency: int = 8,
                            model: str | None = None, progress: ProgressSink = NO_PROGRESS) -> JudgeResult:
    progress.phase("judge calls", judge_calls(transcripts))
    judge = Judge(chat, concurrency, progress)
    results = await asyncio.gather(*(judge.judge(t) for t in transcripts))
    judgements = {t.dialogue_id: j for t, j in zip(transcripts, results)}
    return JudgeResult(summarise(judgements, model), {k: j.record() for k, j in judgements.items()})
