"""The LLM simulator against the real mock server over HTTP (and a scripted model at the seam)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simloop.config import RunConfig
from simloop.errors import BadInputError
from simloop.fakes.mockllm import MockLLM
from simloop.fakes.seams import HashEmbedder
from simloop.llm.client import ChatResult, LLMConfig, LLMRole
from simloop.run.engine import run_dialogue
from simloop.run.plugins import Context, load_plugin
from simloop.run.session import DialogueSpec
from simloop.schema import AssistantReply, Behaviour, Persona, PluginRef, RubricQuestion, Scenario, Stage, Stop, Topic
from simloop.simulators.llm import LLMGrader, LLMSimulator, LLMVoice, build_messages, invalid_reason, second_person
from simloop.simulators.policy import Action, SimContext
from simloop.text import looks_like_language

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


SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="llm"), assistant=PluginRef(name="a"), max_turns=12,
                    timeout_s=60)


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


async def test_at_the_turn_cap_the_last_answer_is_graded_and_no_utterance_is_written(mock):
    # The utterance for a turn past the cap would never be put: the call for it was a waste.
    ctx = context(mock.url)
    t = await run_dialogue(scenario(), LLMSimulator(ctx), Assistant(), replace(SPEC, max_turns=1))
    await ctx.aclose()
    assert t.error is None and t.stop == Stop.turn_cap(1) and t.stop.by == "engine"
    names = [s.name for s in t.turns[-1].stages if s.model == "mock-model"]
    assert names == ["simulator.voice", "simulator.grade"]  # what wrote it, its grading; nothing after
    assert t.turns[-1].user.grade is not None
    assert mock.stats()["requests"] == 2 == t.usage.calls


async def test_empty_content_is_retried_then_recorded_as_dialogue_error(mock):
    ctx = context(mock.url)
    mock.inject("empty", "empty")  # both attempts of the ChatModel's retry layer
    t = await run_dialogue(scenario(), LLMSimulator(ctx), Assistant(), SPEC)
    await ctx.aclose()
    assert [outcome for _, outcome in mock.log] == ["empty", "empty"]
    assert t.stop.reason == "error" and t.stop.by == "engine"
    assert t.error.type == "DialogueError" and "empty content after 2 attempts" in t.error.message
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


class CheckingModel:
    """A fake ChatModel at the seam: keeps the ``check`` the voice passes to the retry layer."""

    def __init__(self, reply: str):
        self.reply, self.checks = reply, []

    async def chat(self, messages, *, stage, n=1, check=None, **kw):
        self.checks.append((messages[0]["content"], check))
        return ChatResult(self.reply, [self.reply] * n, Stage(name=stage, model="scripted"))


async def test_the_voice_hands_its_output_check_to_the_retry_layer():
    model = CheckingModel("Does it hurt the stomach?")
    voice = LLMVoice(Context(config=None, overrides={"chat:simulator": model}))
    text, _ = await voice.speak(Action("ask", rubric=RUBRIC[0], turn=1), SimContext(scenario=scenario()))
    [(system, check)] = model.checks
    assert text == "Does it hurt the stomach?" and check(text) is None
    assert check('User: "Does it hurt?"') is None  # a label and quotes are cleaned, not rejected
    assert "assistant" in check("As an AI language model, I can tell you that ibuprofen is an NSAID.")
    assert "not language" in check("#@! &&&& ~~~ $$")
    copied = " ".join(system.split("How you write:")[1].split()[:14])
    assert "copied the instructions" in check(copied)
    assert check(f"{RUBRIC[0].question} I get headaches a lot.") is None  # repeating one's own question is fine


async def test_garbage_is_regenerated_inside_the_retry_layer_and_never_written(mock):
    ctx = context(mock.url)
    mock.inject("garbage")
    t = await run_dialogue(scenario(), LLMSimulator(ctx, grader="embedding"), Assistant(), SPEC)
    await ctx.aclose()
    assert [o for _, o in mock.log][:2] == ["garbage", "200"]
    assert t.error is None and t.turns[0].stages[0].name == "simulator.voice"
    assert t.turns[0].stages[0].retries == 1 and t.usage.retries >= 1
    said = [turn.user.utterance for turn in t.turns] + [t.stop.utterance]
    assert all(looks_like_language(u) for u in said), said


async def test_garbage_on_every_attempt_is_a_dialogue_error(mock):
    ctx = context(mock.url)
    mock.inject("garbage", "garbage")  # both attempts the retry layer allows here
    t = await run_dialogue(scenario(), LLMSimulator(ctx, grader="embedding"), Assistant(), SPEC)
    await ctx.aclose()
    assert t.stop.reason == "error" and t.error.type == "DialogueError"
    assert "not language" in t.error.message and "after 2 attempts" in t.error.message
    assert t.turns == []


async def test_one_unparsable_grade_is_repaired_by_the_client(mock):
    ctx = context(mock.url)
    mock.inject("badjson")  # the first answer only: the repair round gets a valid one
    grade, stages = await LLMGrader(ctx).grade(RUBRIC[0], "Some reply.", SimContext(scenario=scenario()))
    await ctx.aclose()
    assert grade is not None and 0 <= grade <= 5 and stages[0].name == "simulator.grade"


async def test_a_grade_the_llm_cannot_deliver_ends_the_dialogue_as_an_llm_error(mock):
    # Not a None grade played as the user asking for clarification: a broken endpoint is
    # infrastructure (re-run by --retry-errors), never user behaviour.
    ctx = context(mock.url)
    sim = LLMSimulator(ctx, voice="template")
    mock.inject("badjson", "badjson")  # the first grade's answer and its one repair
    t = await run_dialogue(scenario(), sim, Assistant(), SPEC)
    await ctx.aclose()
    assert t.stop.reason == "error" and t.stop.by == "engine"
    assert (t.error.source, t.error.type) == ("llm", "StructuredOutputError")
    assert "GradeReply" in t.error.message
    assert [turn.user.intent for turn in t.turns] == ["ask"] and t.turns[0].user.grade is None


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
    assert RUBRIC[0].question in system
    # The rubric keyword is the answer's word, which the user does not know (audit 15)...
    assert "what you are after" not in system and "stomach" not in system
    # ... until the user has said it.
    said = SimContext(scenario=sc, history=[("My stomach hurts. Side effects of ibuprofen?", "...")])
    again = build_messages(Action("reask", rubric=RUBRIC[0], turn=2, attempt=2), said)[0]["content"]
    assert "(what you are after: stomach)" in again
    assert "spelling mistakes" in system and "terse" in system and "impatient" in system
    assert "frustrated" in system


def test_second_person_and_invalid_reason():
    assert (second_person("I'm allergic to nuts and my dog hates me.")
            == "You're allergic to nuts and your dog hates you.")
    ask = Action("ask", rubric=RUBRIC[0], turn=1)
    assert invalid_reason("Does it hurt?", ask) is None
    assert "assistant" in invalid_reason("As an AI, I think", ask)
    lecture = ("Ibuprofen belongs to a class of drugs that reduce fever and pain by blocking enzymes which make "
               "prostaglandins. Most people tolerate it well at normal doses for short periods, although stomach "
               "upset, heartburn and nausea are common complaints. Taking it with food tends to reduce these "
               "problems, while long use raises the risk of ulcers and kidney damage for older patients.")
    assert "instead of asking" in invalid_reason(lecture, ask)
    assert invalid_reason("   ", ask) == "it was empty"
    assert invalid_reason("xkqt zzrv bnm", ask) == "it was not language"
    assert invalid_reason("ok?", ask) is None


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


async def test_under_every_fault_kind_no_user_line_is_garbage():
    """A small version of the issue-11 measurement (200 dialogues against mock-llm --fault-rate
    0.3): whatever the faults, every recorded user line is language."""
    from simloop.fakes.mockllm import FAULT_KINDS

    async with MockLLM(seed=5, fault_rate=0.3, faults=",".join(FAULT_KINDS), retry_after_s=0.01, hang_s=30) as server:
        role = LLMRole(base_url=server.url, model="mock-model", max_attempts=6, timeout_s=0.5, backoff_base_s=0.0,
                       backoff_cap_s=0.0)
        ctx = Context(config=RunConfig(llm=LLMConfig(default=role)), overrides={"embedder": HashEmbedder()})
        sim = LLMSimulator(ctx)
        ts = [await run_dialogue(scenario().model_copy(update={"seed": s, "dialogue_id": f"d{s}"}), sim, Assistant(),
                                 SPEC) for s in range(6)]
        await ctx.aclose()
        faults = server.stats()["faults"]
    said = [turn.user.utterance for t in ts for turn in t.turns] + [t.stop.utterance for t in ts if t.stop.utterance]
    assert faults.get("garbage", 0) >= 1 and len(said) >= 12
    assert all(looks_like_language(u) for u in said), [u for u in said if not looks_like_language(u)]
    assert sum(s.retries for t in ts for turn in t.turns for s in turn.stages) >= 1
