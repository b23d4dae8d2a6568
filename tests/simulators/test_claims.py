"""Claim pieces (claims.py): what a sentence states, and when two sentences contradict.

A contradiction is a substitution (a negation added or taken away, an opposite, another
number or name where the other sentence has one), never a mere addition.
"""

from __future__ import annotations

from simloop.simulators.claims import Known, antonym_of, claim, conflicts, entities, numbers


def test_numbers_read_digits_words_and_scales():
    assert numbers("It cost 1,200 dollars in 1990-2000.") == {1200.0, 1990.0, 2000.0}
    assert numbers("twenty-five people and two hundred and five cars") == {25.0, 205.0}
    assert numbers("about 2 million visitors, over two decades") == {2e6, 20.0}
    assert numbers("One of them said no.") == set()  # "one" as a pronoun
    assert numbers("1. Delft 2. Leiden") == set()  # list markers state nothing


def test_entities_are_capitalised_spans_split_at_punctuation():
    text = ("Here are some: Hotel Golden, Hotel Piazza di Spagna, and Hotel Fellini. "
            "Visiting Delft University of Technology is fun.")
    assert entities(text) == [
        "Hotel Golden", "Hotel Piazza di Spagna", "Hotel Fellini", "Delft University of Technology"]
    # a sentence's first word is a name only where the text names it elsewhere
    assert entities("Egypt is hot. Many visit Egypt in March.") == ["Egypt", "Egypt", "March"]
    assert entities("Overall it is hot in March.") == ["March"]


def test_negation_scope_and_antonyms():
    c = claim("Ibuprofen is not safe for children and cannot be frozen; it is no longer sold.")
    assert {"safe", "frozen", "sold"} <= c.negated and c.negators == 3
    assert "fall" in antonym_of("rising") and "lower" in antonym_of("higher")
    assert antonym_of("banana") == set()


def _conflicts(answer: str, ref: str, tight: bool = True, same: bool = True) -> list[str]:
    a, r = claim(answer), claim(ref)
    known = Known(frozenset(r.numbers), frozenset(r.plain))
    return conflicts(a, r, known, tight=tight, same_frame=same)


def test_substitutions_conflict_and_additions_do_not():
    ref = "The best time to visit Egypt is from October to April, when it is cool."
    assert "polarity" in _conflicts("The best time to visit Egypt is not from October to April.", ref)
    assert "antonym" in _conflicts("The best time to visit Egypt is from October to April, when it is warm.", ref)
    assert "entity" in _conflicts("The best time to visit Morocco is from October to April, when it is cool.", ref)
    assert "number" in _conflicts("A visa costs 50 dollars.", "A visa costs 25 dollars.")
    # the same claim, said with more facts, is no contradiction
    assert _conflicts("The best time to visit Egypt is from October to April, when it is cool and Cairo is busy.",
                      ref) == []
    assert _conflicts("A visa costs 25 dollars, about 23 euros.", "A visa costs 25 dollars.") == []
