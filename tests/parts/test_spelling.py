"""Typos respelt against the index's vocabulary (parts/spelling.py).

The index is a seam here (a table of document frequencies); the real index's counts are
tested in tests/search/test_retrieval.py and the agent's use of both in
tests/agents/test_bm25_extractive.py."""

from __future__ import annotations

from collections.abc import Sequence

from simloop.parts import respell
from simloop.parts.spelling import typo_candidates

DF = {"underground": 20, "london": 64, "lava": 10, "la": 70, "mosquitoes": 8, "city": 887, "tyre": 3, "tree": 134,
      "movies": 12, "moves": 40, "gram": 30, "gama": 1, "vasco": 1, "rent": 50, "curium": 3, "youth": 15,
      "both": 643, "football": 90, "bite": 7}


# Words the sentences below spell right, as an index of encyclopedia text holds them.
COMMON = {w: 100 for w in "love get around south lebanon born old pay son plays sail really does out".split()}


class Index:
    """Document frequencies from a table; counts every lookup, as a test of the batching."""

    def __init__(self, df: dict[str, int]):
        self.df, self.calls = {**COMMON, **df}, 0

    async def doc_freq(self, words: Sequence[str]) -> dict[str, int]:
        self.calls += 1
        return {w: self.df.get(w.lower(), 0) for w in words}


async def fix(text: str, known: Sequence[str] = (), english: Sequence[str] = ()) -> str:
    return await respell(text, Index(DF).doc_freq, known, english)


def test_candidates_put_a_hurried_typists_slips_first():
    likely, other = typo_candidates("lva")
    assert "lava" in likely and "la" in other  # a dropped letter before a letter too many
    assert "underground" in typo_candidates("undreground")[0]  # swapped neighbours
    assert "vesuvius" in typo_candidates("vesuviuus")[0]  # a doubled letter


async def test_words_the_index_lacks_are_respelt_and_case_is_kept():
    assert await fix("Can I get around London on the Undreground?") == "Can I get around London on the Underground?"
    assert await fix("how does lva get out?") == "how does lava get out?"  # not "la": a slip comes first
    assert await fix("Why do mosqutoes bite us?") == "Why do mosquitoes bite us?"


async def test_a_word_the_index_holds_is_never_touched():
    index = Index(DF)
    assert await respell("I love movies", index.doc_freq) == "I love movies"  # "moves" is one letter off
    assert index.calls == 1  # nothing unknown: no second lookup for candidates


async def test_the_dialogues_own_words_win_and_a_mistyped_stop_word_is_that_word():
    said = "I was born in Tyre in south Lebanon. How old is Tre, the ciyt?"
    assert await fix(said) == "I was born in Tyre in south Lebanon. How old is Tyre, the city?"
    assert await fix("How old is Tre?") == "How old is Tre?"  # a short name: only the dialogue can fix it
    assert await fix("How old is Tre?", known=["tyre"]) == "How old is Tyre?"
    assert await fix("whaat is it?") == "what is it?"  # "what", not a rarer look-alike


async def test_names_and_real_words_are_not_turned_into_look_alikes():
    # "Gaam" is a name: a swap would give "Gama", but the index holds it too rarely; never "Gram"
    assert await fix("Where did Vacso da Gaam sail?") == "Where did Vacso da Gaam sail?"
    assert await fix("My son Ren plays.") == "My son Ren plays."  # not "Rent"
    # "rents" is a word the corpus lacks, not a typo of "rent" (as "curious" is none of "curium")
    assert await fix("We pay rents.", english=["rents"]) == "We pay rents."
    assert await fix("We pay rents.") == "We pay rent."  # what the list of English words prevents
    assert await fix("My son plays yoth football.", known=["youth"]) == "My son plays youth football."
