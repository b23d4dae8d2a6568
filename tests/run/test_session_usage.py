"""A dialogue that ends in an error or a timeout still records what it billed.

The LLM simulator and an assistant that asks the LLM twice per turn, against the real mock
server over HTTP with the real openai client; the mock's stats are what was sent and billed."""

from __future__ import annotations

import pytest

from simloop.config import RunConfig
from simloop.evaluate.stats import run_stats
from simloop.fakes.mockllm import MockLLM
from simloop.fakes.seams import HashEmbedder
from simloop.llm.client import LLMConfig, LLMRole
from simloop.run.engine import run_dialogue
from simloop.run.plugins import Context
from simloop.run.session import DialogueSpec
from simloop.schema import AssistantReply, Behaviour, Persona, PluginRef, RubricQuestion, Scenario, Topic, Transcript
from simloop.simulators.llm import LLMSimulator

pytestmark = pytest.mark.timeout(90)

SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="llm"), assistant=PluginRef(name="a"), max_turns=4,
                    timeout_s=30)


def scenario() -> Scenario:
    rubric = [RubricQuestion(id="r1", question="What are the side effects of ibuprofen?"),
              RubricQuestion(id="r2", question="How much ibuprofen can I take per day?")]
    persona = Persona(id="p", ptkb=["I am vegetarian.", "I have a kidney problem."])
    topic = Topic(id="t", title="Ibuprofen", need="You wonder about ibuprofen.", rubric=rubric)
    return Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(), seed=3)


class TwoCallAssistant:
    """Rewrites, then answers: two LLM calls a turn, each a stage of the reply."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    async def respond(self, state) -> AssistantReply:
        query = await self.ctx.chat("assistant.rewrite").chat([{"role": "user", "content": state.user.utterance}],
                                                               stage="rewrite")
        answer = await self.ctx.chat("assistant.generate").chat([{"role": "user", "content": query.text}],
                                                                stage="generate")
        return AssistantReply(response=answer.text, stages=[query.stage, answer.stage])


async def dialogue(mock: MockLLM, *outcomes: str, spec: DialogueSpec = SPEC) -> Transcript:
    role = LLMRole(base_url=mock.url, model="mock-model", max_attempts=2, backoff_base_s=0.0, backoff_cap_s=0.0)
    ctx = Context(config=RunConfig(llm=LLMConfig(default=role)), overrides={"embedder": HashEmbedder()})
    mock.inject(*outcomes)
    try:
        return await run_dialogue(scenario(), LLMSimulator(ctx), TwoCallAssistant(ctx), spec)
    finally:
        await ctx.aclose()


def assert_everything_sent_is_recorded(t: Transcript, mock: MockLLM) -> None:
    stats = mock.stats()
    assert t.usage.calls + t.usage.retries == stats["requests"]
    assert (t.usage.prompt_tokens, t.usage.completion_tokens) == tuple(stats["billed"].values())
    summary = run_stats([t]).model_dump()  # summary.json's stats read the same stages
    assert summary["llm_calls"] + summary["retries"] == stats["requests"]
    assert summary["tokens"]["prompt"] == t.usage.prompt_tokens


@pytest.fixture
async def mock():
    async with MockLLM(seed=1, hang_s=30) as server:
        yield server


async def test_an_assistant_failure_keeps_the_stages_it_billed(mock):
    # voice ok, rewrite ok, generate 500 twice (max_attempts 2): the dialogue ends in an error.
    t = await dialogue(mock, "ok", "ok", "500", "500")
    assert t.stop.reason == "error" and t.error.source == "llm" and t.turns == []
    assert [s.name for s in t.loose_stages] == ["simulator.voice", "rewrite", "generate"]
    failed = t.loose_stages[-1]
    assert failed.retries == 1 and failed.error.startswith("LLMStatusError")
    assert_everything_sent_is_recorded(t, mock)
    assert run_stats([t]).stage_errors == {failed.error: 1}


async def test_a_timeout_keeps_the_stages_billed_and_the_request_in_flight(mock):
    # voice ok, rewrite ok, generate hangs past the dialogue's timeout: that request was sent too.
    t = await dialogue(mock, "ok", "ok", "timeout", spec=DialogueSpec(**{**SPEC.__dict__, "timeout_s": 10.0}))
    assert t.stop.reason == "timeout" and t.turns == []
    assert [s.name for s in t.loose_stages] == ["simulator.voice", "rewrite", "generate"]
    assert t.loose_stages[-1].error.startswith("cancelled")
    assert_everything_sent_is_recorded(t, mock)


async def test_a_simulator_failure_files_its_stages_on_the_turn_it_graded(mock):
    # Turn 1 answered (voice, rewrite, generate), then the grading fails twice and the repair
    # is never reached: the grade's stage goes on turn 1, with its error.
    t = await dialogue(mock, "ok", "ok", "ok", "500", "500")
    assert t.stop.reason == "error" and [x.index for x in t.turns] == [1]
    names = [s.name for s in t.turns[0].stages]
    assert names == ["simulator.voice", "rewrite", "generate", "simulator.grade"]
    assert t.turns[0].stages[-1].error and t.loose_stages == []
    assert_everything_sent_is_recorded(t, mock)
