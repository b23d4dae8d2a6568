"""DialogueSession: the one place turns are built (DESIGN §2)."""

from __future__ import annotations

import asyncio
import json

from simloop.errors import DialogueError, LLMTimeoutError, RetrievalError
from simloop.run.session import DialogueSession, DialogueSpec
from simloop.schema import AssistantReply, PluginRef, SimulatorTurn, Stage
from tests.helpers.data import make_scenario
from tests.helpers.plugins import EchoAssistant, ScriptedSimulator

SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="a"), max_turns=10, timeout_s=5)


def session(sim=None, spec=SPEC, **kw) -> DialogueSession:
    return DialogueSession(make_scenario(**kw), sim or ScriptedSimulator(), spec)


def stage_turns(turn, kind: str) -> list[int]:
    """Which turns the scripted simulator's ``kind`` stages on ``turn`` were made for."""
    return [s.prompt_tokens for s in turn.stages if s.name == f"simulator.{kind}"]


async def test_turns_grades_and_the_closing_line():
    t = await session().run(EchoAssistant())
    assert t.stop.reason == "user_satisfied" and t.stop.by == "simulator"
    assert t.stop.utterance == "Thanks, that is all. Bye!"  # the closing line is not a turn ...
    assert [x.index for x in t.turns] == [1, 2, 3]
    assert [x.user.utterance for x in t.turns] == [f"question {j} of topic 0?" for j in range(3)]
    assert all(x.assistant.response.startswith("About question") for x in t.turns)  # ... nor answered
    assert all(x.user.grade == 4.0 for x in t.turns)
    assert t.turns[0].user.rubric_id == "q0" and t.turns[0].assistant.passages[0].docid == "doc-1"


async def test_each_stage_lands_on_the_turn_it_belongs_to():
    t = await session().run(EchoAssistant())
    for turn in t.turns:
        assert stage_turns(turn, "voice")[0] == turn.index  # what wrote this turn's utterance
        assert stage_turns(turn, "grade") == [turn.index]  # the grading of this turn's answer
    assert stage_turns(t.turns[-1], "voice") == [3, 4]  # the closing line is filed on the last turn
    assert t.usage.calls == 3 + 3 + 1 and t.usage.prompt_tokens == (1 + 2 + 3) * 2 + 4


async def test_the_assistant_is_never_called_for_the_closing_line():
    assistant = EchoAssistant()
    t = await session().run(assistant)
    assert assistant.seen == len(t.turns) == 3


async def test_no_closing_line_is_recorded_as_null():
    t = await session(ScriptedSimulator(closing=None)).run(EchoAssistant())
    assert t.stop.utterance is None
    assert json.loads(t.model_dump_json(exclude_none=True))["stop"]["utterance"] is None  # always present


async def test_max_turns_is_an_engine_stop():
    t = await session(spec=DialogueSpec(**{**SPEC.__dict__, "max_turns": 2})).run(EchoAssistant())
    assert (t.stop.reason, t.stop.by, len(t.turns), t.stop.utterance) == ("max_turns", "engine", 2, None)
    assert t.turns[-1].user.grade == 4.0  # the last answer was still graded
    assert stage_turns(t.turns[-1], "voice") == [2, 3]  # the unsaid third utterance was paid for


async def test_timeout_is_an_engine_error():
    spec = DialogueSpec(**{**SPEC.__dict__, "timeout_s": 0.05})
    t = await session(ScriptedSimulator(delay=1.0), spec=spec).run(EchoAssistant())
    assert t.stop.reason == "timeout" and t.stop.by == "engine" and len(t.turns) == 1
    assert t.error.type == "TimeoutError" and t.error.source == "engine"


class Failing:
    """An assistant that raises ``exc``."""

    def __init__(self, exc: Exception):
        self.exc = exc

    async def respond(self, state):
        raise self.exc


async def test_errors_are_classified_by_source():
    def llm_error_in(side_exc):
        try:
            raise side_exc from LLMTimeoutError("model timed out")
        except DialogueError as exc:
            return exc

    cases = [
        (Failing(ValueError("exploded")), ScriptedSimulator(), "assistant", "ValueError"),
        (Failing(LLMTimeoutError("slow model")), ScriptedSimulator(), "llm", "LLMTimeoutError"),
        (Failing(RetrievalError("index gone")), ScriptedSimulator(), "retrieval", "RetrievalError"),
        (EchoAssistant(), ScriptedSimulator(fail_on="d1"), "simulator", "RuntimeError"),
        (EchoAssistant(), RaisingSimulator(llm_error_in(DialogueError("voice: no content"))), "llm", "DialogueError"),
    ]
    for assistant, sim, source, type_ in cases:
        t = await session(sim).run(assistant)
        assert (t.stop.reason, t.stop.by, t.error.source, t.error.type) == ("error", "engine", source, type_)


class RaisingSimulator(ScriptedSimulator):
    def __init__(self, exc: Exception):
        super().__init__()
        self.exc = exc

    async def next(self, state):
        raise self.exc


async def test_broken_contracts_are_engine_errors():
    class Talks(ScriptedSimulator):
        async def open(self, state):
            return "hello"

    class Mumbles(EchoAssistant):
        async def respond(self, state):
            return {"response": "a dict"}

    t = await session(Talks()).run(EchoAssistant())
    assert t.error.type == "ContractError" and t.error.source == "engine" and "SimulatorTurn" in t.error.message
    t = await session().run(Mumbles())
    assert t.error.source == "engine" and "AssistantReply" in t.error.message and t.turns == []


async def test_a_simulator_that_ends_at_once_still_counts_its_stages():
    class Leaves:
        async def open(self, state):
            return SimulatorTurn.stop("user_gave_up", "not today", utterance="Never mind.",
                                      stages=[Stage(name="simulator.voice", model="m", prompt_tokens=7)])

        async def next(self, state):
            raise AssertionError("never called")

    t = await session(Leaves()).run(EchoAssistant())
    assert t.turns == [] and t.stop.utterance == "Never mind." and t.usage.prompt_tokens == 7


async def test_step_by_step_with_a_restart_in_between():
    """The server's way: start, answer, dump to JSON, load in a new session, answer on."""
    sim = ScriptedSimulator()
    first = session(sim)
    utterance = await first.start()
    assert utterance == first.state.user.utterance == "question 0 of topic 0?"
    reply = await EchoAssistant().respond(first.state)
    assert await first.answer(reply) == "question 1 of topic 0?"
    saved = json.loads(json.dumps(first.dump()))
    again = DialogueSession.load(saved, make_scenario(), sim, SPEC)
    assert again.utterance == "question 1 of topic 0?" and again.asked_at == first.asked_at
    while utterance is not None:
        utterance = await again.answer(AssistantReply(response="ok"))
    t = again.transcript()
    assert [x.index for x in t.turns] == [1, 2, 3] and t.stop.utterance == "Thanks, that is all. Bye!"
    assert t.started_at == first.started_at and t.turns[0].assistant.passages[0].docid == "doc-1"


async def test_cancellation_is_not_recorded():
    s = session(ScriptedSimulator(delay=5.0))
    task = asyncio.create_task(s.run(EchoAssistant()))
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and s.stop is None
