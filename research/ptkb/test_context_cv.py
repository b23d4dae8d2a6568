"""The train-only cross-validation behind the PTKB context measurements (context_cv.py):
leave-one-conversation-out must choose on the other conversations only, and the variants must
add exactly the term they name to the MiniLM ranker's scores."""

from __future__ import annotations

import context_cv as cv
import numpy as np
import pytest

from simloop.parts import RankParams, score_statements


def test_loo_chooses_on_the_other_conversations_only():
    # "spike" is far better on conversation c only.  The folds holding out a and b see c and
    # choose "spike" (turn means over the others: 0.75 vs 0.4, 0.667 vs 0.467); the fold holding
    # out c sees a and b only, chooses "steady" (0.6 vs 0.5), and c is scored with it: a
    # conversation never helps choose for itself.
    conversation = {"a#1": "a", "a#2": "a", "b#1": "b", "c#1": "c"}
    table = {"steady": {"a#1": 0.6, "a#2": 0.6, "b#1": 0.6, "c#1": 0.2},
             "spike": {"a#1": 0.5, "a#2": 0.5, "b#1": 0.5, "c#1": 1.0}}
    mean, chosen, held_out = cv.loo_cv(table, conversation, ["steady", "spike"])
    assert chosen == ["spike", "spike", "steady"]
    assert held_out == pytest.approx([0.5, 0.5, 0.2])
    assert mean == pytest.approx(0.4)  # below either config's mean over all turns (0.5, 0.625)


def test_loo_ties_go_to_the_earlier_configuration():
    conversation = {"a#1": "a", "b#1": "b"}
    table = {"plain": {"a#1": 0.5, "b#1": 0.5}, "extra": {"a#1": 0.5, "b#1": 0.5}}
    assert cv.loo_cv(table, conversation, ["plain", "extra"])[1] == ["plain", "plain"]
    assert cv.loo_cv(table, conversation, ["extra", "plain"])[1] == ["extra", "extra"]


def test_variant_terms():
    S = np.array([[0.30, 0.10, 0.05], [0.00, 0.40, 0.00]])  # current utterance, one back
    f = {"S": S, "canonical": np.array([[0.1, 0.2, 0.9]]), "own": np.zeros((0, 3)),
         "prf": np.array([[0.0, 0.5, 0.0], [0.2, 0.0, 0.0]])}
    plain = score_statements(S, RankParams(history_weight=0.5, decay=0.2, max_history=50))
    assert cv.Variant().scores(f) == pytest.approx(plain)
    lifted = cv.Variant(source="canonical", resp_weight=0.5).scores(f)  # max: a discounted claim
    assert lifted == pytest.approx(np.maximum(plain, [0.05, 0.1, 0.45]))
    assert np.argmax(lifted) == 2  # the statement the previous response named now leads
    added = cv.Variant(source="canonical", resp_weight=0.5, resp_mode="add").scores(f)
    assert added == pytest.approx(plain + [0.05, 0.1, 0.45])
    assert cv.Variant(source="own", resp_weight=0.9).scores(f) == pytest.approx(plain)  # no earlier answer yet
    prf = cv.Variant(prf_weight=1.0, prf_k=2).scores(f)
    assert prf == pytest.approx(plain + [0.2, 0.5, 0.0])
    assert cv.Variant(prf_weight=1.0, prf_k=1).scores(f) == pytest.approx(plain + [0.0, 0.5, 0.0])


def test_pooled_discounts_older_rows():
    rows = np.array([[0.2, 0.0], [0.0, 0.8]])
    assert cv.pooled(rows, 0.5) == pytest.approx([0.2, 0.4])
    assert cv.pooled(rows, 1.0) == pytest.approx([0.2, 0.8])
