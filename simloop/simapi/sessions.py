"""One hosted conversation of `simloop serve`: a DialogueSession whose assistant is a team.

Each ``/run/continue`` answers the session's open turn (``DialogueSession.answer``), so a
transcript written by the server is built exactly as the engine builds one: the same
turns, grades on the turns they judge, the closing line in ``stop.utterance`` (a parity
test runs one scripted dialogue both ways and compares the transcripts).

What the Sim.API adds is the wire side: the conversation ``history`` and a last user
utterance marked ``last_response_of_session``.  That utterance is the simulator's closing
line; when the dialogue ended without one (replay runs out, max_turns, an error) a short
farewell is made up for the wire and the dump only: it is not in the transcript.

Session steps run on a private event loop in a worker thread (``SimRunner``): whatever
a simulator does synchronously (embeddings, grading) never stalls the HTTP server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from ..errors import SimloopError
from ..loop import loop_factory
from ..run import DialogueSession, DialogueSpec, UserSimulator
from ..schema import DialogueState, PluginRef, Scenario, Turn
from .protocol import AssistantResponse, DumpRow, remote_reply

__all__ = ["SimRunner", "Session", "SessionInfo", "SavedSession", "Dialogues"]

T = TypeVar("T")

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
        loop = self._loop = (loop_factory() or asyncio.new_event_loop)()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        self._thread = threading.Thread(target=main, name="simloop-simulator", daemon=True)
        self._thread.start()
        ready.wait()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
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


class SessionInfo(BaseModel):
    """The wire side of a session: whose it is, and the last utterance once it ended."""

    model_config = ConfigDict(extra="ignore")

    persona_id: str
    topic_id: str
    closing: str | None = None  # the session's last utterance (closing line or made-up farewell)


class SavedSession(SessionInfo):
    """A session as the server's state file keeps it."""

    ended: bool = False
    # DialogueSession.dump(), opaque here; None in sessions saved before the server drove a DialogueSession
    dialogue: dict[str, Any] | None = None


@dataclass
class Session:
    info: SessionInfo
    dialogue: DialogueSession

    @property
    def ended(self) -> bool:
        return self.dialogue.ended

    @property
    def utterance(self) -> str:
        """The user utterance the wire shows now."""
        return self.dialogue.utterance or self.info.closing or ""

    @property
    def asked_at(self) -> datetime:
        return self.dialogue.asked_at or self.dialogue.ended_at or self.dialogue.started_at

    def history(self) -> list[dict[str, str]]:
        out: list[dict[str, str]] = []
        for t in self.dialogue.state.turns:
            out += [{"role": "user", "content": t.user.utterance},
                    {"role": "assistant", "content": t.assistant.response}]
        if self.utterance:
            out.append({"role": "user", "content": self.utterance})
        return out

    def dump(self) -> SavedSession:
        return SavedSession(persona_id=self.info.persona_id, topic_id=self.info.topic_id, closing=self.info.closing,
                            ended=self.ended, dialogue=self.dialogue.dump())

    @classmethod
    def load(cls, saved: SavedSession, scenario: Scenario, simulator: UserSimulator, spec: DialogueSpec) -> Session:
        if saved.dialogue is None:
            raise SimloopError("its session was saved by an older simloop serve; start a new run")
        info = SessionInfo(persona_id=saved.persona_id, topic_id=saved.topic_id, closing=saved.closing)
        return cls(info, DialogueSession.load(saved.dialogue, scenario, simulator, spec))


class Dialogues:
    """Opens sessions with one simulator and advances them one team response at a time.

    ``open`` and ``answer`` return the dump rows the step produced.
    """

    def __init__(self, simulator: UserSimulator, runner: SimRunner, ref: PluginRef):
        self.simulator = simulator
        self.runner = runner
        self.ref = ref  # the simulator with its effective params, as transcripts name it

    async def open(self, scenario: Scenario, spec: DialogueSpec) -> tuple[Session, list[DumpRow]]:
        session = Session(SessionInfo(persona_id=scenario.persona.id, topic_id=scenario.topic.id),
                          DialogueSession(scenario, self.simulator, spec))
        await self.runner.run(session.dialogue.start())
        return session, self._closing(session)

    async def answer(self, session: Session, body: AssistantResponse) -> list[DumpRow]:
        dialogue = session.dialogue
        if dialogue.utterance is None:
            raise RuntimeError("the session has no open user turn")
        await self.runner.run(dialogue.answer(remote_reply(body, dialogue.state.ptkb)))
        return [_row(dialogue.state, dialogue.state.turns[-1], body), *self._closing(session)]

    def load(self, saved: SavedSession, scenario: Scenario, spec: DialogueSpec) -> Session:
        return Session.load(saved, scenario, self.simulator, spec)

    @staticmethod
    def _closing(session: Session) -> list[DumpRow]:
        """The session's last utterance, once it has ended: a row for the dump."""
        stop = session.dialogue.stop
        if stop is None:
            return []
        session.info.closing = stop.utterance or _FAREWELL.get(stop.reason, _FAREWELL["error"])
        return [DumpRow(utterance=session.info.closing)]


def _rubric_text(state: DialogueState, rubric_id: str | None) -> str | None:
    for q in state.scenario.topic.rubric:
        if q.id == rubric_id:
            return q.question
    return rubric_id


def _row(state: DialogueState, turn: Turn, body: AssistantResponse) -> DumpRow:
    return DumpRow(utterance=turn.user.utterance, rubric=_rubric_text(state, turn.user.rubric_id),
                   score=turn.user.grade, text=body.response or "",
                   citations=body.citations if body.citations is not None else {}, ptkb=body.ptkb_statements())
