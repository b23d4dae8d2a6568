"""The wrong-answer generators (falsify.py) the evidence bench and the Negated adversary use."""

from __future__ import annotations

import random

from simloop.fakes.falsify import change_numbers, negate, swap_entities


def test_negation_generators_change_every_statement_they_can():
    text = "The museum is open on Mondays. You can buy tickets online for 12 euros. Visit the garden."
    aux = negate(text, random.Random(1), "auxiliary")
    assert aux == (
        "The museum is not open on Mondays. You cannot buy tickets online for 24 euros. Do not visit the garden.")
    lexical = negate("Prices are higher in summer. The bridge was built in 1890.", random.Random(1), "lexical")
    assert "lower" in lexical and "1879" in lexical and "never" not in lexical.split(".")[0]
    assert change_numbers("In 1990 there were 3 shops.", random.Random(0)) == "In 1997 there were 6 shops."
    swapped = swap_entities("Delft is near Leiden.", ["Delft", "Leiden"], {"Delft": "Utrecht"}.get)
    assert swapped == "Utrecht is near Leiden."
