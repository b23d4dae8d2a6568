"""Plugins at the protocol seam, for tests only: scripted simulators and an echoing assistant.
Loaded by name too (``tests.helpers.plugins:ScriptedSimulator``), in-process and in CLI
subprocesses, so this module imports nothing heavier than the schema."""

from __future__ import annotations

import asyncio

from simloop.schema import AssistantReply, Passage, PtkbUse, SimulatorTurn, Stage

__all__ = ["EchoAssistant", "QuickSimulator", "ScriptedSimulator"]


class ScriptedSimulator:
    """Asks the rubric questions in order, grades 4, then ends satisfied with a closing line.

    Every call reports stages as a model-backed simulator would: ``voice`` for what it
    says, ``grade`` for judging the answer just given (so tests can see where each lands).
    """

    def __init__(self, ctx=None, fail_on: str | None = None, delay: float = 0.0, grade: float = 4.0,
                 closing: str | None = "Thanks, that is all. Bye!"):
        self.fail_on, self.delay, self.grade, self.closing = fail_on, delay, grade, closing

    async def open(self, state):
        q = state.scenario.topic.rubric[0]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", stages=[_stage("voice", 1)])

    async def next(self, state):
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_on and self.fail_on in state.dialogue_id:
            raise RuntimeError(f"simulator broke on {state.dialogue_id}")
        asked = len(state.turns)
        rubric = state.scenario.topic.rubric
        graded = {"grade": self.grade, "grade_stages": [_stage("grade", asked)]}
        if asked >= len(rubric):
            return SimulatorTurn.stop("user_satisfied", "all answered", utterance=self.closing,
                                      stages=[_stage("voice", asked + 1)] if self.closing else [], **graded)
        q = rubric[asked]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", stages=[_stage("voice", asked + 1)],
                                 **graded)


def _stage(name: str, turn: int) -> Stage:
    """A simulator stage that says which turn it belongs to (in its prompt token count)."""
    return Stage(name=f"simulator.{name}", model="scripted", prompt_tokens=turn, completion_tokens=1)


class QuickSimulator:
    """Asks each rubric question once (grade 4), then ends with a goodbye: the policy's
    shape without any model."""

    def __init__(self, ctx=None):
        pass

    async def open(self, state):
        q = state.scenario.topic.rubric[0]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask")

    async def next(self, state):
        rubric = state.scenario.topic.rubric
        if len(state.turns) >= len(rubric):
            return SimulatorTurn.stop("user_satisfied", "all answered", utterance="Thanks, that is all. Bye!",
                                      grade=4.0)
        q = rubric[len(state.turns)]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", grade=4.0)


class EchoAssistant:
    """Answers with the utterance and one passage; records nothing else."""

    def __init__(self, ctx=None, fail_on: str | None = None):
        self.fail_on = fail_on
        self.seen = 0

    async def respond(self, state):
        self.seen += 1
        if self.fail_on and self.fail_on in state.dialogue_id:
            raise ValueError("assistant exploded")
        return AssistantReply(
            response=f"About {state.user.utterance}",
            passages=[Passage(rank=1, docid="doc-1", score=1.5, used=True)],
            ptkb_provenance=[PtkbUse(index=1, statement=state.ptkb[0], score=0.5)],
        )
