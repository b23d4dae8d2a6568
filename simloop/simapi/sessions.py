"""One hosted conversation: a simloop simulator on one side, a remote team on the other.

The engine's turn loop drives both plugins itself; here the assistant is remote, so the
loop is turned inside out: each ``/run/continue`` is one step of it.  The step mirrors
``engine._turn_loop`` so that transcripts written by the server look like the engine's:
the Turn is built the same way (simulator stages first, then the assistant's), the grade
from ``simulator.next`` lands on the answered turn, and the stages of the grading call
that ended the dialogue are added to the last turn.

Two differences the Sim.API forces:
* The API marks the *last* user utterance (``last_response_of_session``) before the
  system answers it, while simloop simulators say their closing line as a normal turn and
  only end on the next call.  A closing line is recognised by its intent (``farewell`` or
  ``give_up``, the policy's closing actions); it is recorded as the last turn with an
  empty response (the API ignores that answer) and the simulator is asked once more for
  its ``end``, which says why the dialogue ended.
* When a simulator ends without a closing line (replay, max_turns, an error), the user
  still has to say something: a short farewell is made up for the API and the dump, but
  it is not a simulator turn, so it is not in the transcript.

Simulator calls run on a private event loop in a worker thread (``SimRunner``): whatever
a simulator does synchronously (embeddings, grading) never stalls the HTTP server.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Awaitable, Coroutine

from pydantic import BaseModel, ConfigDict, Field

from ..run.engine import build_turn, finish_transcript
from ..schema import (
    AssistantTurn,
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
    UserTurn,
    utcnow,
)
from .protocol import AssistantResponse, pack_memory, remote_assistant_turn, unpack_memory

__all__ = ["SimRunner", "Session", "Dialogues", "CLOSING_INTENTS"]

CLOSING_INTENTS = frozenset({"farewell", "give_up"})

_FAREWELL = {
    "user_satisfied": "Thank you, that is all I wanted to know. Goodbye!",
    "user_gave_up": "This is not getting me anywhere, so I will stop here. Goodbye.",
    "max_turns": "I have to stop here. Thanks, goodbye.",
    "timeout": "I have to stop here. Thanks, goodbye.",
    "error": "Sorry, I have to stop here. Goodbye.",
}


class SimRunner:
    """A private event loop in a daemon thread for simulator coroutines."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._loop is not None:
            return
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.call_soon(ready.set)
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="simloop-simulator", daemon=True)
        self._thread.start()
        ready.wait()

    async def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        if self._loop is None:
            raise RuntimeError("SimRunner.start() was not called")
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def stop(self, timeout: float = 5.0) -> None:
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._loop.close()
        self._loop = None


# ----------------------------------------------------------------------------- shared helpers
# Both are what engine.py does inline; proposed to move there so the two loops share them.


# ----------------------------------------------------------------------------- sessions


class SessionInfo(BaseModel):
    """What a session needs besides its DialogueState to continue after a restart."""

    model_config = ConfigDict(extra="ignore")

    dialogue_id: str
    persona_id: str
    topic_id: str
    started_at: datetime = Field(default_factory=utcnow)
    history: list[dict[str, str]] = Field(default_factory=list)
    pending_stages: list[Stage] = Field(default_factory=list)
    pending_gold: GoldTurn | None = None
    asked_at: datetime = Field(default_factory=utcnow)
    ended: bool = False
    stop: Stop | None = None
    error: ErrorInfo | None = None


@dataclass
class Session:
    info: SessionInfo
    state: DialogueState

    @property
    def utterance(self) -> str:
        return self.info.history[-1]["content"] if self.info.history else ""

    def dump(self) -> dict[str, Any]:
        return {
            **self.info.model_dump(mode="json", exclude_none=True),
            "turns": [t.model_dump(mode="json", exclude_none=True) for t in self.state.turns],
            "user": self.state.user.model_dump(mode="json") if self.state.user else None,
            "memory": pack_memory(self.state.simulator_memory),
        }

    @classmethod
    def load(cls, data: dict[str, Any], scenario: Scenario, max_turns: int) -> "Session":
        state = DialogueState(
            dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=max_turns,
            turns=[Turn.model_validate(t) for t in data.get("turns", [])],
            user=UserTurn.model_validate(data["user"]) if data.get("user") else None,
            simulator_memory=unpack_memory(data.get("memory")),
        )
        return cls(SessionInfo.model_validate(data), state)


def _error(exc: BaseException) -> ErrorInfo:
    message = " ".join(str(exc).split())[:500] or type(exc).__name__
    return ErrorInfo(type=type(exc).__name__, message=message)


class Dialogues:
    """Opens sessions and advances them one assistant response at a time.

    ``answer`` returns the dump rows the step produced: dicts with the fields of a Sim.API
    record (``utterance``, ``rubric``, ``score``, ``text``, ``citations``, ``ptkb``).
    """

    def __init__(self, simulator: Any, runner: SimRunner, max_turns: int):
        self.simulator = simulator
        self.runner = runner
        self.max_turns = max_turns

    async def _sim(self, call: Awaitable[Any]) -> SimulatorTurn:
        value = await self.runner.run(call)  # type: ignore[arg-type]
        if not isinstance(value, SimulatorTurn):
            raise TypeError(f"simulator returned {type(value).__name__}, not SimulatorTurn")
        return value

    async def open(self, scenario: Scenario) -> tuple[Session, list[dict[str, Any]]]:
        state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=self.max_turns)
        session = Session(SessionInfo(dialogue_id=scenario.dialogue_id, persona_id=scenario.persona.id,
                                      topic_id=scenario.topic.id), state)
        try:
            first = await self._sim(self.simulator.open(scenario))
        except Exception as exc:  # recorded like the engine does; the run goes on
            return session, self._end(session, _stop_for_error(exc), error=_error(exc))
        if first.end is not None:
            return session, self._end(session, first.end)
        self._ask(session, first)
        return session, []

    async def answer(self, session: Session, body: AssistantResponse) -> list[dict[str, Any]]:
        state, info = session.state, session.info
        if state.user is None:
            raise RuntimeError("the session has no open user turn")
        assistant, remote_stages = remote_assistant_turn(body, state.ptkb)
        latency = (utcnow() - info.asked_at).total_seconds() * 1000
        turn = build_turn(state, state.user, assistant, [*info.pending_stages, *remote_stages], latency,
                          info.pending_gold)
        state.turns.append(turn)
        state.user = None
        info.history.append({"role": "assistant", "content": assistant.response})
        try:
            nxt = await self._sim(self.simulator.next(state))
        except Exception as exc:
            return [_row(state, turn, body)] + self._end(session, _stop_for_error(exc), error=_error(exc))
        if nxt.grade is not None:
            turn.user.grade = nxt.grade
        rows = [_row(state, turn, body)]
        if nxt.end is not None:
            turn.stages.extend(nxt.stages)  # the grading call that ended the dialogue
            return rows + self._end(session, nxt.end)
        if len(state.turns) >= state.max_turns:
            return rows + self._end(session, Stop(reason="max_turns", by="engine",
                                                  detail=f"reached max_turns={state.max_turns}"))
        if nxt.intent in CLOSING_INTENTS:
            return rows + await self._close(session, nxt)
        self._ask(session, nxt)
        return rows

    def _ask(self, session: Session, pending: SimulatorTurn) -> None:
        utterance = pending.utterance or ""
        session.state.user = UserTurn(utterance=utterance, rubric_id=pending.rubric_id, intent=pending.intent)
        session.info.pending_stages = list(pending.stages)
        session.info.pending_gold = pending.gold
        session.info.history.append({"role": "user", "content": utterance})
        session.info.asked_at = utcnow()

    async def _close(self, session: Session, closing: SimulatorTurn) -> list[dict[str, Any]]:
        """The closing line is the session's last utterance; its reply is never sent, so
        it is recorded empty and the simulator is asked at once how the dialogue ended."""
        state = session.state
        user = UserTurn(utterance=closing.utterance or "", rubric_id=closing.rubric_id, intent=closing.intent)
        turn = build_turn(state, user, AssistantTurn(response=""), list(closing.stages), 0.0, closing.gold)
        state.turns.append(turn)
        try:
            final = await self._sim(self.simulator.next(state))
        except Exception as exc:
            return self._end(session, _stop_for_error(exc), farewell=user.utterance, error=_error(exc))
        if final.end is not None:
            stop = final.end
        else:  # a simulator that keeps talking after its closing line: believe the line
            reason = "user_gave_up" if closing.intent == "give_up" else "user_satisfied"
            stop = Stop(reason=reason, by="simulator", detail=f"closing line ({closing.intent})")
        return self._end(session, stop, farewell=user.utterance)

    def _end(self, session: Session, stop: Stop, farewell: str | None = None,
             error: ErrorInfo | None = None) -> list[dict[str, Any]]:
        info = session.info
        text = farewell or _FAREWELL.get(stop.reason, _FAREWELL["error"])
        info.ended, info.stop, info.error = True, stop, error
        info.history.append({"role": "user", "content": text})
        info.asked_at = utcnow()
        session.state.user = None
        return [{"utterance": text, "rubric": None, "score": None, "text": None, "citations": {}, "ptkb": []}]

    def transcript(self, session: Session, run_id: str, simulator: PluginRef, assistant: PluginRef) -> Transcript:
        info = session.info
        stop = info.stop or Stop(reason="error", by="engine", detail="session did not end")
        return finish_transcript(run_id, session.state, info.started_at, stop, simulator, assistant, info.error)


def _stop_for_error(exc: BaseException) -> Stop:
    e = _error(exc)
    return Stop(reason="error", by="engine", detail=f"{e.type}: {e.message}")


def _rubric_text(state: DialogueState, rubric_id: str | None) -> str | None:
    for q in state.scenario.topic.rubric:
        if q.id == rubric_id:
            return q.question
    return rubric_id


def _row(state: DialogueState, turn: Turn, body: AssistantResponse) -> dict[str, Any]:
    return {
        "utterance": turn.user.utterance,
        "rubric": _rubric_text(state, turn.user.rubric_id),
        "score": turn.user.grade,
        "text": body.response or "",
        "citations": body.citations if body.citations is not None else {},
        "ptkb": body.ptkb_statements(),
    }

