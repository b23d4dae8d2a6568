"""The template voice: varied, deterministic, persona-aware, never the whole PTKB."""

from __future__ import annotations

import random

from simloop.schema import Behaviour, Persona, RubricQuestion, Scenario, Topic
from simloop.simulators.policy import Action, Ending, SimContext
from simloop.simulators.cues import mentions_statement
from simloop.text import content_terms, words
from simloop.simulators.voices import TemplateVoice, elide_topic, misspell
from simloop.fakes.seams import HashEmbedder

PTKB = [
    "Ibuprofen allergies run in my family.",
    "I live in Porto.",
    "I play the cello in an orchestra.",
    "My sister is a nurse.",
]
RUBRIC = [
    RubricQuestion(id="q1", question="What are the side effects of aspirin?", keywords=["stomach", "bleeding"]),
    RubricQuestion(id="q2", question="Is aspirin safe for people with ibuprofen allergies?", keywords=["allergy"]),
    RubricQuestion(id="q3", question="How long does it take for aspirin to work?", keywords=["minutes"]),
]
TOPIC = Topic(id="t", title="Aspirin", rubric=RUBRIC)


def scenario(seed: int = 1, **behaviour) -> Scenario:
    persona = Persona(id="p", ptkb=PTKB)
    return Scenario(dialogue_id="d", persona=persona, topic=TOPIC, behaviour=Behaviour(**behaviour), seed=seed)


def voice(**kw) -> TemplateVoice:
    return TemplateVoice(embedder=HashEmbedder(), **kw)


async def say(v: TemplateVoice, action: Action, sc: Scenario, history=(), asked=None) -> str:
    text, stages = await v.speak(action, SimContext(scenario=sc, history=list(history), assistant_question=asked))
    assert stages == [] and text.strip()
    return text


def ask(i: int, turn: int, kind: str = "ask", **kw) -> Action:
    return Action(kind, rubric=RUBRIC[i], turn=turn, **kw)


def facts_in(text: str) -> list[str]:
    return [f for f in PTKB if mentions_statement(text, f)]


async def test_deterministic_per_seed_and_turn():
    v = voice()
    a = await say(v, ask(0, 1), scenario(seed=5))
    assert a == await say(v, ask(0, 1), scenario(seed=5))


async def test_varied_across_seeds():
    v = voice()
    firsts = {await say(v, ask(0, 1), scenario(seed=s, reveal="never")) for s in range(30)}
    reasks = {await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s)) for s in range(30)}
    assert len(firsts) >= 6 and len(reasks) >= 6


async def test_reask_is_more_specific_with_the_keywords():
    v = voice()
    for s in range(10):
        text = await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, reveal="never"))
        assert "stomach" in text and "bleeding" in text


async def test_later_questions_drop_the_topic_noun_when_it_is_clear():
    v = voice()
    history = [("What are the side effects of aspirin?", "Stomach upset and bleeding.")]
    texts = [await say(v, ask(2, 2), scenario(seed=s, reveal="never"), history) for s in range(20)]
    elided = [t for t in texts if "does it take to work?" in t and "aspirin" not in t]
    assert elided, texts  # e.g. "And how long does it take to work?"
    assert any("aspirin" in t for t in texts)  # but not every time


def test_elide_topic_examples():
    stems = set(content_terms("Traveling to Egypt"))
    assert elide_topic("What vaccines do I need for Egypt?", stems) == "What vaccines do I need?"
    assert elide_topic("Is ibuprofen safe for kids?", {"ibuprofen"}) == "Is it safe for kids?"
    assert elide_topic("How long does it take for aspirin to work?", {"aspirin"}) == "How long does it take to work?"
    assert elide_topic("How much ibuprofen can I take?", {"ibuprofen"}) is None  # never "How much it"
    assert elide_topic("What is a good hotel?", stems) is None


async def test_low_language_skill_is_vaguer_and_misspelt():
    v = voice()
    for s in range(5):
        good = await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, language_skill=1.0, reveal="never"))
        poor = await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, language_skill=0.1, reveal="never"))
        assert good != poor
    vocabulary = set(words(" ".join(q.question for q in RUBRIC) + " stomach bleeding aspirin"))
    poor_words = set()
    for s in range(10):
        poor_words |= set(words(await say(v, ask(0, 1), scenario(seed=s, language_skill=0.1, reveal="never"))))
    assert poor_words - vocabulary - set(words("hi hello hey there quick question i hope you can help was wondering "
                                               "looking into can help me with something"))  # misspellings


def test_misspell_is_deterministic():
    assert misspell("question", random.Random(3)) == misspell("question", random.Random(3))
    assert misspell("question", random.Random(3)) != "question"
    assert misspell("a", random.Random(3)) == "a"


async def test_verbosity_low_is_terse_high_is_chatty():
    v = voice()
    terse = [await say(v, ask(1, 2), scenario(seed=s, verbosity=0.0, reveal="never")) for s in range(10)]
    chatty = [await say(v, ask(1, 2), scenario(seed=s, verbosity=1.0, reveal="never")) for s in range(10)]
    assert sum(map(len, terse)) < sum(map(len, chatty))


async def test_reveal_never_volunteers_nothing():
    v = voice(reveal_threshold=0.0)  # even with every fact "related"
    for s in range(10):
        sc = scenario(seed=s, reveal="never", verbosity=1.0)
        for action in [ask(0, 1), ask(1, 2), ask(1, 3, "reask", attempt=2), ask(2, 4, "move_on")]:
            assert facts_in(await say(v, action, sc)) == []


async def test_reveal_eager_volunteers_one_fact_in_the_first_turn():
    v = voice()
    for s in range(5):
        text = await say(v, ask(0, 1), scenario(seed=s, reveal="eager"))
        assert len(facts_in(text)) == 1


async def test_reveal_relevant_mentions_a_related_fact_once():
    v = voice(reveal_threshold=0.2)  # hashed bag-of-words: the fact shares two words with q2
    sc = scenario(seed=2, reveal="relevant")
    first = await say(v, ask(1, 2), sc, [("What are the side effects of aspirin?", "Stomach upset.")])
    assert facts_in(first) == ["Ibuprofen allergies run in my family."]  # shares "ibuprofen allergies" with q2
    history = [("What are the side effects of aspirin?", "Stomach upset."), (first, "No answer.")]
    again = await say(v, ask(1, 3, "reask", attempt=2), sc, history)
    assert facts_in(again) == []  # at most once per fact
    unrelated = await say(v, ask(0, 1), scenario(seed=2, reveal="relevant"))
    assert facts_in(unrelated) == []


async def test_never_the_whole_ptkb():
    v = voice(reveal_threshold=0.0)
    kinds = ["ask", "reask", "clarify", "answer_clarification", "move_on"]
    for s in range(8):
        for reveal in ("eager", "relevant", "never"):
            sc = scenario(seed=s, reveal=reveal, verbosity=1.0)
            for turn, kind in enumerate(kinds, start=1):
                text = await say(v, ask(turn % 3, turn, kind), sc, asked="Do you have any allergies?")
                assert len(facts_in(text)) <= 1, text


async def test_answering_the_assistants_question_uses_a_persona_fact():
    v = voice()
    text = await say(v, ask(1, 2, "answer_clarification"), scenario(seed=1, reveal="never"),
                     [("What are the side effects of aspirin?", "Do you have an ibuprofen allergy?")],
                     asked="Do you have an ibuprofen allergy?")
    assert facts_in(text) == ["Ibuprofen allergies run in my family."]


async def test_mood_changes_the_wording():
    v = voice()
    calm = {await say(v, ask(0, 2, "reask", mood="calm"), scenario(seed=s, reveal="never")) for s in range(10)}
    angry = {await say(v, ask(0, 2, "reask", mood="frustrated"), scenario(seed=s, reveal="never")) for s in range(10)}
    assert sum("!" in t for t in angry) > sum("!" in t for t in calm)


async def test_closing_lines_never_ask_or_answer():
    v = voice()
    happy = Action("farewell", turn=4, end=Ending("user_satisfied", ""))
    unhappy = Action("farewell", turn=4, end=Ending("user_gave_up", ""))
    give_up = Action("give_up", rubric=RUBRIC[0], turn=4, mood="frustrated", end=Ending("user_gave_up", ""))
    for s in range(6):
        for action in (happy, unhappy, give_up):
            text = await say(v, action, scenario(seed=s))
            assert "?" not in text and facts_in(text) == []
    assert "thank" in (await say(v, happy, scenario(seed=0))).lower()
