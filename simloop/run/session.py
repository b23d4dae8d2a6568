"""One dialogue: the only place where turns are built (DESIGN §2).

A ``DialogueSession`` is driven in one of two ways:

* ``run(assistant)``: the engine's loop; the assistant answers every utterance;
* ``start()`` then ``answer(reply)`` once per reply: the rehearsal server, where each
  HTTP request of a participant is one answer.

Either way the session
* builds each ``Turn`` from the utterance and the reply that answered it, with the stages
  that produced the utterance, then the assistant's;
* files the simulator's grade of an answer, and the stages of that grading, on the turn it
  judges (``SimulatorTurn.grade`` / ``grade_stages``), so per-turn cost and latency are
  the turn's own;
* checks ``max_turns``;
* shows the assistant ``view``, not ``state``: what a real iKAT system sees (utterances,
  its own replies, the PTKB, its memory), never the rubric, gold turns or grades (run/view.py);
* records a closing line in ``stop.utterance``; the assistant is never called for it, and
  the stages that wrote it are filed on the last turn (they were paid for);
* turns every failure into ``stop.reason = "error"`` with ``error.source`` (simulator,
  assistant, llm, retrieval, engine); it never raises a plugin's exception;
* keeps what a failed or timed-out step billed (``llm.meter``): a simulator step's stages go
  on the last turn, an unanswered utterance's and the assistant's on ``loose_stages``.

Its state (``dump`` / ``load``) is JSON, so a server keeps sessions across restarts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ContractError, LLMError, error_source
from ..files import pack_memory, unpack_memory
from ..llm import metered
from ..schema import (
    AssistantReply,
    DialogueState,
    ErrorInfo,
    GoldTurn,
    PluginRef,
    Scenario,
    SimulatorTurn,
    Stage,
    Stop,
    Transcript,
    Turn,
    Usage,
    UserTurn,
    utcnow,
)
from .plugins import Assistant, UserSimulator
from .view import add_turn, ask, assistant_view

__all__ = ["DialogueSpec", "DialogueSession", "TurnSink"]

TurnSink = Callable[[Turn], None]
Side = Literal["simulator", "assistant"]  # the plugin a failure came out of
T = TypeVar("T")


@dataclass(frozen=True)
class DialogueSpec:
    """What every dialogue of a run shares: who takes part and the engine's limits."""

    run_id: str
    simulator: PluginRef
    assistant: PluginRef
    max_turns: int
    timeout_s: float


class _Pending(BaseModel):
    """An utterance the assistant has not answered yet, and what it cost to produce."""

    user: UserTurn
    stages: list[Stage] = Field(default_factory=list)
    gold: GoldTurn | None = None
    asked_at: datetime = Field(default_factory=utcnow)


class _Record(BaseModel):
    """A session on disk (``DialogueSession.dump``); the scenario is stored by its owner."""

    model_config = ConfigDict(extra="ignore")

    dialogue_id: str
    started_at: datetime
    ended_at: datetime | None = None
    turns: list[Turn] = Field(default_factory=list)
    pending: _Pending | None = None
    loose_stages: list[Stage] = Field(default_factory=list)
    stop: Stop | None = None
    error: ErrorInfo | None = None
    simulator_memory: dict[str, Any] = Field(default_factory=dict)
    assistant_memory: dict[str, Any] = Field(default_factory=dict)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


class DialogueSession:
    """One dialogue between ``simulator`` and an assistant (local or remote)."""

    def __init__(self, scenario: Scenario, simulator: UserSimulator, spec: DialogueSpec,
                 on_turn: TurnSink | None = None):
        self.simulator = simulator
        self.spec = spec
        self.on_turn = on_turn
        self.state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=spec.max_turns)
        # What the assistant is shown (run/view.py): no rubric, gold or grades.
        self.view = assistant_view(self.state)
        self.started_at = utcnow()
        self.ended_at: datetime | None = None
        self.stop: Stop | None = None
        self.error: ErrorInfo | None = None
        self._pending: _Pending | None = None
        # Stages with no turn to sit on (a simulator that ends at once, an unanswered utterance,
        # a failed assistant step): the transcript's loose_stages.
        self._loose: list[Stage] = []
        # What the step in progress (or the last one) billed, kept in case it fails.
        self._bill: list[Stage] = []

    # ------------------------------------------------------------------ state
    @property
    def ended(self) -> bool:
        return self.stop is not None

    @property
    def utterance(self) -> str | None:
        """The utterance waiting for an answer (None once the dialogue has ended)."""
        return self._pending.user.utterance if self._pending else None

    @property
    def asked_at(self) -> datetime | None:
        return self._pending.asked_at if self._pending else None

    # ------------------------------------------------------------------ steps
    async def start(self) -> str | None:
        """Open the dialogue: the first utterance, or None when it ended at once."""
        said = await self._simulate(lambda: self.simulator.open(self.state))
        return self._take(said) if said is not None else None

    async def answer(self, reply: AssistantReply) -> str | None:
        """Record the turn ``reply`` answers, then ask the simulator: the next utterance,
        or None when the dialogue ended (see ``stop``)."""
        pending = self._pending
        if pending is None:
            raise RuntimeError("answer() without an open user turn")
        if not isinstance(reply, AssistantReply):
            self.fail(ContractError(f"assistant returned {type(reply).__name__}, not AssistantReply"), "assistant")
            return None
        latency_ms = (utcnow() - pending.asked_at).total_seconds() * 1000
        turn = Turn(index=len(self.state.turns) + 1, user=pending.user, assistant=reply.to_turn(),
                    stages=[*pending.stages, *reply.stages], latency_ms=round(latency_ms, 3), gold=pending.gold)
        self.state.turns.append(turn)
        add_turn(self.view, turn)
        self.state.user, self._pending = None, None
        if self.on_turn is not None:
            self.on_turn(turn)
        said = await self._simulate(lambda: self.simulator.next(self.state))
        if said is None:
            return None
        if said.grade is not None:
            turn.user.grade = said.grade
        turn.stages.extend(said.grade_stages)
        return self._take(said)

    async def run(self, assistant: Assistant) -> Transcript:
        """The whole dialogue with a local assistant, within ``spec.timeout_s``; never raises
        except on cancellation."""
        try:
            async with asyncio.timeout(self.spec.timeout_s):
                utterance = await self.start()
                while utterance is not None:
                    try:
                        reply = await self._step(lambda: assistant.respond(self.view), AssistantReply)
                    except Exception as exc:  # a plugin's failure is recorded, the run goes on
                        self.fail(exc, "assistant")
                        break
                    utterance = await self.answer(reply)
        except TimeoutError:
            detail = f"dialogue exceeded {self.spec.timeout_s:g}s"
            self._file_unfinished(None)
            self._end(Stop(reason="timeout", by="engine", detail=detail),
                      ErrorInfo(type="TimeoutError", message=detail, source="engine"))
        return self.transcript()

    def fail(self, exc: BaseException, side: Side) -> None:
        """End the dialogue with ``exc``, raised by the ``side`` plugin."""
        self._file_unfinished(exc)
        message = _one_line(exc)
        error = ErrorInfo(type=type(exc).__name__, message=message, source=error_source(exc, side))
        self._end(Stop(reason="error", by="engine", detail=f"{error.type}: {message}"), error)

    def transcript(self) -> Transcript:
        stop = self.stop or Stop(reason="error", by="engine", detail="the dialogue did not end")
        stages = [s for t in self.state.turns for s in t.stages] + self._loose
        return Transcript(loose_stages=self._loose,
            run_id=self.spec.run_id, dialogue_id=self.state.dialogue_id, scenario=self.state.scenario.ref(),
            simulator=self.spec.simulator, assistant=self.spec.assistant, started_at=self.started_at,
            ended_at=self.ended_at or utcnow(), stop=stop, turns=self.state.turns,
            usage=Usage.from_stages(stages), error=self.error,
        )

    # ------------------------------------------------------------------ internals
    async def _step(self, call: Callable[[], Awaitable[T]], kind: type) -> T:
        """One plugin call, metered: what it billed stays in ``_bill`` unless it returned a
        ``kind``, which carries its own stages."""
        with metered() as self._bill:
            result = await call()
        if isinstance(result, kind):
            self._bill = []
        return result

    def _file_unfinished(self, exc: BaseException | None) -> None:
        """File what the failing step billed (the failed call's stage carries the error), and
        the stages that wrote an utterance never answered: the server billed them all."""
        stages, self._bill = self._bill, []
        if not stages and isinstance(exc, LLMError) and exc.stage is not None:
            stages = [exc.stage]  # a plugin's own client, outside the meter
        if self._pending is not None:  # the assistant's step: no turn to sit on
            self._loose.extend([*self._pending.stages, *stages])
        else:  # a simulator's step: it graded the last turn or wrote the next utterance
            self._file_last(stages)

    async def _simulate(self, call: Callable[[], Awaitable[SimulatorTurn]]) -> SimulatorTurn | None:
        try:
            said = await self._step(call, SimulatorTurn)
        except Exception as exc:
            self.fail(exc, "simulator")
            return None
        if not isinstance(said, SimulatorTurn):
            self.fail(ContractError(f"simulator returned {type(said).__name__}, not SimulatorTurn"), "simulator")
            return None
        return said

    def _take(self, said: SimulatorTurn) -> str | None:
        """Make ``said`` the open user turn, or end the dialogue."""
        if said.end is not None:
            self._file_last(said.stages)  # the closing line's
            self._end(said.end)
            return None
        if len(self.state.turns) >= self.spec.max_turns:
            self._file_last(said.stages)  # an utterance written but never put
            self._end(Stop.turn_cap(self.spec.max_turns))
            return None
        user = UserTurn(utterance=said.utterance or "", rubric_id=said.rubric_id, intent=said.intent)
        self._pending = _Pending(user=user, stages=list(said.stages), gold=said.gold)
        self.state.user = user
        ask(self.view, user)
        return user.utterance

    def _file_last(self, stages: list[Stage]) -> None:
        (self.state.turns[-1].stages if self.state.turns else self._loose).extend(stages)

    def _end(self, stop: Stop, error: ErrorInfo | None = None) -> None:
        self.stop, self.error, self.ended_at = stop, error, utcnow()
        self.state.user, self._pending = None, None
        ask(self.view, None)

    # ------------------------------------------------------------------ persistence
    def dump(self) -> dict[str, Any]:
        record = _Record(
            dialogue_id=self.state.dialogue_id, started_at=self.started_at, ended_at=self.ended_at,
            turns=self.state.turns, pending=self._pending, loose_stages=self._loose, stop=self.stop,
            error=self.error, simulator_memory=pack_memory(self.state.simulator_memory),
            assistant_memory=pack_memory(self.view.assistant_memory),
        )
        return record.model_dump(mode="json", exclude_none=True)

    @classmethod
    def load(cls, data: dict[str, Any], scenario: Scenario, simulator: UserSimulator, spec: DialogueSpec,
             on_turn: TurnSink | None = None) -> DialogueSession:
        record = _Record.model_validate(data)
        session = cls(scenario, simulator, spec, on_turn)
        session.started_at, session.ended_at = record.started_at, record.ended_at
        session.stop, session.error, session._loose = record.stop, record.error, record.loose_stages
        session._pending = record.pending
        state = session.state
        state.turns = record.turns
        state.user = record.pending.user if record.pending else None
        state.simulator_memory = unpack_memory(record.simulator_memory)
        state.assistant_memory = unpack_memory(record.assistant_memory)
        session.view = assistant_view(state)
        return session
