"""Run statistics: how dialogues ended, how long turns took, what the LLM calls cost.

Everything here is read off the transcripts; nothing is recomputed from the
config, so statistics of a resumed or merged (Ray) run are as true as its transcripts.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from ..schema import Stage, Transcript, Usage
from .formats import Grades, Latencies, Percentiles, RunStats, TokenCounts, TokensPerTurn, TurnCounts, UsageTotals

__all__ = ["run_stats", "percentiles", "stage_role", "dialogue_latency_ms", "mean_grade"]

_PCTS = (50, 90, 99)


def percentiles(values: Sequence[float], pcts: Iterable[int] = _PCTS) -> dict[str, float | None]:
    """Nearest-rank percentiles (no interpolation: every reported value was observed)."""
    data = sorted(values)
    out: dict[str, float | None] = {}
    for p in pcts:
        if not data:
            out[f"p{p}"] = None
            continue
        rank = max(1, math.ceil(p / 100 * len(data)))
        out[f"p{p}"] = round(float(data[rank - 1]), 3)
    return out


def stage_role(stage: Stage) -> str:
    """The role a stage's cost belongs to.

    ``Stage.role`` when the LLM layer set it; otherwise the first dotted part of the stage
    name (``simulator.voice`` → ``simulator``), so older transcripts still split sensibly.
    """
    if stage.role:
        return stage.role
    return stage.name.split(".", 1)[0] or "unknown"


def dialogue_latency_ms(t: Transcript) -> float:
    """Wall time of a dialogue; the sum of turn latencies when the clock looks wrong."""
    wall = (t.ended_at - t.started_at).total_seconds() * 1000
    return wall if wall >= 0 else sum(x.latency_ms for x in t.turns)


def mean_grade(t: Transcript) -> float | None:
    grades = [x.user.grade for x in t.turns if x.user.grade is not None]
    return sum(grades) / len(grades) if grades else None


class _Bucket:
    """Token/cost/call totals of one role or one model."""

    __slots__ = ("calls", "cached", "retries", "prompt_tokens", "completion_tokens", "cost_usd", "_priced")

    def __init__(self) -> None:
        self.calls = self.cached = self.retries = self.prompt_tokens = self.completion_tokens = 0
        self.cost_usd = 0.0
        self._priced = False

    def add(self, s: Stage, billed: Usage) -> None:
        # ``billed``: what the stage billed, by Usage's rule (a cached answer is no call and
        # no tokens); cached answers are counted apart so "calls" means requests sent.
        self.cached += s.cached
        self.calls += billed.calls
        self.retries += billed.retries
        self.prompt_tokens += billed.prompt_tokens
        self.completion_tokens += billed.completion_tokens
        if s.cost_usd is not None:
            self.cost_usd += s.cost_usd
            self._priced = True

    def totals(self) -> UsageTotals:
        return UsageTotals(
            calls=self.calls, cached=self.cached, retries=self.retries,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            tokens=self.prompt_tokens + self.completion_tokens,
            # None, not 0.0, when no stage carried a price: "unknown" differs from "free".
            cost_usd=round(self.cost_usd, 6) if self._priced else None,
        )


def _usage(transcripts: Sequence[Transcript], stats: RunStats) -> None:
    """The LLM usage fields of ``stats``, per role and per model too."""
    roles: dict[str, _Bucket] = defaultdict(_Bucket)
    models: dict[str, _Bucket] = defaultdict(_Bucket)
    total = _Bucket()
    stage_errors: Counter[str] = Counter()
    retries = 0  # every stage's: a voice regenerating an invalid utterance retries without a model too
    for t in transcripts:
        # loose_stages: billed on no answered turn (an unanswered utterance, a failed step)
        for s in t.all_stages():
            retries += s.retries
            if s.error:
                stage_errors[s.error] += 1
            if s.model is None or not s.is_llm_call():  # retrieval, graders, offline stand-ins: no LLM usage
                continue
            billed = Usage.from_stages([s])  # once per stage, for its three buckets
            total.add(s, billed)
            roles[stage_role(s)].add(s, billed)
            models[s.model].add(s, billed)
    tot = total.totals()
    stats.llm_calls, stats.cached_calls, stats.retries = tot.calls, tot.cached, retries
    stats.tokens = TokenCounts(prompt=tot.prompt_tokens, completion=tot.completion_tokens, total=tot.tokens)
    stats.cost_usd = tot.cost_usd
    stats.by_role = {k: v.totals() for k, v in sorted(roles.items())}
    stats.by_model = {k: v.totals() for k, v in sorted(models.items())}
    stats.stage_errors = dict(stage_errors.most_common())


def _turn_counts(transcripts: Sequence[Transcript]) -> TurnCounts:
    counts = [len(t.turns) for t in transcripts]
    return TurnCounts(
        total=sum(counts),
        mean=round(sum(counts) / len(counts), 3) if counts else 0.0,
        max=max(counts, default=0),
        min=min(counts, default=0),
    )


def _grades(transcripts: Sequence[Transcript]) -> Grades:
    per_dialogue = [g for g in (mean_grade(t) for t in transcripts) if g is not None]
    return Grades(
        dialogues_graded=len(per_dialogue),
        mean=round(sum(per_dialogue) / len(per_dialogue), 3) if per_dialogue else None,
    )


def _tokens_per_turn(transcripts: Sequence[Transcript]) -> TokensPerTurn:
    values = [sum(s.prompt_tokens + s.completion_tokens for s in x.stages if s.is_llm_call())
              for t in transcripts for x in t.turns]
    context = [x.assistant.context.tokens for t in transcripts for x in t.turns]
    return TokensPerTurn(
        mean=round(sum(values) / len(values), 1) if values else 0.0,
        **percentiles(values),
        context_mean=round(sum(context) / len(context), 1) if context else 0.0,
    )


def run_stats(transcripts: Sequence[Transcript]) -> RunStats:
    """The ``"stats"`` block of summary.json."""
    turn_lat = [x.latency_ms for t in transcripts for x in t.turns]
    dia_lat = [dialogue_latency_ms(t) for t in transcripts]
    errors = Counter(t.error.type for t in transcripts if t.error is not None)
    stats = RunStats(
        dialogues=len(transcripts),
        turns=_turn_counts(transcripts),
        stop_reasons=dict(Counter(t.stop.reason for t in transcripts).most_common()),
        stopped_by=dict(Counter(t.stop.by for t in transcripts).most_common()),
        latency_ms=Latencies(turn=Percentiles(**percentiles(turn_lat)), dialogue=Percentiles(**percentiles(dia_lat))),
        tokens_per_turn=_tokens_per_turn(transcripts),
        grades=_grades(transcripts),
        errors=dict(errors.most_common()),
    )
    _usage(transcripts, stats)
    return stats
