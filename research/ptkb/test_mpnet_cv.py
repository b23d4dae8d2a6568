"""The MPNet re-run of the PTKB families (mpnet_cv.py): each term must join the
plain ranker's pooled score the way its mode names, every family must start with the plain
ranker's grid (so a fold can always choose "no term"), and the centroid term must read the
user's utterances so far."""

from __future__ import annotations

import features
import mpnet_cv as mp
import numpy as np
import pytest

from simloop.parts import RankParams, score_statements


def test_term_modes():
    S = np.array([[0.30, 0.10, 0.05], [0.00, 0.40, 0.00]])  # current utterance, one back
    f = {"S": S, "joined": np.array([0.1, 0.2, 0.8]), "generic": np.array([0.2, -0.1, -0.1])}
    plain = score_statements(S, RankParams(history_weight=0.6, decay=0.5, max_history=50))
    assert mp.Term().scores(f) == pytest.approx(plain)
    assert mp.Term(name="joined", mix=0.5).scores(f) == pytest.approx(plain + [0.05, 0.1, 0.4])
    lifted = mp.Term(name="joined", mix=0.5, mode="max").scores(f)
    assert lifted == pytest.approx(np.maximum(plain, [0.05, 0.1, 0.4]))
    assert np.argmax(lifted) == 2
    assert mp.Term(name="generic", mix=1.0, mode="sub").scores(f) == pytest.approx(plain - [0.2, -0.1, -0.1])
    assert mp.Term(name="joined", mix=0.0).scores(f) == pytest.approx(plain)  # weight 0: no term
    assert not mp.Term(name="joined").has_term and mp.Term(name="joined", mix=0.1).has_term


def test_every_family_starts_with_the_plain_grid():
    fams = mp.families(["clause"])
    plain = fams["plain MPNet ranker"]
    assert (0.6, 0.5) in [(t.history_weight, t.decay) for t in plain]  # the shipped values are in the grid
    assert not any(t.has_term for t in plain)
    assert set(fams) == {"plain MPNet ranker", *(f"term {n}" for n in mp.TERMS), "signal clause"}
    for name, family in fams.items():
        assert family[: len(plain)] == plain, name
        assert all(v.has_term for v in family[len(plain):]), name


def test_centroid_reads_the_mean_utterance():
    statements = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    said = np.array([[1.0, 0.0], [0.0, 1.0]])  # two utterances: their mean points at 45 degrees
    assert features.centroid_cosine(statements, said) == pytest.approx([2 ** -0.5, 2 ** -0.5, 1.0])
    assert features.centroid_cosine(statements, said[:1]) == pytest.approx([1.0, 0.0, 2 ** -0.5])


def test_mpnet_tokens_are_unit_vectors_of_whole_words():
    tm = mp.MPNetTokens()  # the shipped all-mpnet-base-v2 weights
    vecs, content, word = tm.tokens("I live in the Netherlands.")
    assert vecs.shape == (len(word), 768)
    assert np.linalg.norm(vecs, axis=1) == pytest.approx(np.ones(len(word)), abs=1e-6)
    assert {w for w, c in zip(word, content) if c} == {"live", "netherlands"}  # "I", "in", "the", "." are not content
    assert word[0] == "i" and word[-1] == "." and "netherlands" in word
    assert tm.tokens("I live in the Netherlands.")[0] is vecs  # cached
