"""Bench-only plugins and fakes: a simulator and an assistant that make exactly one LLM
call per turn each, and the engine figures' settings of the scripted ChatModel (simloop.fakes).

Loaded by the runner as ``bench_plugins:OneCallSimulator`` / ``bench_plugins:OneCallAssistant``
(``scripts/`` is on ``sys.path`` when ``scripts/bench_main.py`` runs).  They are shaped
like a real pipeline turn (a retrieval when one is configured, ten passages, PTKB
provenance, stages) so the engine and recorder handle a realistic payload.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from simloop.fakes import CpuMeter, ScriptedChat
from simloop.schema import AssistantReply, ContextInfo, Passage, PtkbUse, SimulatorTurn, Stage

__all__ = ["OneCallSimulator", "OneCallAssistant", "ScriptedUser", "ParkedAssistant", "MeteredRetriever", "bench_chat"]


class OneCallSimulator:
    """Says ``turns`` utterances, each written by one ``simulator`` chat call; then ends.

    ``open`` makes the first call; ``next`` makes one per further turn; the ``next`` after
    the last answer ends without a closing line and makes none.  So a dialogue is ``turns`` turns with two
    sequential LLM calls each (simulator, assistant).
    """

    def __init__(self, ctx: Any, turns: int = 5):
        self.ctx, self.turns = ctx, turns

    async def _say(self, scenario: Any, index: int, grade: float | None) -> SimulatorTurn:
        q = scenario.topic.rubric[index % len(scenario.topic.rubric)]
        messages = [{"role": "system", "content": f"You are {scenario.persona.name}. Ask about: {q.question}"},
                    {"role": "user", "content": f"Write turn {index + 1} of the user."}]
        result = await self.ctx.chat("simulator").chat(messages, stage="voice", max_tokens=48)
        return SimulatorTurn.say(result.text, rubric_id=q.id, intent="ask", grade=grade, stages=[result.stage])

    async def open(self, state: Any) -> SimulatorTurn:
        return await self._say(state.scenario, 0, None)

    async def next(self, state: Any) -> SimulatorTurn:
        if len(state.turns) >= self.turns:
            return SimulatorTurn.stop("user_satisfied", "bench: all turns said", grade=4.0)
        return await self._say(state.scenario, len(state.turns), 4.0)


class ScriptedUser:
    """Asks the topic's rubric questions in order for ``turns`` turns; no LLM (agent costs alone)."""

    def __init__(self, ctx: Any, turns: int = 3):
        self.turns = turns

    @staticmethod
    def _ask(scenario: Any, index: int, grade: float | None) -> SimulatorTurn:
        q = scenario.topic.rubric[index % len(scenario.topic.rubric)]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", grade=grade)

    async def open(self, state: Any) -> SimulatorTurn:
        return self._ask(state.scenario, 0, None)

    async def next(self, state: Any) -> SimulatorTurn:
        if len(state.turns) >= self.turns:
            return SimulatorTurn.stop("user_satisfied", "bench: all turns said", grade=4.0)
        return self._ask(state.scenario, len(state.turns), 4.0)


class OneCallAssistant:
    """Retrieves (when ``retrieve``) and answers with one ``assistant`` chat call."""

    def __init__(self, ctx: Any, k: int = 10, retrieve: bool = True):
        self.ctx, self.k, self.retrieve = ctx, k, retrieve

    async def respond(self, state: Any) -> AssistantReply:
        utterance = state.user.utterance
        stages: list[Stage] = []
        hits: list[Any] = []
        if self.retrieve:
            retriever = await self.ctx.retriever()
            t0 = time.perf_counter()
            hits = await retriever.search(utterance, self.k)
            stages.append(Stage(name="retrieve", latency_ms=round((time.perf_counter() - t0) * 1000, 3)))
        context = "\n".join(f"[{h.docid}] {h.text[:200]}" for h in hits[:3])
        recent = [{"role": r, "content": c}
                  for u, a in state.history()[-2:] for r, c in (("user", u), ("assistant", a))]
        messages = [{"role": "system", "content": "Answer from the passages.\n" + context}, *recent,
                    {"role": "user", "content": utterance}]
        result = await self.ctx.chat("assistant").chat(messages, stage="generate", max_tokens=96)
        stages.append(result.stage)
        return AssistantReply(
            response=result.text,
            rewritten_query=utterance,
            passages=[Passage(rank=i, docid=h.docid, score=h.score, used=i <= 2) for i, h in enumerate(hits, 1)],
            ptkb_provenance=[PtkbUse(index=1, statement=state.ptkb[0], score=0.5)],
            context=ContextInfo(strategy="window", tokens=len(context) // 4),
            stages=stages,
        )


class ParkedAssistant:
    """Awaits ``self.gate`` before answering: parks every dialogue mid-turn (memory figure)."""

    def __init__(self, ctx: Any):
        self.gate = asyncio.Event()
        self.arrived = 0

    async def respond(self, state: Any) -> AssistantReply:
        self.arrived += 1
        await self.gate.wait()
        return AssistantReply(response=f"Parked answer to: {state.user.utterance}")


def bench_chat(role: str, meter: CpuMeter, **kw: Any) -> ScriptedChat:
    """The scripted ChatModel of the engine figures: a canned answer with the usage of a
    real call, its own CPU charged to ``meter`` (left out of the engine's share), nothing
    recorded (a run keeps no requests); ``kw``: latency, jitter, seed."""
    return ScriptedChat(role=role, meter=meter, usage=(120, 20), record=False, **kw)


class MeteredRetriever:
    """Wraps a retriever and charges the CPU spent in ``search`` to ``meter``."""

    def __init__(self, inner: Any, meter: CpuMeter):
        self.inner, self.meter = inner, meter

    async def search(self, query: str, k: int = 10) -> list[Any]:
        t0 = time.thread_time()
        hits = await self.inner.search(query, k)  # MemoryRetriever never suspends
        self.meter.seconds += time.thread_time() - t0
        self.meter.calls += 1
        return hits

    async def aclose(self) -> None:
        await self.inner.aclose()
