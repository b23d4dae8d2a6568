"""Context strategies: window arithmetic, the summary update's inputs, the adaptive budget."""

from __future__ import annotations

import numpy as np
import pytest

from simloop.config import RunConfig
from simloop.errors import LLMTimeoutError
from simloop.fakes import ScriptedChat
from simloop.fakes.seams import HashEmbedder
from simloop.memory import (
    FullHistory,
    MemoryStrategy,
    SummaryMemory,
    WindowMemory,
    available_strategies,
    make_memory,
)
from simloop.memory.adaptive import (
    AdaptiveMemory,
    _extract,
    _Msg,
    _render,
    entity_score,
    history_share,
    segment,
    window_size,
)
from simloop.run.plugins import Context
from simloop.schema import Behaviour, DialogueState, Persona, RubricQuestion, Scenario, Topic, Turn, UserTurn
from simloop.text import clip_to_tokens, count_tokens

PTKB = ["I am vegetarian.", "I live in Porto and cycle to work.", "I play the cello in an orchestra."]


def state_with(history: list[tuple[str, str]], utterance: str, ptkb: list[str] = PTKB) -> DialogueState:
    topic = Topic(id="t", title="t", rubric=[RubricQuestion(id="q1", question="?")])
    persona = Persona(id="p", ptkb=ptkb, topics=[topic])
    scenario = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(), seed=1)
    turns = [Turn(index=i, user=UserTurn(utterance=u), assistant={"response": a})
             for i, (u, a) in enumerate(history, 1)]
    return DialogueState(dialogue_id="d", scenario=scenario, turns=turns, user=UserTurn(utterance=utterance))


def advance(state: DialogueState, response: str, next_utterance: str) -> None:
    """Finish the current turn the way the engine does and start the next one."""
    state.turns.append(Turn(index=len(state.turns) + 1, user=state.user, assistant={"response": response}))
    state.user = UserTurn(utterance=next_utterance)


def deps(**chats) -> Context:
    return Context(RunConfig(), overrides={"embedder": HashEmbedder(), **{f"chat:{k}": v for k, v in chats.items()}})


TOPICS = [
    ("How do I tune a cello?", "The cello's four strings are tuned in fifths: C, G, D and A, from the lowest."),
    ("What rosin should I use?", "Darker rosin is softer and suits the cello; apply it before each practice."),
    ("Which vegetarian dishes are typical in Porto?", "Porto is known for francesinha, but vegetarian versions exist."),
    ("Is cycling in Porto hilly?", "Porto is very hilly; many cyclists use electric bikes on the steep streets."),
    ("How long does a cello bow last?",
     "A good bow lasts decades; the hair needs replacing every six to twelve months."),
]


def long_history(n: int = 30, answer_words: int = 120) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        q, a = TOPICS[i % len(TOPICS)]
        filler = " ".join(f"detail{i}_{j}." if j % 12 == 11 else f"word{j}" for j in range(answer_words))
        out.append((f"{q} (asked in turn {i + 1})", f"{a} {filler} In 2019 Maria decided to buy one."))
    return out


# ----------------------------------------------------------------------------- tokens, registry


def test_one_token_counter_and_clipping():
    assert count_tokens("") == 0 and count_tokens("one") == 2 and count_tokens("a b c d e f g h i j") == 13
    text = " ".join(f"w{i}" for i in range(100))
    for budget in (0, 1, 7, 50, 129, 130, 1000):
        assert count_tokens(clip_to_tokens(text, budget)) <= budget
    assert clip_to_tokens(text, 1000) == text


def test_registry_names_and_bad_input():
    assert available_strategies() == ["full", "summary", "window", "adaptive"]
    for name in available_strategies():
        assert isinstance(make_memory(name), MemoryStrategy) and make_memory(name).name == name
    with pytest.raises(ValueError, match="unknown memory strategy 'nope'"):
        make_memory("nope")
    with pytest.raises(ValueError, match="bad params"):
        make_memory("full", turns=3)
    with pytest.raises(ValueError, match="5-10 messages"):
        make_memory("adaptive", block_min=3)


# ----------------------------------------------------------------------------- full, window


async def test_full_history_has_every_turn_and_counts_its_tokens():
    state = state_with(TOPICS, "And the strings?")
    text, info, stages, _ = await FullHistory().build(state, deps())
    assert all(q in text and a in text for q, a in TOPICS)
    assert "And the strings?" not in text  # the current utterance travels separately
    assert info.strategy == "full" and info.tokens == count_tokens(text) and stages == []


@pytest.mark.parametrize("turns,done,kept", [(3, 0, []), (3, 2, [1, 2]), (3, 5, [3, 4, 5]), (1, 5, [5]), (0, 5, [])])
async def test_window_keeps_the_last_n_turns(turns, done, kept):
    memory = WindowMemory(turns)
    assert [i + 1 for i in memory.window(done)] == kept
    text, info, _, _ = await memory.build(state_with(TOPICS[:done], "next?"), deps())
    assert [n for n in range(1, done + 1) if f"(turn {n})" in text] == kept
    assert info.strategy == "window" and info.turns == len(kept) and info.tokens == count_tokens(text)


# ----------------------------------------------------------------------------- summary


async def test_summary_update_gets_previous_summary_turn_response_and_current_utterance():
    chat = ScriptedChat(["Summary: The user tunes a cello in fifths.", "User plays cello; asked about rosin."])
    ctx = deps(**{"assistant.summary": chat})
    memory = SummaryMemory(max_words=40)
    state = state_with([], "How do I tune a cello?")

    text, info, stages, _ = await memory.build(state, ctx)
    assert (text, stages, chat.calls) == ("", [], [])  # turn 1: nothing to summarise, no call

    advance(state, "Strings are tuned C G D A.", "What rosin should I use?")
    text, info, stages, _ = await memory.build(state, ctx)
    prompt = chat.prompt()
    for part in ("How do I tune a cello?", "Strings are tuned C G D A.", "What rosin should I use?", "empty"):
        assert part in prompt
    assert text == "The user tunes a cello in fifths." and info.tokens == count_tokens(text)
    assert [s.name for s in stages] == ["summary"] and stages[0].model == "scripted"
    assert chat.calls[0]["stage"] == "summary" and "40 words" in chat.calls[0]["messages"][0]["content"]

    assert (await memory.build(state, ctx)).text == text and len(chat.calls) == 1  # same turn: cached

    advance(state, "Darker rosin suits cellos.", "And strings?")
    text, _, _, _ = await memory.build(state, ctx)
    prompt = chat.prompt()
    assert "The user tunes a cello in fifths." in prompt  # the previous summary goes back in
    assert "What rosin should I use?" in prompt and "Darker rosin suits cellos." in prompt and "And strings?" in prompt
    assert "How do I tune a cello?" not in prompt  # older turns live on in the summary only
    assert text == "User plays cello; asked about rosin."


async def test_summary_failure_keeps_the_dialogue_going_and_retries_the_exchange():
    chat = ScriptedChat([LLMTimeoutError("slow"), "Cello tuning, then rosin."])
    ctx = deps(**{"assistant.summary": chat})
    memory = SummaryMemory()
    state = state_with([("How do I tune a cello?", "In fifths.")], "What rosin?")
    text, info, stages, _ = await memory.build(state, ctx)
    assert stages[0].error and "How do I tune a cello?" in text and info.summarised_turns == 0
    advance(state, "Dark rosin.", "And strings?")
    text, info, _, _ = await memory.build(state, ctx)
    prompt = chat.prompt()
    assert "How do I tune a cello?" in prompt and "Dark rosin." in prompt  # both unfolded turns
    assert text == "Cello tuning, then rosin." and info.summarised_turns == 2


def test_summary_output_is_capped():
    from simloop.memory.summary import _clean_summary

    assert _clean_summary("Summary: " + "word " * 500, 150).split().__len__() == 150


# ----------------------------------------------------------------------------- adaptive


def test_formula_one_and_balance():
    assert window_size(1000, 100, 8) == 8 and window_size(500, 100, 8) == 5 and window_size(50, 100, 8) == 0
    assert window_size(100, 0, 6) == 6
    assert history_share(0, False) < history_share(10, False) < history_share(10, True)
    assert history_share(10, True, rag_quality=0.9) < history_share(10, True, rag_quality=0.1)
    assert all(0.2 <= history_share(n, d, q) <= 0.7 for n in (0, 50) for d in (True, False) for q in (None, 0, 1))
    assert entity_score("It rained. In 2019 we decided to move.") == 0.5


def test_blocks_hold_five_to_ten_messages_and_cut_at_user_turns():
    rng = np.random.default_rng(0)
    for n in (5, 12, 23, 58):
        roles = ["User", "Assistant"] * (n // 2) + ["User"] * (n % 2)
        vecs = rng.normal(size=(n, 16))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        blocks = segment(roles, vecs, 5, 10, shift=0.25)
        assert [i for b in blocks for i in b] == list(range(n))
        assert all(len(b) <= 10 for b in blocks) and all(len(b) >= 5 for b in blocks[:-1])
        assert all(roles[b[0]] == "User" for b in blocks)


@pytest.mark.parametrize("budget,system,reserve", [(2048, 250, 0), (2048, 250, 900), (800, 200, 300), (400, 100, 250)])
async def test_adaptive_never_exceeds_its_budget_on_30_turn_histories(budget, system, reserve):
    memory = AdaptiveMemory(token_budget=budget, system_tokens=system)
    history = long_history(30)
    for n in (0, 1, 5, 12, 30):
        state = state_with(history[:n], "What about the cello bow hair, how often?")
        text, info, _, _ = await memory.build(state, deps(), reserve_tokens=reserve)
        limit = budget - system - (reserve or round((1 - info.history_share) * (budget - system)))
        assert info.tokens == count_tokens(text) <= limit == info.budget
        assert info.window_messages <= 2 * n
        if n >= 12 and info.budget >= 200:  # below that not even one condensed sentence fits
            assert info.blocks >= 1 and "Earlier in the conversation" in text
            assert ("Most recent messages" in text) == (info.window_messages > 0)
            assert count_tokens(text) < count_tokens("\n".join(q + a for q, a in history[:n]))


async def test_adaptive_keeps_what_matters_to_the_query():
    food = [("Which vegetarian dishes are typical in Porto?", "Vegetarian francesinha exists. In 2019 Rui decided to "
             "open a vegetarian tasca near the river. " + "The sauce is rich and warm. " * 20)] * 5
    music = [("How do I tune a cello again?", "Cellos are tuned in fifths. " + "The pegs turn slowly and hold. " * 20)
             for _ in range(25)]
    memory = AdaptiveMemory(token_budget=700, system_tokens=100, k_max=2)
    state = state_with(music[:10] + food + music[10:], "Which vegetarian place in Porto did you mention?")
    text, info, _, _ = await memory.build(state, deps(), reserve_tokens=360)
    older = text.split("Most recent messages:")[0]
    assert info.kept_blocks < info.blocks and info.tokens <= 240
    assert "turns 11-15" in older and "vegetarian" in older.lower()  # on topic beats off topic
    assert "turns 1-" not in older and "turns 6-" not in older and "turns 16-" not in older
    condensed = _render(_extract([_Msg(i, role, text) for i, (u, a) in enumerate(food, 1)
                                  for role, text in (("User", u), ("Assistant", a))], {"vegetarian", "porto"}, 0.02))
    assert condensed.count("Which vegetarian dishes") == 1 and "In 2019 Rui decided" in condensed
    assert condensed.count("sauce") <= 1  # filler goes first, and a repeat is kept once at most


async def test_llm_compression_is_cached_per_block():
    chat = ScriptedChat(lambda messages: "Condensed: cello, rosin, Porto.")
    memory = AdaptiveMemory(token_budget=1200, system_tokens=100, k_max=2, compressor="llm", compress_below=1.1)
    state = state_with(long_history(20, answer_words=40), "And the bow?")
    ctx = deps(**{"assistant.compress": chat})
    _, info, stages, _ = await memory.build(state, ctx, reserve_tokens=200)
    first_calls = len(chat.calls)
    assert first_calls == info.blocks and [s.name for s in stages].count("memory.compress") == first_calls
    assert all(s.model == "scripted" for s in stages if s.name == "memory.compress")
    advance(state, "Bows last decades.", "Thanks, and rosin?")
    await memory.build(state, ctx, reserve_tokens=200)
    assert len(chat.calls) - first_calls <= 1  # only a block that changed is condensed again
