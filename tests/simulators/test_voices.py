"""The template voice: varied, deterministic, persona-aware, never the whole PTKB, and
shaped like real iKAT users (short, reworded, referring back, not always a question)."""

from __future__ import annotations

import random
import re
import sys
from collections import Counter

from simloop.fakes.seams import HashEmbedder
from simloop.inputs.personas import load_personas
from simloop.schema import Behaviour, Persona, RubricQuestion, Scenario, Topic
from simloop.simulators.cues import mentions_statement
from simloop.simulators.needs import resolve
from simloop.simulators.paraphrase import casual, clauses, elide_topic, indirect, misspell, subject
from simloop.simulators.policy import Action, Ending, Observation, RubricPolicy, SimContext
from simloop.simulators.voices import TemplateVoice, _noise
from simloop.text import content_terms, words
from tests.helpers.data import ROOT
from tests.helpers.dialogues import shipped_dialogues

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
    RubricQuestion(id="q4", question="What is aspirin and where does it come from?", keywords=["willow"]),
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


# ---------------------------------------------------------------------------- paraphrase


def test_clauses_split_a_question_into_its_parts():
    assert clauses("What is glycogen and where does the body store it?") == [
        "What is glycogen", "where does the body store it"]
    assert clauses("Where does the marathon come from, is it really from a legend?") == [
        "Where does the marathon come from", "is it really from a legend"]
    warsaw = "What is Warsaw, the city where Chopin grew up"
    assert clauses(warsaw + "?") == [warsaw]  # an apposition, not a second question
    assert clauses("Where and when was Go invented?") == ["Where and when was Go invented"]
    # A lead phrase that asks nothing is framing, never a part: not asked alone ("For my exam?").
    assert clauses("For my exam, what is the short definition of natural selection?") == [
        "what is the short definition of natural selection"]
    assert clauses("For my genetics exam, what is DNA and what is the double helix?") == [
        "what is DNA", "what is the double helix"]
    assert clauses("For my genetics exam, I need this.") == ["For my genetics exam, I need this"]


def test_a_pronoun_is_resolved_to_what_it_can_name():
    # "he" is a person: the name a statement opens with or holds, never a common noun.
    assert resolve("What did he achieve as a player?", "Zidane grew up near my restaurant.") == \
        "What did Zidane achieve as a player?"
    assert resolve("Who was he?", "My veena teacher loves Tyagaraja.") == "Who was Tyagaraja?"
    assert resolve("Who was he?", "My grandmother taught me the tango.") is None
    # "it": a name the statement is about ("Fiji is ..."), else the last thing it names.
    assert resolve("Where is it?", "Fiji is my other option for the dive semester.") == "Where is Fiji?"
    assert "Zidane" not in (resolve("Is it far?", "Zidane grew up near my restaurant.") or "")  # a person is no "it"
    assert resolve("What can I do there?", "I have a layover in Doha.") == "What can I do in Doha?"
    # "they": the last plural thing named, unless a "who" clause asks about people no phrase names.
    assert resolve("How big do they get?", "Students ask me about great whites.") == "How big do great whites get?"
    assert resolve("Who were they?", "Ren is learning who lived in Canada before the Europeans arrived.") is None


def test_casual_subject_and_indirect_forms():
    assert casual("What exactly is a marathon") == "What's a marathon"
    assert subject("What is the Rhine river") == "the Rhine river"
    assert subject("Who was Johann Sebastian Bach") == "Johann Sebastian Bach"
    assert subject("What is London like as a city") is None  # a predicate, not a noun phrase
    assert subject("Where is Singapore located") is None
    assert indirect("Where is Fiji") == "where Fiji is"
    assert indirect("Where does cinnamon come from") == "where cinnamon comes from"
    assert indirect("Where do penguins live") == "where penguins live"
    assert indirect("How does a pipe organ produce sound") is None  # unsure of the verb: no guess


def test_elide_topic_examples():
    stems = set(content_terms("Traveling to Egypt"))
    assert elide_topic("What vaccines do I need for Egypt?", stems) == "What vaccines do I need?"
    assert elide_topic("Is ibuprofen safe for kids?", {"ibuprofen"}) == "Is it safe for kids?"
    assert elide_topic("How long does it take for aspirin to work?", {"aspirin"}) == "How long does it take to work?"
    assert elide_topic("Who discovered penicillin and when?", {"penicillin"}) == "Who discovered it and when?"
    assert elide_topic("How much ibuprofen can I take?", {"ibuprofen"}) is None  # never "How much it"
    assert elide_topic("What is a good hotel?", stems) is None


def test_misspell_is_deterministic():
    assert misspell("question", random.Random(3)) == misspell("question", random.Random(3))
    assert misspell("question", random.Random(3)) != "question"
    assert misspell("a", random.Random(3)) == "a"


# ---------------------------------------------------------------------------- determinism, variety


async def test_deterministic_per_seed_and_turn():
    v = voice()
    a = await say(v, ask(0, 1), scenario(seed=5))
    assert a == await say(v, ask(0, 1), scenario(seed=5))


async def test_varied_across_seeds():
    v = voice()
    firsts = {await say(v, ask(0, 1), scenario(seed=s, reveal="never")) for s in range(30)}
    reasks = {await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s)) for s in range(30)}
    assert len(firsts) >= 6 and len(reasks) >= 10


async def test_asks_are_mostly_reworded_but_keep_what_a_retriever_needs():
    v = voice()
    texts = [await say(v, ask(3, 1), scenario(seed=s, reveal="never")) for s in range(40)]
    verbatim = [t for t in texts if RUBRIC[3].question.lower().rstrip("?") in t.lower()]
    assert len(verbatim) <= 8, verbatim  # the rubric question word for word is the exception
    assert all("aspirin" in t.lower() for t in texts)  # nothing is known yet: the subject stays
    assert any("?" not in t for t in texts)  # "Tell me about aspirin." happens
    assert any("come" in t and "?" in t for t in texts)  # and so does the second part


async def test_reask_never_names_answer_words_the_user_does_not_have():
    # Audit 15: a re-ask recited the rubric keywords ("I need something on on the origin of
    # species, 1859 and naturalist"): the user handed the assistant the answer, which the
    # grader then scored.  Keywords are named only once the user has them.
    v = voice()
    reasks = []
    for s in range(40):
        for i, q in enumerate(RUBRIC):
            for attempt in (2, 3):
                action = ask(i, 2, "reask", attempt=attempt, mood="annoyed")
                text = await say(v, action, scenario(seed=s, reveal="never"))
                reasks.append(text)
                said = set(content_terms(text))
                for kw in q.keywords:
                    if not set(content_terms(kw)) <= set(content_terms(q.question)):
                        assert not set(content_terms(kw)) & said, (kw, text)
    assert len(set(reasks)) >= 100  # still varied
    assert any("side effects" in t for t in reasks)  # narrows in the question's own words
    # Once the user has said a keyword, a re-ask may name it.
    history = [("My stomach hurts after aspirin. What are the side effects of aspirin?", "...")]
    named = [await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, reveal="never"), history) for s in range(20)]
    assert any("stomach" in t for t in named) and not any("bleeding" in t for t in named)


async def test_offline_simulator_reasks_never_leak_keywords_of_shipped_personas():
    # Through the real offline simulator (policy, template voice, grader) and the engine, on
    # every shipped topic, against an assistant that never answers: every re-ask is checked.
    from simloop.run.engine import run_dialogue
    from simloop.run.plugins import Context
    from simloop.run.session import DialogueSpec
    from simloop.schema import AssistantReply, PluginRef
    from simloop.simulators.offline import OfflineSimulator

    class Unhelpful:
        async def respond(self, state):
            return AssistantReply(response="Trains run on rails and stop at stations along the line.")

    sim = OfflineSimulator(Context(config=None, overrides={"embedder": HashEmbedder()}))
    spec = DialogueSpec(run_id="r", simulator=PluginRef(name="offline"), assistant=PluginRef(name="x"),
                        max_turns=40, timeout_s=60)
    reasks = 0
    for persona in load_personas(ROOT / "personas"):
        for topic in persona.topics[:2]:
            behaviour = persona.behaviour.model_copy(update={"patience": 20, "cooperativeness": 0.0})
            sc = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=behaviour, seed=3)
            t = await run_dialogue(sc, sim, Unhelpful(), spec)
            rubric = {q.id: q for q in topic.rubric}
            for k, turn in enumerate(t.turns):
                if turn.user.intent != "reask":
                    continue
                reasks += 1
                q = rubric[turn.user.rubric_id]
                have = set(content_terms(q.question)) | set(content_terms(topic.title))
                have |= {s for u in t.turns[:k] for s in content_terms(u.user.utterance)}
                said = set(content_terms(turn.user.utterance))
                for kw in q.keywords:
                    leaked = (set(content_terms(kw)) - have) & said
                    assert not leaked, (kw, turn.user.utterance)
    assert reasks >= 30


async def test_reask_names_a_keyword_as_a_phrase_never_on_on():
    q = RubricQuestion(id="q", question="What is On the Origin of Species about?",
                       keywords=["on the origin of species"])
    sc = Scenario(dialogue_id="d", persona=Persona(id="p", ptkb=PTKB),
                  topic=Topic(id="t", title="Darwin", rubric=[q]), behaviour=Behaviour(reveal="never"), seed=0)
    v = voice()
    texts = []
    for s in range(30):
        sc = sc.model_copy(update={"seed": s})
        texts.append(await say(v, Action("reask", rubric=q, turn=2, attempt=2), sc))
    assert not any(" on on " in f" {t.lower()} " for t in texts), texts
    assert any("the origin of species" in t.lower() for t in texts)


async def test_later_questions_drop_the_topic_noun_when_it_is_clear():
    v = voice()
    history = [("What are the side effects of aspirin?", "Stomach upset and bleeding.")]
    texts = [await say(v, ask(2, 2), scenario(seed=s, reveal="never"), history) for s in range(20)]
    elided = [t for t in texts if "does it take to work?" in t and "aspirin" not in t]
    assert elided, texts  # e.g. "And how long does it take to work?"
    assert any("aspirin" in t for t in texts)  # but not every time


async def test_the_topic_is_not_elided_when_the_last_turns_did_not_name_it():
    v = voice()
    history = [("What are the side effects of aspirin?", "..."), ("Is it safe for kids?", "..."),
               ("And for adults?", "...")]
    texts = [await say(v, ask(2, 4), scenario(seed=s, reveal="never"), history) for s in range(20)]
    assert all("aspirin" in t for t in texts)  # "it" would point at nothing an assistant can recover


# ---------------------------------------------------------------------------- traits


async def test_low_language_skill_is_vaguer_and_misspelt():
    v = voice()
    for s in range(5):
        good = await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, language_skill=1.0, reveal="never"))
        poor = await say(v, ask(0, 2, "reask", attempt=2), scenario(seed=s, language_skill=0.1, reveal="never"))
        assert good != poor
    good_words, poor_words = set(), set()
    for s in range(10):
        good_words |= set(words(await say(v, ask(0, 1), scenario(seed=s, language_skill=1.0, reveal="never"))))
        poor_words |= set(words(await say(v, ask(0, 1), scenario(seed=s, language_skill=0.1, reveal="never"))))
    misspelt = {w for w in poor_words - good_words if len(w) > 3 and not any(w in g or g in w for g in good_words)}
    assert misspelt  # misspellings


async def test_verbosity_low_is_terse_high_is_chatty():
    v = voice()
    terse = [await say(v, ask(1, 2), scenario(seed=s, verbosity=0.0, reveal="never")) for s in range(20)]
    chatty = [await say(v, ask(1, 2), scenario(seed=s, verbosity=1.0, reveal="never")) for s in range(20)]
    assert sum(map(len, terse)) < 0.8 * sum(map(len, chatty))


async def test_terse_users_always_say_something():
    # A terse user drops pleasantries; a clarification request whose "I don't follow" is
    # its whole message must not be dropped with them (it left "" six times in ten).
    v, said = voice(), []
    for s in range(30):
        for verbosity in (0.0, 0.29):
            sc = scenario(seed=s, verbosity=verbosity, reveal="never")
            for kind in ("clarify", "answer_clarification", "reask", "move_on"):
                text, _ = await v.speak(ask(1, 3, kind, attempt=2), SimContext(scenario=sc, assistant_question="Why?"))
                said.append((kind, text))
    assert [k for k, text in said if not text.strip()] == []
    clarify = [text for k, text in said if k == "clarify"]
    assert len(set(clarify)) > 5 and all(len(text.split()) <= 12 for text in clarify)  # varied, still terse


async def test_mood_changes_the_wording():
    v = voice()
    calm = {await say(v, ask(0, 2, "reask", mood="calm"), scenario(seed=s, reveal="never")) for s in range(10)}
    angry = {await say(v, ask(0, 2, "reask", mood="frustrated"), scenario(seed=s, reveal="never")) for s in range(10)}
    assert sum("!" in t for t in angry) > sum("!" in t for t in calm)


# ---------------------------------------------------------------------------- persona facts


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


# ---------------------------------------------------------------------------- closing lines


async def test_closing_lines_never_ask_or_answer_and_rarely_repeat():
    v = voice()
    happy = Action("farewell", turn=4, end=Ending("user_satisfied", ""))
    unhappy = Action("farewell", turn=4, end=Ending("user_gave_up", ""))
    give_up = Action("give_up", rubric=RUBRIC[0], turn=4, mood="frustrated", end=Ending("user_gave_up", ""))
    for s in range(6):
        for action in (happy, unhappy, give_up):
            text = await say(v, action, scenario(seed=s))
            assert "?" not in text and facts_in(text) == []
    thanks = [await say(v, happy, scenario(seed=s)) for s in range(100)]
    assert all("thank" in t.lower() for t in thanks)
    assert Counter(thanks).most_common(1)[0][1] <= 4  # not one stock line for every dialogue


# ---------------------------------------------------------------------------- realism, whole dialogues


async def test_shipped_personas_talk_like_real_ikat_users():
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_realism import statistics  # the bench's definitions (scripts/bench_realism.py)

    stats = statistics(await shipped_dialogues())
    assert 0.7 * 12.44 <= stats["words_per_utterance"] <= 1.3 * 12.44, stats  # real mean 12.44
    assert stats["distinct2"] >= 0.55, stats
    assert stats["verbatim_rubric_share"] <= 0.20, stats
    assert stats["backreference_share"] >= 0.10, stats
    assert 0.10 <= stats["non_question_share"] <= 0.40, stats
    assert stats["top_utterance_share"] <= 0.01, stats


def test_realism_statistics_follow_their_definitions():
    sys.path.insert(0, str(ROOT / "scripts"))
    from bench_realism import statistics

    q = "What is glycogen and where does the body store it?"
    utts = [
        ("OK, what is glycogen and where does the body store it?", q),  # word for word, inside a longer turn
        ("What's glycogen?", q),
        ("Tell me about glycogen.", q),
        ("And is it stored in the liver?", q),  # "it" within the first four tokens
        ("That's too general.", None),  # "That's" -> "that", "s"
        ("Thanks, bye.", None),
        ("Thanks, bye.", None),
        ("How long would a very long question be before it mentions that?", None),  # pronouns too late
    ]
    s = statistics(utts)
    assert s["utterances"] == 8
    assert s["verbatim_rubric_share"] == 0.25  # 1 of the 4 turns that carry the question
    assert s["backreference_share"] == 2 / 8
    assert s["non_question_share"] == 4 / 8
    assert s["top_utterance_share"] == 2 / 8 and s["top_utterance"] == "thanks bye"
    assert s["words_per_utterance"] == round(sum(len(t.split()) for t, _ in utts) / 8, 3)


# ---------------------------------------------------------------------------- whole sentences


_LINE_POOLS = ("greet", "ack", "chatty", "complain.calm", "complain.annoyed", "complain.frustrated", "decline",
               "skip.calm", "skip.frustrated", "confused", "no_answer")


def _split(text: str) -> list[list[str]]:
    return [words(sent) for sent in re.split(r"(?<=[.!?])\s+", text) if words(sent)]


def _orphaned_tails(text: str) -> list[str]:
    """Sentences of pool lines, three words or longer, of which a sentence of ``text`` is
    all but the first word ("came up at dinner." for "It came up at dinner.")."""
    from simloop.simulators.voice_lines import LINES

    said = _split(text)
    pool = [sent for key in _LINE_POOLS for line in LINES[key] for sent in _split(line)]
    # "Makes sense." is a line of its own, not "That makes sense." cut short.
    return sorted({" ".join(sent) for sent in pool if len(sent) >= 3 and sent[1:] in said and sent[1:] not in pool})


async def test_a_template_line_never_loses_its_first_word():
    # "That's the same thing again. came up at dinner.": a poorly spelt user's noise dropped
    # the "It" of a small-talk line, leaving a fragment glued to the complaint before it.
    v = voice()
    orphans = []
    for s in range(120):
        sc = scenario(seed=s, language_skill=0.05, verbosity=1.0, reveal="never")
        for action in (ask(1, 2), ask(0, 2, "reask", attempt=2, mood="annoyed"), ask(2, 3, "move_on"),
                       ask(1, 3, "clarify"), ask(1, 3, "reask", attempt=2, mood="frustrated")):
            text = await say(v, action, sc)
            orphans += [(line, text) for line in _orphaned_tails(text)]
    assert orphans == []


def test_a_poorly_spelt_short_question_keeps_every_word():
    # "My daughter lives in Vancouver. Where's?": the noise dropped the "it" of a
    # three-word question, which then asked about nothing; "who lived in before the
    # Europeans" lost its Canada the same way.  Longer sentences still lose function words.
    kept, dropped = [], 0
    for seed in range(300):
        text = _noise("My daughter lives in Vancouver. Where is it? What do the people there speak at home? "
                      "Who lived in it before the Europeans?", 0.05, random.Random(seed))
        sentences = re.split(r"(?<=[.?!])\s+", text)
        kept.append(len(sentences[1].split()))
        dropped += len(sentences[2].split()) < 9
        assert sentences[3].split()[3].lower() != "before", text  # "in" keeps its "it"
    assert set(kept) == {3}
    assert dropped > 100


def test_orphaned_tails_finds_the_reported_fragment():
    assert _orphaned_tails("That's the same thing again. came up at dinner.") == ["it came up at dinner"]
    assert _orphaned_tails("That's the same thing again. It came up at dinner.") == []


async def _closing_after(grades: list[float], seed: int, questions: int = 5) -> tuple[str, str]:
    """(stop reason, closing line) of a dialogue whose answers get ``grades`` in turn."""
    rubric = [RubricQuestion(id=f"q{i}", question=f"What is thing number {i}?") for i in range(questions)]
    sc = scenario(seed=seed, patience=20).model_copy(update={"topic": Topic(id="t", title="Things", rubric=rubric)})
    policy, memory, v = RubricPolicy(rubric, sc.behaviour, seed), {}, voice()
    action = policy.start(memory)
    for grade in grades:
        action = policy.step(memory, Observation(grade))
        if action.end is not None:
            break
    assert action.kind == "farewell", action
    return action.end.reason, await say(v, action, sc)


_CLAIMS_ALL = ("everything", "all i needed", "was helpful", "that helps", "covers it", "got what i need",
               "learned a lot", "perfect", "brilliant", "awesome")


async def test_the_closing_line_agrees_with_how_the_dialogue_went():
    # "That was helpful, thanks." closed a dialogue whose last three answers had failed:
    # satisfied (most questions answered) is not the same as everything answered.
    mixed = [4, 4, 4, 1, 1, 1, 1, 1, 1]  # three answered, the last two moved past after three tries each
    for s in range(60):
        reason, line = await _closing_after(mixed, s)
        assert reason == "user_satisfied"
        assert not any(claim in line.lower() for claim in _CLAIMS_ALL), line
    happy = [await _closing_after([4] * 5, s) for s in range(60)]
    assert all(reason == "user_satisfied" and "thank" in line.lower() for reason, line in happy)
    assert any(any(claim in line.lower() for claim in _CLAIMS_ALL) for _, line in happy)  # the full thanks exists
