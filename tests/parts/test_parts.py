"""Reusable assistant parts with the seam fakes: PTKB ranking, rewrite, extractive answer, stages."""

from __future__ import annotations

import asyncio

import pytest

from simloop.fakes.seams import HashEmbedder
from simloop.parts.generate import NO_ANSWER, extractive_answer
from simloop.parts.ptkb import rank_ptkb_by_embedding
from simloop.parts.rewrite import heuristic_rewrite, is_dependent, request_text
from simloop.parts.stages import timed_stage
from simloop.search import Hit
from simloop.text import STOPWORDS, words

PTKB = ["I am vegetarian and I cook tofu often.", "I live in Porto.", "I play the cello in an orchestra."]

HITS = [
    Hit("cello", 9.0, "Cello\nThe cello is a bowed string instrument. It has four strings tuned in fifths. "
        "Cellists play it seated. The cello price depends on the maker and its age."),
    Hit("violin", 7.0,
        "Violin\nThe violin is the smallest bowed string instrument. Its strings are tuned in fifths too."),
    Hit("porto", 3.0, "Porto\nPorto is a city in Portugal. It is known for port wine."),
]


# --------------------------------------------------------------------------- PTKB


async def test_ptkb_selects_none_for_an_unrelated_query():
    assert await rank_ptkb_by_embedding(HashEmbedder(), "quantum chromodynamics lattice", PTKB, 0.3, 3) == []


async def test_ptkb_ranks_related_statements_with_1_based_indices():
    uses = await rank_ptkb_by_embedding(HashEmbedder(), "who tunes a cello in an orchestra", PTKB, 0.2, 3)
    assert [u.index for u in uses] == [3]
    assert uses[0].statement == PTKB[2] and 0.2 <= uses[0].score <= 1.0


async def test_ptkb_top_k_and_empty_inputs():
    embedder = HashEmbedder()
    everything = await rank_ptkb_by_embedding(embedder, "i", PTKB, -1.0, 2)
    assert len(everything) == 2 and everything[0].score >= everything[1].score
    assert await rank_ptkb_by_embedding(embedder, "cello", [], 0.0, 3) == []
    assert await rank_ptkb_by_embedding(embedder, "  ", PTKB, 0.0, 3) == []


# --------------------------------------------------------------------------- rewrite


def test_rewrite_resolves_a_pronoun_from_the_last_turn():
    history = [("Tell me about the Tesla Model 3 electric car", "The Model 3 is ...")]
    out = heuristic_rewrite("what about its cost?", history, [])
    assert out.startswith("what about its cost?")
    added = out.removeprefix("what about its cost?").split()
    assert "tesla" in added and "electric" in added
    assert not set(added) & STOPWORDS and len(added) == len(set(added))
    assert heuristic_rewrite("what about its cost?", history, []) == out  # deterministic


def test_rewrite_leaves_self_contained_questions_alone_but_adds_facts():
    history = [("Tell me about sharks", "...")]
    question = "What is glycogen and where does the body store it?"
    assert not is_dependent(question)
    assert heuristic_rewrite(question, history, []) == question
    out = heuristic_rewrite(question, history, ["My doctor said I have iron-deficiency anaemia."])
    assert out.startswith(question) and "iron-deficiency" in out and "sharks" not in out


def test_rewrite_follow_up_chain_reaches_two_turns_back():
    history = [("How do sharks breathe underwater?", "..."), ("and sleep?", "...")]
    out = heuristic_rewrite("Why?", history, [])
    assert {"sharks", "breathe", "underwater", "sleep"} <= set(words(out))


def test_rewrite_does_not_repeat_terms_already_asked():
    out = heuristic_rewrite("Is the cello hard?", [("I play the cello", "...")], ["I play the cello."])
    assert words(out).count("cello") == 1


def test_rewrite_carries_no_typo_or_stray_word_into_the_query():
    # Issue 34: "baltic sea?" became "baltic sea? sure waht angling fihsing rod hook".
    answer = "Angling is a fishing technique that uses a fish hook on a fishing line and a fishing rod."
    history = [("sure, waht about angling with a fihsing rod and hook?", answer)]
    out = heuristic_rewrite("baltic sea?", history, [])
    added = words(out.removeprefix("baltic sea?"))
    assert not {"sure", "waht", "fihsing"} & set(added), out
    assert {"angling", "fishing", "rod", "hook"} <= set(added)  # the subject stays, spelt as the answer spells it
    # Feedback and small talk are no search terms, in the utterance or from earlier turns.
    out = heuristic_rewrite("That's still too vague. What do pike eat?",
                            [("Still not it. Tell me about pike.", "")], [])
    assert out == "What do pike eat?"
    # Words the answers did not use, and real words one letter apart, stay as they are.
    assert "movies" in heuristic_rewrite("and why?", [("Tell me about classic movies", "The moves of a dance ...")], [])


@pytest.mark.parametrize(("said", "asked"), [
    ("Focus on veena.", "Veena?"),  # "focus" found an optics article; a request still asks
    ("Ugh, not again! Could you focus on hockey team score?", "Hockey team score?"),
    ("ugh, not again! my point is: what kind of city is it?", "what kind of city is it?"),  # "point": geometry
    ("Oh, one more thing: what kind of animal is a house cat?", "What kind of animal is a house cat?"),
    ("Seriously, that's useless! The part about causes, please.", "Causes?"),
    ("This is getting frustrating! Can we talk about cheese?", "Cheese?"),
    ("Once again, no. Really, where's it?", "Where's it?"),  # a question with no content word stays
    ("Just so you know, I am flying to Vancouver. How many people live there?",
     "Just so you know, I am flying to Vancouver. How many people live there?"),  # a statement, not a frame
    ("What is the boiling point of water?", "What is the boiling point of water?"),  # "point" inside stays
    ("Thanks!", "Thanks!"),  # nothing but feedback: kept whole
])
def test_the_query_drops_what_only_frames_the_request(said: str, asked: str):
    assert request_text(said) == asked
    assert heuristic_rewrite(said, []) == asked


def test_a_why_question_that_names_its_subject_stands_alone():
    history = [("My youngest granddaughter had malaria last year.", "Malaria is a mosquito-borne disease.")]
    question = "Why do female mosquitoes drink human blood?"
    assert not is_dependent(question)
    assert heuristic_rewrite(question, history) == question
    assert is_dependent("Why?") and "malaria" in heuristic_rewrite("Why?", history)


# --------------------------------------------------------------------------- extractive answer


def test_extractive_answer_is_short_relevant_and_cites_hits():
    text, used = extractive_answer("how are cello strings tuned", HITS, max_words=30)
    assert len(text.split()) <= 30
    assert used and set(used) <= {h.docid for h in HITS}
    assert "tuned in fifths" in text
    assert used == sorted(used, key=[h.docid for h in HITS].index)  # rank order


def test_extractive_answer_keeps_reading_order_and_skips_off_topic():
    text, used = extractive_answer("cello price maker", HITS, max_words=220)
    assert "price" in text and "Porto" not in text
    first, second = text.find("bowed string"), text.find("price depends")
    assert -1 < first < second or first == -1


def test_extractive_answer_without_hits_and_with_a_tiny_budget():
    assert extractive_answer("anything", []) == (NO_ANSWER, [])
    text, used = extractive_answer("cello", HITS, max_words=3)
    assert len(text.split()) <= 3 and used == ["cello"]


def test_extractive_answer_focus_favours_the_users_own_words():
    query = "what about its price cello violin smallest"
    text, _ = extractive_answer(query, HITS, max_words=15, focus="what about its price")
    assert "price" in text


# --------------------------------------------------------------------------- stages


async def test_timed_stage_records_latency_and_errors():
    stages = []
    async with timed_stage("retrieve", stages):
        await asyncio.sleep(0.001)
    with timed_stage("rewrite", stages, model=None):
        pass
    with pytest.raises(ValueError):
        async with timed_stage("generate", stages) as t:
            raise ValueError("boom")
    assert [s.name for s in stages] == ["retrieve", "rewrite", "generate"]
    assert all(s.prompt_tokens == 0 and s.model is None for s in stages)
    assert stages[0].latency_ms > 0 and stages[2].error == "ValueError: boom" and t.stage is stages[2]


def test_turns_down_reads_a_complaint_not_small_talk():
    from simloop.parts.rewrite import turns_down

    for said in ("That's not it again. Who founded Carthage?", "Seriously, that's useless! Only teeth.",
                 "Close, but no. Where is it?", "That doesn't answer it.", "Ugh, not again! And the capital?"):
        assert turns_down(said), said
    for said in ("No rush. What is the capital?", "Doesn't matter. Who founded it?", "I don't eat meat. Any recipes?",
                 "Who won the 2019 World Cup?", "Oh, I didn't know that. And the capital?",
                 "Not helpful? Why is that?", "No, I meant the Canadian one."):
        assert not turns_down(said), said


def test_chit_chat_stays_out_of_the_request_and_the_context():
    from simloop.parts.rewrite import heuristic_rewrite, request_text

    assert request_text("I'm taking notes. It came up at dinner. Where is Fiji?") == "Where is Fiji?"
    assert request_text("What did we have for dinner in Fiji?") == "What did we have for dinner in Fiji?"
    # an earlier turn's frame and chit-chat lend no word to a follow-up's query
    history = [("Seriously, that's useless! It matters to me. The part about great white sharks, please.", "...")]
    query = heuristic_rewrite("And their teeth?", history)
    assert "sharks" in query and not {"matters", "part", "useless"} & set(query.split())
