"""What the ``simapi`` simulator reads off the wire: whether an utterance ends a session,
why (``server_end``), whether the server moved on (``same_point``), the turns as the
server's history has them (``sync_turns``), and what one Sim.API run did (``LaneResult``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..schema import AssistantTurn, SimulatorTurn, Turn, UserTurn
from ..simapi import UserUtterance

__all__ = ["LaneResult", "ends_session", "server_end", "same_point", "sync_turns", "run_over", "ENDED"]

ENDED = "the Sim.API server ended the session (it does not say why; recorded as user_satisfied)"


@dataclass
class LaneResult:
    """What one Sim.API run did in this invocation."""

    run_id: str
    status: str = "incomplete"  # completed | incomplete (stopped by ``limit`` or an interrupt)
    sessions: int = 0
    turns: int = 0
    truncated: int = 0
    abandoned: int = 0  # sessions that ended here first and were answered with apologies
    resumed: int = 0
    server_s: float = 0.0  # time waiting for /continue (the simulator's turn)


def ends_session(utt: UserUtterance) -> bool:
    return utt.last_response_of_session or utt.last_response_of_run


def server_end(utt: UserUtterance, **kw: Any) -> SimulatorTurn:
    """The stop for a session the server ended: its reason when it says one (a simloop
    server), else ``user_satisfied`` with a detail saying the server gave no reason."""
    told = utt.server_stop()
    reason, detail = (told[0], f"the Sim.API server ended the session: {told[1] or told[0]}") if told else ("user_satisfied", ENDED)
    return SimulatorTurn.stop(reason, detail, utterance=utt.utterance, **kw)


def same_point(a: UserUtterance, b: UserUtterance) -> bool:
    """The same point of the same conversation (the server did not move on)."""
    return (a.user_id, a.topic_id, a.utterance, len(a.history)) == (b.user_id, b.topic_id, b.utterance, len(b.history))


def sync_turns(turns: list[Turn], history: list[dict[str, str]],
               sent: Callable[[str], str] = lambda response: response) -> tuple[list[Turn], bool]:
    """The finished turns as the server's ``history`` has them: local turns (with their
    provenance) as far as they agree with it, the rest rebuilt from the text alone.
    ``sent`` maps a local response to what the server got (cut to its token limit), so a
    cut reply still counts as agreeing.  Returns the turns and whether the local ones
    were all kept."""
    pairs = [(history[i]["content"], history[i + 1]["content"]) for i in range(0, len(history) - 1, 2)]
    kept = 0
    while kept < min(len(turns), len(pairs)) and (
            turns[kept].user.utterance, sent(turns[kept].assistant.response)) == pairs[kept]:
        kept += 1
    rebuilt = [Turn(index=i, user=UserTurn(utterance=u), assistant=AssistantTurn(response=a))
               for i, (u, a) in enumerate(pairs[kept:], start=kept + 1)]
    return [*turns[:kept], *rebuilt], kept == len(turns)


def run_over(before: UserUtterance | None) -> UserUtterance:
    """The last utterance of a run whose final reply the server got but whose answer was lost."""
    base = before.model_dump() if before else {"timestamp": "", "run_id": "", "topic_id": "", "user_id": "",
                                                "history": []}
    return UserUtterance.model_validate({**base, "utterance": "", "last_response_of_session": True,
                                         "last_response_of_run": True})
