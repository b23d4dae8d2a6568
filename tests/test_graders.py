"""The embedding grader: calibration on real MiniLM (slow) and its fixed rules (fast)."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from simloop.schema import RubricQuestion
from simloop.simulators.graders import EmbeddingGrader, is_evasive
from simloop.fakes.seams import HashEmbedder

from conftest import IKAT

# (question, keywords, {kind: response}): on-point Wikipedia-style answers must pass (> 3);
# topical-but-not-answering, other-aspect, off-topic and evasive replies must fail (<= 3).
CALIBRATION = [
    ("What are the side effects of ibuprofen?", ["side effects"], {
        "on": "Common side effects of ibuprofen include stomach pain, heartburn, nausea, vomiting, headache, dizziness "
              "and drowsiness. Long-term use can cause stomach ulcers, bleeding and kidney problems, and it may raise "
              "the risk of heart attack and stroke.",
        "topical": "Ibuprofen is a nonsteroidal anti-inflammatory drug (NSAID) used for treating pain, fever and "
                   "inflammation. It was discovered in 1961 by Stewart Adams and John Nicholson while working at Boots UK.",
        "aspect": "The usual adult dose of ibuprofen is 200 to 400 mg every four to six hours, and no more than 1200 mg "
                  "a day without a doctor's advice.",
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
        "aspect": "American citizens need a visa to enter Egypt; an e-visa can be bought online before travelling or on "
                  "arrival at Cairo airport.",
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
    ("Which universities in the Netherlands offer a master's in computer science?", ["Delft", "Amsterdam", "Eindhoven"], {
        "on": "Several Dutch universities offer a master's in computer science, including Delft University of "
              "Technology, the University of Amsterdam, Eindhoven University of Technology, Leiden University and "
              "Utrecht University.",
        "topical": "The Netherlands is a country in northwestern Europe. Its largest city and capital is Amsterdam.",
        "off": "The Great Barrier Reef is the world's largest coral reef system, off the coast of Queensland, Australia.",
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


@pytest.fixture
async def minilm_grader():
    from simloop.search.embeddings import open_embedder

    embedder = await open_embedder()
    yield EmbeddingGrader(embedder=embedder)
    await embedder.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("question,keywords,kind,response", CASES, ids=[f"{q[:20]}-{k}" for q, _, k, _ in CASES])
async def test_minilm_calibration(minilm_grader, question, keywords, kind, response):
    for kw in (keywords, []):  # with and without rubric keywords
        parts = await minilm_grader.explain(RubricQuestion(id="q", question=question, keywords=kw), response)
        if kind == "on":
            assert parts.grade > 3.0, parts
        else:
            assert parts.grade <= 3.0, parts
    grade, stages = await minilm_grader.grade(RubricQuestion(id="q", question=question), response)
    assert 0.0 <= grade <= 5.0 and stages[0].name == "simulator.grade"


@pytest.mark.slow
async def test_minilm_separates_ikat_gold_responses_from_shuffled_ones(minilm_grader):
    conversations = json.loads((IKAT / "2024" / "2024_test_topics.json").read_text())
    pairs = [(t["resolved_utterance"], t["response"]) for c in conversations for t in c["turns"]][::3]  # CPU time
    shuffled = [r for _, r in pairs]
    random.Random(0).shuffle(shuffled)

    async def pass_rate(items):
        # concurrent calls are coalesced into model batches by the embedder
        parts = await asyncio.gather(*(minilm_grader.explain(RubricQuestion(id="x", question=q), r) for q, r in items))
        return sum(p.grade > 3.0 for p in parts) / len(parts)

    gold = await pass_rate(pairs)
    other = await pass_rate([(q, r) for (q, _), r in zip(pairs, shuffled)])
    assert gold > 0.6 and other < 0.1, (gold, other)  # all 218 turns: 0.77 and 0.02


async def test_empty_and_evasive_replies_fail_whatever_the_similarity():
    g = EmbeddingGrader(embedder=HashEmbedder())
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?")
    assert (await g.grade(q, "   "))[0] == 0.0
    parrot = "I'm not sure about the side effects of ibuprofen."
    assert is_evasive(parrot)
    assert (await g.grade(q, parrot))[0] <= 1.0


async def test_keyword_coverage_raises_the_grade():
    g = EmbeddingGrader(embedder=HashEmbedder())
    q = RubricQuestion(id="q", question="What are the side effects of ibuprofen?", keywords=["stomach", "kidney"])
    base = "Ibuprofen has side effects that some people notice."
    with_keywords = base + " The stomach and kidney are affected most."
    assert (await g.grade(q, with_keywords))[0] > (await g.grade(q, base))[0]


def test_bad_calibration_constants_are_rejected():
    with pytest.raises(ValueError):
        EmbeddingGrader(embedder=HashEmbedder(), cos_floor=0.8, cos_full=0.5)
