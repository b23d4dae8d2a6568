"""The replay simulator: says the user turns of an iKAT topic file, in order (DESIGN §5).

It ignores what the assistant answers (the iKAT conversations were written against the
reference responses), attaches each turn's gold provenance so evaluation can score PTKB
and passage selection, and ends after the last turn with ``user_satisfied``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BadInputError, DialogueError
from ..run import Context
from ..schema import DialogueState, GoldTurn, Persona, Scenario, SimulatorTurn

if TYPE_CHECKING:
    from ..config import RunConfig

__all__ = ["ReplaySimulator"]


class ReplaySimulator:
    """Replays ``scenario.topic.gold_turns``; stateless (the turn count is the position)."""

    def __init__(self, ctx: Context | None = None):
        self.ctx = ctx  # unused: replay needs no model, but plugins are built as Cls(ctx)

    def check_sources(self, personas: list[Persona], cfg: RunConfig) -> None:
        """Before the run: every selected topic needs gold turns (personas' topics have none),
        and run-wide behaviour traits would change nothing (the turns are the file's)."""
        only = set(cfg.scenarios.topic_ids)
        bare = [t.id for p in personas for t in p.topics if not t.gold_turns and (not only or t.id in only)]
        if bare:
            raise BadInputError(
                f"the replay simulator replays the user turns of an iKAT topic file, but {len(bare)} topic(s) in "
                f"{cfg.scenarios.topics or cfg.scenarios.personas_dir} have none (first: {bare[0]}); pass --topics "
                "FILE (2023/2024/2025), or use --simulator offline or llm for personas")
        if cfg.scenarios.behaviour:
            raise BadInputError(
                f"--behaviour {', '.join(cfg.scenarios.behaviour)}: the replay simulator says the recorded turns "
                "whatever the traits, so they would change nothing; drop --behaviour "
                "(or use --simulator offline or llm)")

    async def open(self, state: DialogueState) -> SimulatorTurn:
        return _say(_gold_turns(state.scenario)[0])

    async def next(self, state: DialogueState) -> SimulatorTurn:
        gold = _gold_turns(state.scenario)
        done = len(state.turns)
        if done >= len(gold):
            return SimulatorTurn.stop("user_satisfied", f"replay finished: {len(gold)} turns")
        return _say(gold[done])


def _gold_turns(scenario: Scenario) -> list[GoldTurn]:
    turns = scenario.topic.gold_turns
    if not turns:
        raise DialogueError(
            f"topic {scenario.topic.id!r} has no gold turns to replay; "
            "the replay simulator needs an iKAT topic file (--topics FILE)"
        )
    return turns


def _say(turn: GoldTurn) -> SimulatorTurn:
    return SimulatorTurn.say(turn.utterance, intent="replay", gold=turn)
