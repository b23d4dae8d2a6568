"""The signals behind the PTKB token/clause measurements (signals_cv.py): MaxSim
must read the direction it names, clauses must keep the whole utterance, and a signal must
mix into the cosines before the shipped ranker's history pooling."""

from __future__ import annotations

import numpy as np
import pytest
import signals_cv as sig

from simloop.parts import RankParams, score_statements


def test_maxsim_is_directional():
    s = np.array([[1.0, 0.0], [0.0, 1.0]])  # a statement of two tokens
    u = np.array([[1.0, 0.0]])  # an utterance sharing one of them
    assert sig.maxsim(s, u) == pytest.approx(0.5)  # half the statement is matched
    assert sig.maxsim(u, s) == pytest.approx(1.0)  # all of the utterance is
    assert sig.maxsim(s, u, np.array([3.0, 1.0])) == pytest.approx(0.75)
    assert sig.maxsim(s, u[:0]) == 0.0


def test_clauses_keep_the_utterance_and_drop_empty_parts():
    text = "I'd like to stay here, and which one is closest to me?"
    assert sig.clauses(text, sig._CLAUSE_PUNCT) == [text, "I'd like to stay here", "and which one is closest to me"]
    assert sig.clauses(text, sig._CLAUSE_CONJ) == [text, "I'd like to stay here", "one is closest to me"]
    assert sig.clauses("Near Utrecht.", sig._CLAUSE_PUNCT) == ["Near Utrecht.", "Near Utrecht"]


def test_signal_mixes_before_pooling():
    S = np.array([[0.30, 0.10], [0.00, 0.40]])
    X = np.array([[0.10, 0.50], [0.00, 0.00]])
    pooled = RankParams(history_weight=0.5, decay=0.2, max_history=50)
    f = {"S": S, "x": X}
    assert sig.Signal().scores(f) == pytest.approx(score_statements(S, pooled))
    assert sig.Signal(name="x", mix=0.0).scores(f) == pytest.approx(score_statements(S, pooled))
    mixed = sig.Signal(name="x", mix=0.5).scores(f)
    assert mixed == pytest.approx(score_statements(0.5 * S + 0.5 * X, pooled))
    assert np.argmax(mixed) == 1  # the signal lifts the second statement past the first
