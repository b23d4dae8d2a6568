"""The LLM simulator against the real mock server over HTTP (and a scripted model at the seam)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simloop.config import RunConfig
from simloop.run.engine import run_dialogue
from simloop.run.session import DialogueSpec
from simloop.errors import BadInputError, DialogueError
from simloop.llm.client import ChatResult, LLMConfig, LLMRole
from simloop.fakes.mockllm import MockLLM
from simloop.run.plugins import Context, load_plugin
from simloop.schema import AssistantReply, Behaviour, Persona, PluginRef, RubricQuestion, Scenario, Stage, Topic
from simloop.simulators.llm import LLMGrader, LLMSimulator, LLMVoice, build_messages, invalid_reason, second_person
from simloop.simulators.policy import Action, SimContext
from simloop.fakes.seams import HashEmbedder

RUBRIC = [
    RubricQuestion(id="r1", question="What are the side effects of ibuprofen?", keywords=["stomach"]),
    RubricQuestion(id="r2", question="How much ibuprofen can I take per day?"),
]


def scenario(**behaviour) -> Scenario:
    persona = Persona(id="p", ptkb=["I am vegetarian.", "My sister lives in Porto.", "I have a kidney problem."])
    topic = Topic(id="t", title="Ibuprofen", need="You have a headache and wonder about ibuprofen.", rubric=RUBRIC)
    return Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(**behaviour), seed=3)


class Assistant:
    async def respond(self, state):
        return AssistantReply(response="Ibuprofen can upset the stomach; adults take at most 1200 mg a day.")


SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="llm"), assistant=PluginRef(name="a"), max_turns=12, timeout_s=60)


@pytest.fixture
async def mock():
    async with MockLLM(seed=1) as server:
        yield server


def context(url: str, **overrides) -> Context:
    role = LLMRole(base_url=url, model="mock-model", max_attempts=2, backoff_base_s=0.0, backoff_cap_s=0.0)
    return Context(config=RunConfig(llm=LLMConfig(default=role)), overrides={"embedder": HashEmbedder(), **overrides})


async def test_full_small_dialogue_over_http(mock):
    ctx = context(mock.url)
    sim = load_plugin("simulator", "llm", {"candidates": 2}, ctx)
    t = await run_dialogue(scenario(), sim, Assistant(), SPEC)
    await ctx.aclose()
    assert t.error is None and t.stop.by == "simulator"
    assert t.stop.reason in ("user_satisfied", "user_gave_up")
    assert t.turns[0].user.rubric_id == "r1" and t.stop.utterance  # the closing line, not a turn
    for turn in t.turns:
        assert turn.user.utterance.strip()
        names = [s.name for s in turn.stages if s.model == "mock-model"]
        assert names[0] == "simulator.voice" and names.count("simulator.grade") == 1  # its own grading
    grades = [turn.user.grade for turn in t.turns]
    assert all(g is not None and 0 <= g <= 5 and g == int(g) for g in grades)
    calls = sum(1 for turn in t.turns for s in turn.stages if s.model == "mock-model")
    assert mock.stats()["requests"] == calls == t.usage.calls  # the closing line's call too


async def test_empty_content_is_retried_then_recorded_as_dialogue_error(mock):
    ctx = context(mock.url)
    mock.inject("empty", "empty")  # both attempts of the ChatModel's retry layer
    t = await run_dialogue(scenario(), LLMSimulator(ctx), Assistant(), SPEC)
    await ctx.aclose()
    assert [outcome for _, outcome in mock.log] == ["empty", "empty"]
    assert t.stop.reason == "error" and t.stop.by == "engine"
    assert t.error.type == "DialogueError" and "no content" in t.error.message
    assert t.error.source == "llm"  # the model failed, not the simulator
    assert t.turns == []


async def test_one_empty_reply_is_retried_and_the_dialogue_goes_on(mock):
    ctx = context(mock.url)
    mock.inject("empty")
    t = await run_dialogue(scenario(), LLMSimulator(ctx), Assistant(), SPEC)
    await ctx.aclose()
    assert t.error is None
    assert t.turns[0].stages[0].name == "simulator.voice" and t.turns[0].stages[0].retries == 1


class RecordingModel:
    """The real ChatModel, with every result kept (to check which candidate was chosen)."""

    def __init__(self, inner):
        self.inner, self.results = inner, []

    async def chat(self, messages, **kw):
        res = await self.inner.chat(messages, **kw)
        self.results.append((kw.get("n"), res))
        return res

    async def structured(self, messages, schema, **kw):
        return await self.inner.structured(messages, schema, **kw)


async def test_n_candidates_keeps_the_one_closest_to_the_rubric_question(mock):
    ctx = context(mock.url)
    recorder = RecordingModel(ctx.chat("simulator"))
    ctx.overrides["chat:simulator"] = recorder
    voice = LLMVoice(ctx, candidates=4)
    action = Action("ask", rubric=RUBRIC[0], turn=1)
    text, stages = await voice.speak(action, SimContext(scenario=scenario()))
    await ctx.aclose()
    [(n, res)] = recorder.results
    assert n == 4 and len(set(res.texts)) > 1
    emb = HashEmbedder()
    vecs = await emb.encode([RUBRIC[0].question, *res.texts])
    best = res.texts[int(np.argmax(vecs[1:] @ vecs[0]))]
    assert text == best and stages[0].name == "simulator.voice"


class ScriptedModel:
    """A fake ChatModel at the seam: returns the given replies in order."""

    def __init__(self, replies):
        self.replies, self.prompts = list(replies), []

    async def chat(self, messages, *, stage, n=1, **kw):
        self.prompts.append(messages)
        text = self.replies.pop(0)
        return ChatResult(text, [text] * n, Stage(name=stage, model="scripted"))


async def test_replies_that_play_the_assistant_are_retried_then_fail():
    bad = "As an AI language model, I can tell you that ibuprofen is an NSAID."
    model = ScriptedModel([bad, bad, bad])
    voice = LLMVoice(Context(config=None, overrides={"chat:simulator": model}))
    with pytest.raises(DialogueError, match="after 3 attempts.*assistant"):
        await voice.speak(Action("ask", rubric=RUBRIC[0], turn=1), SimContext(scenario=scenario()))
    assert "could not be used" in model.prompts[1][0]["content"]  # the retry says why (and misses the cache)


async def test_an_invalid_reply_then_a_good_one():
    model = ScriptedModel(["Sure! Here is a summary of ibuprofen.", 'User: "Does it hurt the stomach?"'])
    voice = LLMVoice(Context(config=None, overrides={"chat:simulator": model}))
    text, stages = await voice.speak(Action("ask", rubric=RUBRIC[0], turn=1), SimContext(scenario=scenario()))
    assert text == "Does it hurt the stomach?" and len(stages) == 2


async def test_unparsable_grade_becomes_none_and_the_user_asks_for_clarification(mock):
    ctx = context(mock.url)
    grader = LLMGrader(ctx)
    mock.inject("badjson", "badjson")  # the first answer and its one repair
    grade, stages = await grader.grade(RUBRIC[0], "Some reply.", SimContext(scenario=scenario()))
    assert grade is None and stages and stages[0].name == "simulator.grade"
    sim = LLMSimulator(ctx, voice="template")
    sim.grader = grader
    mock.inject("badjson", "badjson")
    t = await run_dialogue(scenario(), sim, Assistant(), replace(SPEC, max_turns=2))
    await ctx.aclose()
    assert t.turns[0].user.grade is None and t.turns[1].user.intent == "clarify"


async def test_voice_and_grader_can_be_switched_to_the_offline_ones(mock):
    ctx = context(mock.url)
    sim = LLMSimulator(ctx, voice="template", grader="embedding")
    t = await run_dialogue(scenario(), sim, Assistant(), SPEC)
    await ctx.aclose()
    assert t.error is None and mock.stats()["requests"] == 0
    with pytest.raises(BadInputError):
        load_plugin("simulator", "llm", {"voice": "shouting"}, ctx)


def test_prompt_swaps_roles_and_describes_the_persona_in_second_person():
    sc = scenario(language_skill=0.2, verbosity=0.1, reveal="never", patience=1)
    ctx = SimContext(scenario=sc, history=[("Side effects of ibuprofen?", "Stomach upset, mostly.")],
                     assistant_question=None)
    messages = build_messages(Action("reask", rubric=RUBRIC[0], turn=2, attempt=2, mood="frustrated"), ctx)
    system = messages[0]["content"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "Side effects of ibuprofen?" and messages[3]["content"] == "Stomach upset, mostly."
    assert "- You are vegetarian." in system and "- Your sister lives in Porto." in system
    assert "I am vegetarian" not in system
    assert RUBRIC[0].question in system and "stomach" in system  # the instruction and what to focus on
    assert "spelling mistakes" in system and "terse" in system and "impatient" in system
    assert "frustrated" in system


def test_second_person_and_invalid_reason():
    assert second_person("I'm allergic to nuts and my dog hates me.") == "You're allergic to nuts and your dog hates you."
    ask = Action("ask", rubric=RUBRIC[0], turn=1)
    assert invalid_reason("Does it hurt?", ask) is None
    assert "assistant" in invalid_reason("As an AI, I think", ask)
    assert "instead of asking" in invalid_reason(" ".join(["word"] * 70), ask)
    assert invalid_reason("   ", ask) == "it was empty"


async def test_repeats_with_other_seeds_are_not_cache_copies(mock, tmp_path):
    """--repeat N must give N samples even with the cache on; the same seed replays."""
    role = LLMRole(base_url=mock.url, model="mock-model", max_attempts=2, backoff_base_s=0.0, backoff_cap_s=0.0)
    cfg = RunConfig(llm=LLMConfig(default=role, cache=tmp_path / "c.sqlite"))
    ctx = Context(config=cfg, overrides={"embedder": HashEmbedder()})
    voice = LLMVoice(ctx)
    base = scenario()
    for seed in (3, 4, 3):  # the third is a rerun of the first
        sc = base.model_copy(update={"seed": seed})
        await voice.speak(Action(kind="ask", rubric=RUBRIC[0], turn=1), SimContext(scenario=sc))
    await ctx.aclose()
    assert mock.stats()["requests"] == 2
