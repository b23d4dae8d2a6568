"""Evidence (issue 34): the user checks an answer's claims and focus against the reference.

The MiniLM tests grade hand-made answers with a reference: an honest paraphrase passes,
the same answer negated, with its names swapped, padded with another subject, or
answering an earlier question fails.  Validity on real iKAT answers is
scripts/bench_grader.py's.
"""

from __future__ import annotations

import random

import pytest

from simloop.fakes.falsify import negate
from simloop.schema import Behaviour, Persona, RubricQuestion, Scenario, Topic
from simloop.simulators.policy import SimContext

REFERENCE = (
    "Egypt has a hot desert climate. The best time to visit Egypt is from October to April, during the cooler "
    "winter months, when daytime temperatures are around 20 to 25 degrees. Summer, from June to August, is "
    "extremely hot, often above 40 degrees in Luxor and Aswan. Cairo is the capital and the largest city.")
QUESTION = "When is the best time of year to visit Egypt?"
HONEST = ("The cooler months from October to April are the best time for a trip to Egypt, with days of about "
          "20 to 25 degrees. Avoid the summer: from June to August it is extremely hot in Luxor and Aswan.")
ANGLING_REF = (
    "Angling is a fishing technique that uses a fish hook attached to a fishing line to tether individual fish in the "
    "mouth. The fishing line is usually manipulated with a fishing rod, although rodless techniques such as handlining "
    "also exist. Modern angling rods are usually fitted with a fishing reel that functions as a cranking device for "
    "storing, retrieving and releasing out the line.")
# The three padded demo answers of issue 34, as bm25_extractive wrote them, with the corpus
# summaries scripts/demo_references.py picked as their references (ANGLING_REF above).
ANGLING = (
    "Angling is a fishing technique that uses a fish hook attached to a fishing line to tether individual fish in the "
    "mouth. The fishing line is usually manipulated with a fishing rod, although rodless techniques such as "
    "handlining also exist. Modern angling rods are usually fitted with a fishing reel that functions as a cranking "
    "device for storing, retrieving and releasing out the line, although Tenkara fishing and traditional cane pole "
    "fishing are two rod-angling methods that do not use any reel.")
BOWLING = (
    "The lane's long and narrow shape limits straight-line ball paths to angles that are shallower than the ideal "
    "entry angle(s) for achieving strikes; accordingly, bowlers impart side rotation to hook (curve) the ball into "
    "the pins to increase the likelihood of striking. The gnomon may be a rod, wire, or elaborately decorated metal "
    "casting.")
RUGBY_REF = (
    "The Men's Rugby World Cup is a rugby union tournament contested every four years between the top international "
    "teams, the winners of which are recognized as the world champions of the sport. The tournament is administered by "
    "World Rugby, the sport's international governing body. The winners are awarded the Webb Ellis Cup, named after "
    "William Webb Ellis.")
RUGBY = (
    "The Men's Rugby World Cup is a rugby union tournament contested every four years between the top international "
    "teams, the winners of which are recognized as the world champions of the sport.")
RUGBY_PAD = (
    "The ICC Men's Cricket World Cup is a quadrennial world cup for cricket in One Day International (ODI) format, "
    "organised by the International Cricket Council (ICC). The FIFA World Cup is an international association football "
    "competition among the senior men's national teams of the members of the Fédération Internationale de Football "
    "Association (FIFA), the sport's global governing body.")
VANCOUVER_REF = (
    "Vancouver is a major city in Western Canada, located in the Lower Mainland region of British Columbia. As the "
    "most populous city in the province, the 2021 Canadian census recorded 662,248 people in the city, up from "
    "631,486 in 2016. The Greater Vancouver area had a population of 2.6 million in 2021.")
VANCOUVER = (
    "Vancouver is a major city in Western Canada, located in the Lower Mainland region of British Columbia. As the "
    "most populous city in the province, the 2021 Canadian census recorded 662,248 people in the city, up from "
    "631,486 in 2016.")
FREYJA = "By her husband Óðr, she is the mother of two daughters, Hnoss and Gersemi."


@pytest.fixture
async def minilm_grader():
    from simloop.search.embeddings import open_embedder
    from simloop.simulators.graders import EmbeddingGrader

    embedder = await open_embedder()
    yield EmbeddingGrader(embedder=embedder)
    await embedder.aclose()


async def _grade(grader, question: str, response: str, reference: str | None = REFERENCE, **kw) -> float:
    return (await grader.explain(RubricQuestion(id="q", question=question, reference=reference), response, **kw)).grade


@pytest.mark.slow
async def test_an_honest_paraphrase_passes_and_its_negations_fail(minilm_grader):
    assert await _grade(minilm_grader, QUESTION, HONEST) > 3.0
    for style in ("auxiliary", "lexical"):
        wrong = negate(HONEST, random.Random(0), style)
        parts = await minilm_grader.explain(RubricQuestion(id="q", question=QUESTION, reference=REFERENCE), wrong)
        assert parts.grade <= 3.0 and parts.contradicts > 0, (style, wrong, parts)
    # a changed date range alone is a wrong answer too
    moved = HONEST.replace("October to April", "May to September")
    assert await _grade(minilm_grader, QUESTION, moved) <= 3.0


@pytest.mark.slow
async def test_swapped_names_fail(minilm_grader):
    swapped = HONEST.replace("Egypt", "Morocco").replace("Luxor and Aswan", "Marrakesh and Fes")
    parts = await minilm_grader.explain(RubricQuestion(id="q", question=QUESTION, reference=REFERENCE), swapped)
    assert parts.grade <= 3.0 and "entity" in parts.conflicts, parts


@pytest.mark.slow
@pytest.mark.parametrize("question,reference,answer,padding", [
    ("What is angling with a fishing rod and hook?", ANGLING_REF, ANGLING, BOWLING),
    ("What is the Rugby World Cup?", RUGBY_REF, RUGBY, RUGBY_PAD),
    ("Where is Vancouver and how many people live there?", VANCOUVER_REF, VANCOUVER, FREYJA),
], ids=["angling", "rugby", "vancouver"])
async def test_the_padded_demo_answers_of_issue_34_fail(minilm_grader, question, reference, answer, padding):
    assert await _grade(minilm_grader, question, answer, reference) > 3.0
    parts = await minilm_grader.explain(RubricQuestion(id="q", question=question, reference=reference),
                                        f"{answer} {padding}")
    assert parts.grade <= 3.0 and parts.off_topic > 0.2, parts


@pytest.mark.slow
async def test_an_answer_to_an_earlier_question_does_not_answer_this_one(minilm_grader):
    first = RubricQuestion(id="q1", question=QUESTION, reference=REFERENCE)
    second = RubricQuestion(id="q2", question="Do American citizens need a visa to enter Egypt?",
                            reference="American citizens need a visa to enter Egypt. An e-visa can be bought online "
                                      "before the trip, or a visa on arrival at Cairo airport for 25 dollars.")
    topic = Topic(id="t", title="Egypt", rubric=[first, second])
    persona = Persona(id="p", ptkb=["I am American."], behaviour=Behaviour(), topics=[topic])
    scenario = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(), seed=1)
    context = SimContext(scenario=scenario)
    grade, _ = await minilm_grader.grade(second, HONEST, context)
    assert grade <= 1.0
    visa = ("Yes: Americans need a visa for Egypt, either an e-visa bought online or a visa on arrival in Cairo "
            "for 25 dollars.")
    assert (await minilm_grader.grade(second, visa, context))[0] > 3.0
    # without the dialogue, there is no earlier question
    assert (await minilm_grader.explain(second, HONEST)).capped != "earlier"


async def test_the_reference_costs_no_extra_encode_call():
    from simloop.fakes.seams import HashEmbedder
    from simloop.simulators.graders import EmbeddingGrader

    embedder = HashEmbedder()
    g = EmbeddingGrader(embedder=embedder)
    parts = await g.explain(RubricQuestion(id="q", question=QUESTION, reference=REFERENCE), HONEST)
    assert embedder.calls == 2 and parts.reference is not None and parts.contradicts == 0.0
