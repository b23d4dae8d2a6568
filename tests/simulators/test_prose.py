"""The grader's form checks (simulators/prose.py): a list of terms states nothing, a
shuffled sentence has word pairs English never has; real answers pass both."""

from __future__ import annotations

import random

from simloop.simulators.prose import scrambled_pairs, states_nothing

# Human responses in the style of iKAT: lists with a lead-in clause are answers.
PROSE = [
    "These are some well-known car brands: Acura, Alfa-Romeo, Aston Martin, Audi, BMW, Bentley, Buick.",
    "Here are some famous Turkish souvenirs: Handmade Turkish ceramics, Turkish lamps, and Turkish Carpets.",
    "Gout is a form of arthritis caused by uric acid crystals in a joint, often the big toe.",
    "For example, the Milky Way galaxy has a supermassive black hole at its center, the radio source Sagittarius A*.",
    "Also, the candidate must have a minimum G.P.A. of 3.7. Bachelor of Arts [ B.A in Computer Science: $29,680.",
    "Simply add two to three inches to the top of the soil and work it in.",
]
DUMPS = [
    "Understanding gout: uric acid, joint, arthritis, purines, big toe, flare, diet, alcohol.",
    "Why smoking is so hard to quit: tobacco, nightshade, stimulant, preventable death, smokers, lung, breathe, "
    "airways, nicotine, withdrawal, addictive.",
    "rain, arm, water, gout, pain, include, blood, capillaries, upper, lower, ph, form.",
]


def test_a_list_of_terms_states_nothing_but_a_list_with_a_lead_in_does():
    assert not any(states_nothing(text, 0.3) for text in PROSE)
    assert all(states_nothing(text, 0.3) for text in DUMPS)


def test_shuffled_sentences_have_impossible_word_pairs():
    assert [scrambled_pairs(text) for text in PROSE] == [0] * len(PROSE)
    assert scrambled_pairs("Acid the of joint uric crystals in a. Is the and gout attack.") >= 3
    text = ("Gout is a form of arthritis caused by the deposit of uric acid crystals in the joints of the body. "
            "An attack of gout is often brought on by a rich meal and the alcohol that comes with it.")
    rng = random.Random(0)
    shuffled = [" ".join(rng.sample(s.split(), len(s.split()))) for s in text.split(". ") for _ in range(20)]
    assert sum(scrambled_pairs(s) >= 1 for s in shuffled) >= 10


def test_a_list_led_in_by_the_question_restated_states_nothing_but_a_list_of_names_does():
    question = "How big is the great white shark and what are its teeth like?"
    dump = "The great white shark and what are its teeth like: shark, white, species, modern, selachii, jaws."
    assert states_nothing(dump, 0.3, question)
    assert not states_nothing(dump, 0.3)  # its only verb is the user's: without the echo, a clause
    names = "Phones with that chip are: Samsung Galaxy S22, Xiaomi 12, OnePlus 10 Pro."
    assert not states_nothing(names, 0.3, "Which phones with that chip are there?")
