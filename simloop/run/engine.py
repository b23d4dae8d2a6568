"""The engine: the one turn loop, and a bounded worker pool over scenarios (DESIGN §2).

Plugins answer one turn at a time; only this module loops.  ``concurrency`` workers pull
scenarios from a lazy iterator, so memory follows the number of *active* dialogues, not
the number of scenarios.  Every dialogue ends in a transcript — completed, capped,
timed out or failed — which the recorder appends as soon as it ends.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ..errors import DialogueError
from .plugins import Assistant, UserSimulator
from ..schema import (
    AssistantReply,
    AssistantTurn,
    DialogueState,
    ErrorInfo,
    PluginRef,
    Scenario,
    SimulatorTurn,
    Stage,
    Stop,
    Transcript,
    Turn,
    Usage,
    GoldTurn,
    UserTurn,
    utcnow,
)
from datetime import datetime

__all__ = ["Engine", "Event", "RunStats", "run_dialogue", "build_turn", "finish_transcript", "DialogueSpec",
           "gather_until_cancelled"]


@dataclass(frozen=True, slots=True)
class Event:
    """Progress events: ``started`` / ``turn`` / ``ended``."""

    kind: str
    dialogue_id: str
    turn: int = 0
    transcript: Transcript | None = None


EventSink = Callable[[Event], None]


@dataclass
class RunStats:
    dialogues: int = 0
    turns: int = 0
    reasons: Counter = field(default_factory=Counter)
    errors: int = 0
    wall_s: float = 0.0
    interrupted: bool = False

    def add(self, t: Transcript) -> None:
        self.dialogues += 1
        self.turns += len(t.turns)
        self.reasons[t.stop.reason] += 1
        self.errors += t.error is not None

    def counts(self) -> dict[str, int]:
        return {"dialogues": self.dialogues, "turns": self.turns, "errors": self.errors,
                **{f"stop.{k}": v for k, v in sorted(self.reasons.items())}}


@dataclass
class DialogueSpec:
    """What a transcript says about who took part."""

    run_id: str
    simulator: PluginRef
    assistant: PluginRef
    max_turns: int
    timeout_s: float


def build_turn(state: DialogueState, user: UserTurn, assistant: AssistantTurn, stages: list[Stage],
               latency_ms: float, gold: GoldTurn | None) -> Turn:
    """The next Turn of ``state`` (shared with the Sim.API server, which runs turns by request)."""
    return Turn(index=len(state.turns) + 1, user=user, assistant=assistant, stages=stages,
                latency_ms=round(latency_ms, 3), gold=gold)


def finish_transcript(run_id: str, state: DialogueState, started: datetime, stop: Stop,
                      simulator: PluginRef, assistant: PluginRef, error: ErrorInfo | None = None) -> Transcript:
    """The transcript of a finished dialogue, with usage summed over every stage."""
    stages = [s for t in state.turns for s in t.stages]
    return Transcript(
        run_id=run_id, dialogue_id=state.dialogue_id, scenario=state.scenario.ref(),
        simulator=simulator, assistant=assistant, started_at=started, ended_at=utcnow(),
        stop=stop, turns=state.turns, usage=Usage.from_stages(stages), error=error,
    )


async def _turn_loop(
    sim: UserSimulator, assistant: Assistant, state: DialogueState, emit: EventSink | None
) -> Stop:
    pending = _check_sim(await sim.open(state.scenario))
    while True:
        if pending.end is not None:
            return pending.end
        if len(state.turns) >= state.max_turns:
            return Stop(reason="max_turns", by="engine", detail=f"reached max_turns={state.max_turns}")
        state.user = UserTurn(utterance=pending.utterance or "", rubric_id=pending.rubric_id, intent=pending.intent)
        t0 = time.perf_counter()
        reply = await assistant.respond(state)
        if not isinstance(reply, AssistantReply):
            raise DialogueError(f"assistant returned {type(reply).__name__}, not AssistantReply")
        turn = build_turn(state, state.user, reply.to_turn(), [*pending.stages, *reply.stages],
                          (time.perf_counter() - t0) * 1000, pending.gold)
        state.turns.append(turn)
        state.user = None
        if emit:
            emit(Event("turn", state.dialogue_id, turn=turn.index))
        pending = _check_sim(await sim.next(state))
        if pending.grade is not None:
            turn.user.grade = pending.grade
        if pending.end is not None and pending.stages:
            turn.stages.extend(pending.stages)  # the grading call that ended the dialogue


def _check_sim(value: Any) -> SimulatorTurn:
    if not isinstance(value, SimulatorTurn):
        raise DialogueError(f"simulator returned {type(value).__name__}, not SimulatorTurn")
    return value


async def run_dialogue(
    scenario: Scenario,
    sim: UserSimulator,
    assistant: Assistant,
    spec: DialogueSpec,
    emit: EventSink | None = None,
) -> Transcript:
    """Run one dialogue to its end; never raises except on cancellation."""
    started = utcnow()
    state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=spec.max_turns)
    error: ErrorInfo | None = None
    if emit:
        emit(Event("started", scenario.dialogue_id))
    try:
        async with asyncio.timeout(spec.timeout_s):
            stop = await _turn_loop(sim, assistant, state, emit)
    except TimeoutError:
        stop = Stop(reason="timeout", by="engine", detail=f"dialogue exceeded {spec.timeout_s:g}s")
    except Exception as exc:  # a plugin's failure is recorded, the run goes on
        message = " ".join(str(exc).split())[:500] or type(exc).__name__
        error = ErrorInfo(type=type(exc).__name__, message=message)
        stop = Stop(reason="error", by="engine", detail=f"{type(exc).__name__}: {message}")
    return finish_transcript(spec.run_id, state, started, stop, spec.simulator, spec.assistant, error)


async def gather_until_cancelled(tasks: list[asyncio.Task]) -> bool:
    """Wait for ``tasks``; on cancellation (Ctrl-C) cancel them all and return True.

    Dialogues in flight are dropped: they have no line yet, so resume re-runs them, and
    everything that ended is already on disk.
    """
    try:
        await asyncio.gather(*tasks)
        return False
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return True


class Engine:
    """A worker pool: ``concurrency`` dialogues at once, each appended when it ends."""

    def __init__(
        self,
        spec: DialogueSpec,
        simulator: UserSimulator,
        assistant: Assistant,
        sink: Callable[[Transcript], Any],
        concurrency: int,
        events: EventSink | None = None,
    ):
        self.spec = spec
        self.simulator = simulator
        self.assistant = assistant
        self.sink = sink  # async or sync callable receiving each finished transcript
        self.concurrency = concurrency
        self.events = events
        self.stats = RunStats()

    async def _worker(self, source: Iterator[Scenario]) -> None:
        # Workers share one iterator: the event loop is single-threaded, so next() is safe.
        for scenario in source:
            transcript = await run_dialogue(scenario, self.simulator, self.assistant, self.spec, self.events)
            result = self.sink(transcript)
            if asyncio.iscoroutine(result):
                await result
            self.stats.add(transcript)
            if self.events:
                self.events(Event("ended", transcript.dialogue_id, transcript=transcript))

    async def run(self, scenarios: Iterable[Scenario]) -> RunStats:
        source = iter(scenarios)
        t0 = time.perf_counter()
        workers = [asyncio.create_task(self._worker(source)) for _ in range(self.concurrency)]
        try:
            self.stats.interrupted = await gather_until_cancelled(workers)
        finally:
            self.stats.wall_s = time.perf_counter() - t0
        return self.stats
