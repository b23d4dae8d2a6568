"""Scoring of memory probes and the per-strategy entry of ``memory.json``.

A probe is scored on the turn the plan put it at (``probe_turn``); a dialogue that ended
before it (error, timeout) leaves the probe unanswered, which counts as a miss: a
strategy that breaks the assistant must not look better for it.
"""

from __future__ import annotations

import asyncio
from statistics import fmean

from ..schema import Transcript
from .facts import score_rules
from .formats import ProbeResult, StrategyResult
from .probes import PROBE, ProbeJudge, ProbePlan, query_kept

__all__ = ["score_probe", "summarise_probes", "judge_rows"]


def score_probe(plan: ProbePlan, transcript: Transcript | None, strategy: str) -> ProbeResult:
    """The probe turn of a dialogue scored by the rules; an unanswered probe (the
    dialogue ended early) is a miss."""
    turn = next((t for t in transcript.turns if t.index == plan.probe_turn), None) if transcript else None
    row = ProbeResult(
        strategy=strategy, dialogue_id=plan.dialogue_id, persona_id=plan.persona_id, fact_id=plan.fact_id,
        kind=plan.kind, distance=plan.distance, reveal_turn=plan.reveal_turn, probe_turn=plan.probe_turn,
        question=plan.question, stop=transcript.stop.reason if transcript else "missing",
    )
    if turn is None or turn.user.rubric_id != PROBE:
        return row.model_copy(update={"rule": "unanswered"})
    verdict = score_rules(turn.assistant.response, plan.must_mention, plan.must_not)
    return row.model_copy(update={
        "answered": True, "passed": verdict.passed, "rule": verdict.reason, "mentioned": verdict.mentioned,
        "recommended": verdict.recommended, "query_kept": query_kept(turn.assistant.rewritten_query, plan),
        "rewritten_query": turn.assistant.rewritten_query, "context_tokens": turn.assistant.context.tokens,
        "response": turn.assistant.response})


def _by_distance(rows: list[ProbeResult], key: str, distances: list[int]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for d in distances:
        vals = [float(getattr(r, key)) for r in rows if r.distance == d and getattr(r, key) is not None]
        out[str(d)] = round(fmean(vals), 4) if vals else None
    return out


def summarise_probes(rows: list[ProbeResult], transcripts: list[Transcript], distances: list[int]) -> StrategyResult:
    """One strategy's entry of memory.json."""
    turns = [t for tr in transcripts for t in tr.turns]
    llm = [sum(s.prompt_tokens + s.completion_tokens for s in t.stages) for t in turns]
    recall = _by_distance(rows, "passed", distances)
    return StrategyResult(
        recall_by_distance={d: (r if r is not None else 0.0) for d, r in recall.items()},
        tokens_per_turn=round(fmean(t.assistant.context.tokens for t in turns), 1) if turns else 0.0,
        recall=round(fmean(float(r.passed) for r in rows), 4) if rows else 0.0,
        probes_by_distance={str(d): sum(r.distance == d for r in rows) for d in distances},
        query_recall_by_distance=_by_distance(rows, "query_kept", distances),
        context_tokens_at_probe_by_distance=_by_distance(rows, "context_tokens", distances),
        llm_tokens_per_turn=round(fmean(llm), 1) if llm else 0.0,
        turns=len(turns), dialogues=len(transcripts),
        errors=sum(tr.error is not None for tr in transcripts),
        unanswered=sum(not r.answered for r in rows),
    )


async def judge_rows(judge: ProbeJudge, plans: list[ProbePlan], rows: list[ProbeResult]) -> list[ProbeResult]:
    """LLM verdicts replace the rule verdicts; a failed call keeps the rules' (and says so)."""
    todo = [i for i, r in enumerate(rows) if r.answered]
    results = await asyncio.gather(*(judge.judge(plans[i], rows[i].response or "") for i in todo))
    out = list(rows)
    for i, (verdict, stage, error) in zip(todo, results):
        if verdict is None:
            out[i] = rows[i].model_copy(update={"scored_by": "rules (judge failed)", "judge_error": error})
            continue
        tokens = stage.prompt_tokens + stage.completion_tokens if stage else 0
        out[i] = rows[i].model_copy(update={
            "passed": verdict.uses_fact and not verdict.contradicts_fact, "scored_by": "judge",
            "judge": verdict, "judge_tokens": tokens})
    return out
