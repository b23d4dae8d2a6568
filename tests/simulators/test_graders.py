"""The embedding grader: validity on real MiniLM (slow) and its fixed rules (fast).

Validity on real iKAT answers (restatements, other turns, padding, clarifying questions)
is measured by scripts/bench_grader.py; these tests pin the behaviour on hand-made cases.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from simloop.fakes.adversaries import clarifying_question, restate
from simloop.fakes.seams import HashEmbedder
from simloop.schema import RubricQuestion
from simloop.simulators.cues import is_asking
from simloop.simulators.graders import EmbeddingGrader, is_evasive, residual
from simloop.simulators.policy import SimContext
from tests.helpers.data import ikat_file

# (question, keywords, {kind: response}): on-point Wikipedia-style answers must pass (> 3);
# off-topic and evasive replies must fail (<= 3); topical-but-not-answering and other-aspect
# replies grade below the on-point one (on real iKAT answers such replies overlap the human
# answers' grades, so their pass/fail is a threshold trade-off measured by the bench).
CALIBRATION = [
    ("What are the side effects of ibuprofen?", ["side effects"], {
        "on": "Common side effects of ibuprofen include stomach pain, heartburn, nausea, vomiting, headache, dizziness "
              "and drowsiness. Long-term use can cause stomach ulcers, bleeding and kidney problems, and it may raise "
              "the risk of heart attack and stroke.",
        "topical": "Ibuprofen is a nonsteroidal anti-inflammatory drug (NSAID) used for treating pain, fever and "
                   "inflammation. It was discovered in 1961 by Stewart Adams and John Nicholson while working at "
                   "Boots UK.",
        "aspect": "The usual adult dose of ibuprofen is 200 to 400 mg every four to six hours, and no more than "
                  "1200 mg a day without a doctor's advice.",
        "off": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is named "
               "after the engineer Gustave Eiffel.",
        "evasive": "I'm sorry, I don't have enough information to answer that. Could you tell me more about what you "
                   "are looking for?",
    }),
    ("What is the best time of year to visit Egypt?", ["winter", "October", "April"], {
        "on": "The best time to visit Egypt is from October to April, during the cooler winter months, when "
              "temperatures are pleasant for sightseeing. Summer (June to August) is extremely hot.",
        "topical": "Egypt is a country spanning the northeast corner of Africa and the Sinai Peninsula. Its capital is "
                   "Cairo, and it is home to the ancient pyramids of Giza.",
        "aspect": "American citizens need a visa to enter Egypt; an e-visa can be bought online before travelling "
                  "or on arrival at Cairo airport.",
        "off": "Photosynthesis is the process by which green plants use sunlight to synthesize foods from carbon "
               "dioxide and water.",
        "evasive": "That depends on many things. I can't really say.",
    }),
    ("How long does it take to learn to play the violin?", ["years", "practice"], {
        "on": "Learning the violin to a reasonable level usually takes about two to three years of regular practice; "
              "reaching an advanced level takes many more years, typically with daily practice of 30 minutes or more.",
        "topical": "The violin is a wooden string instrument in the violin family. It is the smallest and "
                   "highest-pitched instrument in the family in regular use.",
        "aspect": "A good beginner violin costs between 200 and 500 dollars; renting one is a cheaper option for the "
                  "first months.",
        "off": "Mount Everest is Earth's highest mountain above sea level, located in the Himalayas.",
        "evasive": "Everyone is different, so it's hard to say.",
    }),
    ("Which universities in the Netherlands offer a master's in computer science?",
     ["Delft", "Amsterdam", "Eindhoven"], {
        "on": "Several Dutch universities offer a master's in computer science, including Delft University of "
              "Technology, the University of Amsterdam, Eindhoven University of Technology, Leiden University and "
              "Utrecht University.",
        "topical": "The Netherlands is a country in northwestern Europe. Its largest city and capital is Amsterdam.",
        "off": "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland, "
               "Australia.",
        "evasive": "There are many options. What is your budget?",
    }),
    ("Can vegetarians get enough protein?", ["beans", "lentils", "tofu"], {
        "on": "Yes. Vegetarians can get enough protein from beans, lentils, chickpeas, tofu, tempeh, eggs, dairy, nuts "
              "and seeds; eating a variety of these foods over the day covers the essential amino acids.",
        "topical": "Vegetarianism is the practice of abstaining from the consumption of meat. It may also include "
                   "abstaining from by-products of animal slaughter.",
        "aspect": "A vegetarian diet excludes meat and fish; vegans also avoid eggs and dairy.",
        "off": "Jupiter is the fifth planet from the Sun and the largest in the Solar System.",
        "evasive": "I am not able to give dietary advice.",
    }),
]
CASES = [(q, kw, kind, text) for q, kw, replies in CALIBRATION for kind, text in replies.items()]
OFF_TOPIC = [
    "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland.",
    "Mount Everest is Earth's highest mountain above sea level, located in the Himalayas.",
]


@pytest.fixture
async def minilm_grader():
    from simloop.search.embeddings import open_embedder

    embedder = await open_embedder()
    yield EmbeddingGrader(embedder=embedder)
    await embedder.aclose()


async def _grade(grader, question, response, **fields) -> float:
    return (await grader.explain(RubricQuestion(id="q", question=question, **fields), response)).grade


@pytest.mark.slow
@pytest.mark.parametrize("question,keywords,kind,response", CASES, ids=[f"{q[:20]}-{k}" for q, _, k, _ in CASES])
async def test_minilm_calibration(minilm_grader, question, keywords, kind, response):
    on = next(r["on"] for q, _, r in CALIBRATION if q == question)
    for kw in (keywords, []):  # with and without rubric keywords
        grade = await _grade(minilm_grader, question, response, keywords=kw)
        if kind == "on":
            assert grade > 3.0
        elif kind in ("off", "evasive"):
            assert grade <= 3.0
        else:
            assert grade < await _grade(minilm_grader, question, on, keywords=kw)
    grade, stages = await minilm_grader.grade(RubricQuestion(id="q", question=question), response)
    assert 0.0 <= grade <= 5.0 and stages[0].name == "simulator.grade"


@pytest.mark.slow
@pytest.mark.parametrize("question,keywords,replies", CALIBRATION, ids=[q[:20] for q, _, _ in CALIBRATION])
async def test_restatements_clarifying_questions_and_padding_never_pass(minilm_grader, question, keywords, replies):
    for seed in range(4):
        rng = random.Random(seed)
        for kw in (keywords, []):
            assert await _grade(minilm_grader, question, restate(question, rng), keywords=kw) <= 3.0
            assert await _grade(minilm_grader, question, clarifying_question(question, rng), keywords=kw) <= 1.0
    on = await _grade(minilm_grader, question, replies["on"])
    padded = await _grade(minilm_grader, question, " ".join([replies["on"], *OFF_TOPIC]))
    assert padded <= 3.0 and padded < on
    # the keywords a user spelled out, parroted back, are not an answer either
    said = f"{question} I mean specifically {', '.join(keywords)}."
    parrot = f"So you want to know: {said} Plenty has been written about this."
    q = RubricQuestion(id="q", question=question, keywords=keywords)
    graded, _ = await minilm_grader.grade(q, parrot, SimContext(scenario=None, history=[(said, parrot)]))
    assert graded <= 3.0


@pytest.mark.slow
async def test_a_reference_answer_keeps_the_right_answer_and_lowers_the_others(minilm_grader):
    without, with_ref = [], []
    for question, _, replies in CALIBRATION:
        assert await _grade(minilm_grader, question, replies["on"], reference=replies["on"]) > 3.0
        for kind in ("topical", "aspect"):
            if kind in replies:
                without.append(await _grade(minilm_grader, question, replies[kind]))
                with_ref.append(await _grade(minilm_grader, question, replies[kind], reference=replies["on"]))
    assert sum(with_ref) < 0.8 * sum(without), (with_ref, without)


@pytest.mark.slow
async def test_minilm_separates_ikat_gold_responses_from_shuffled_ones(minilm_grader):
    conversations = json.loads(ikat_file("2024", "2024_test_topics.json").read_text())
    pairs = [(t["resolved_utterance"], t["response"]) for c in conversations for t in c["turns"]][::6]  # CPU time
    shuffled = [r for _, r in pairs]
    random.Random(0).shuffle(shuffled)

    async def pass_rate(items):
        # concurrent calls are coalesced into model batches by the embedder
        grades = await asyncio.gather(*(_grade(minilm_grader, q, r) for q, r in items))
        return sum(g > 3.0 for g in grades) / len(grades)

    gold = await pass_rate(pairs)
    other = await pass_rate([(q, r) for (q, _), r in zip(pairs, shuffled)])
    assert gold > 0.6 and other < 0.1, (gold, other)  # scripts/bench_grader.py measures all turns


async def test_empty_asking_echoing_and_evasive_replies_are_capped():
    g = EmbeddingGrader(embedder=HashEmbedder())
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?")
    assert (await g.explain(q, "   ")).capped == "empty"
    assert (await g.grade(q, "   "))[0] == 0.0
    asking = await g.explain(q, "Which side effects do you mean? Please tell me more about your situation")
    assert asking.capped == "asking" and asking.grade == 0.0
    assert (await g.explain(q, "Sure. What dose of ibuprofen do you take?")).capped == "asking"
    assert (await g.explain(q, "The side effects of ibuprofen, you ask.")).capped == "echo"
    parrot = "I'm not sure about the side effects of ibuprofen."
    assert is_evasive(parrot)
    assert (await g.grade(q, parrot))[0] <= 1.0


def test_residual_drops_every_word_of_the_question_and_person_words():
    q = "How long does my cat sleep?"
    assert residual("Your cat sleeps about 15 hours a day.", q) == "about 15 hours a day."
    assert residual("How long does your cat sleep?", q) == ""


def test_asking_sentences_are_questions_and_requests():
    assert is_asking("Do you mean the drug or the brand?")
    assert is_asking("Please tell me which country you live in.")
    assert is_asking("Could you say more about your budget.")
    assert not is_asking("You can stay close to Vatican City.")
    assert not is_asking("Ibuprofen can upset the stomach.")


async def test_one_encode_call_per_grade():
    embedder = HashEmbedder()
    g = EmbeddingGrader(embedder=embedder)
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?", reference="Stomach pain and nausea.")
    answer = "Ibuprofen can cause stomach pain. It may also cause nausea and dizziness. Would you like more?"
    await g.grade(q, answer)
    # One batch for the answer's texts, one for the question and reference: fixed texts,
    # which MiniLMEmbedder keeps all run (a plain Embedder, like this one, re-encodes them).
    assert embedder.calls == 2


async def test_keyword_coverage_raises_the_grade():
    g = EmbeddingGrader(embedder=HashEmbedder())
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?", keywords=["stomach", "kidney"])
    base = "Ibuprofen has side effects that some patients notice after several days."
    with_keywords = base + " The stomach and kidney are affected most."
    assert (await g.grade(q, with_keywords))[0] > (await g.grade(q, base))[0]


async def test_lists_shuffled_words_and_overlong_answers_are_capped():
    # The audit's adversaries: grades 5.0 before these caps (HashEmbedder: the caps alone).
    g = EmbeddingGrader(embedder=HashEmbedder())
    q = RubricQuestion(id="q", question="What is gout and what causes an attack?", keywords=["uric acid", "joint"])
    answer = ("Gout is a form of arthritis caused by uric acid crystals that build up in a joint. "
              "An attack often follows a rich meal or alcohol, and the big toe is the joint it hits first.")
    assert (await g.explain(q, answer)).capped is None
    dump = await g.explain(q, "Understanding gout: uric acid, joint, arthritis, purines, big toe, flare, diet.")
    assert dump.capped == "list" and dump.grade <= 1.0
    shuffled = ("Arthritis joint a is caused uric the of form gout acid. "
                "First toe the and big alcohol the meal a follows of attack an.")
    assert (await g.explain(q, shuffled)).capped == "scrambled"
    long = " ".join([answer] * 12)  # 432 words
    assert (await g.explain(q, long)).capped == "long"
    assert (await EmbeddingGrader(embedder=HashEmbedder(), max_words=500).explain(q, long)).capped is None


@pytest.mark.slow
async def test_padding_glued_into_one_sentence_is_off_topic(minilm_grader):
    # "... and the printing press ..." after a full stop is one sentence for the splitter:
    # the off-topic check reads it in windows (it saw 0% off topic and graded 4.96).
    question = "What is gout and what causes an attack?"
    answer = ("Gout is a form of arthritis caused by uric acid crystals that build up in a joint. "
              "An attack often follows a rich meal or alcohol, and the big toe is the joint it hits first.")
    pad = ["The printing press was invented by Johannes Gutenberg around 1440 in Mainz.",
           "Honey bees live in colonies with a single queen and thousands of workers.",
           "Steam locomotives were the main motive power on railways for over a century.",
           "Origami is the Japanese art of folding paper into decorative shapes.",
           "Windmills were used to grind grain and pump water in the Netherlands.",
           "A lighthouse is a tower with a lamp that guides ships along the coast."]
    glued = answer + " " + " ".join("and " + p[0].lower() + p[1:] for p in pad)
    parts = await minilm_grader.explain(RubricQuestion(id="q", question=question), glued)
    assert parts.off_topic >= 0.4 and parts.grade <= 3.0
    assert (await minilm_grader.explain(RubricQuestion(id="q", question=question), answer)).off_topic == 0.0


def test_bad_calibration_constants_are_rejected():
    with pytest.raises(ValueError):
        EmbeddingGrader(embedder=HashEmbedder(), cos_floor=0.8, cos_full=0.5)
    with pytest.raises(ValueError):
        EmbeddingGrader(embedder=HashEmbedder(), off_weight=1.5)
    with pytest.raises(ValueError, match="max_words"):
        EmbeddingGrader(embedder=HashEmbedder(), max_words=0)


async def test_the_llm_grader_is_shown_the_reference_when_there_is_one():
    from simloop.fakes import ScriptedChat
    from simloop.run.plugins import Context
    from simloop.simulators.llm import LLMGrader

    chat = ScriptedChat(['{"grade": 4}', '{"grade": 4}'])
    grader = LLMGrader(Context(config=None, overrides={"chat:simulator": chat}))
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?")
    assert (await grader.grade(q, "Stomach pain."))[0] == 4.0
    assert "Your notes" not in chat.prompt() and "the reply is wrong" not in chat.prompt()
    await grader.grade(q.model_copy(update={"reference": "Stomach pain, nausea and dizziness."}), "Stomach pain.")
    assert "Stomach pain, nausea and dizziness." in chat.prompt()
    # with evidence, the model is told that a reply contradicting it is a wrong answer
    assert "the reply is wrong: grade it 0 or 1" in chat.prompt() and "another number or date" in chat.prompt()
