"""The no-LLM PTKB ranker (simloop.parts.ptkb_rank) with the real MiniLM and its values
(``MINILM_PARAMS``; the default encoder, MPNet, is tested in test_mpnet.py and
test_ptkb_parity.py), and its bench's skip."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simloop.parts.ptkb_rank import (
    DEFAULT_PARAMS,
    MINILM_PARAMS,
    RankParams,
    as_uses,
    rank_ptkb,
    rank_ptkb_uses,
    score_statements,
    select_used,
)
from tests.helpers.cli import bench_script

M = MINILM_PARAMS  # the tests below run MiniLM's vectors
PTKB = [
    "I have two cats at home.",
    "I am allergic to peanuts.",
    "I play the cello in an amateur orchestra.",
    "I live in Porto.",
    "I work as a nurse on night shifts.",
]
EARLIER = ["I want to find a good cello teacher for advanced lessons."]
VAGUE = "How much do they usually charge per hour?"


async def test_ranking_covers_every_statement_best_first_and_is_deterministic(minilm):
    embedder = minilm
    ranking = await rank_ptkb(embedder, "Which snacks are safe for me on a long flight?", [], PTKB, M)
    assert sorted(i for i, _ in ranking) == [1, 2, 3, 4, 5]
    scores = [s for _, s in ranking]
    assert scores == sorted(scores, reverse=True)
    assert ranking[0][0] == 2  # the peanut allergy decides what snacks are safe
    assert await rank_ptkb(embedder, "Which snacks are safe for me on a long flight?", [], PTKB, M) == ranking


async def test_a_statement_matching_an_earlier_utterance_stays_ranked(minilm):
    embedder = minilm
    alone = await rank_ptkb(embedder, VAGUE, [], PTKB, M)
    with_history = await rank_ptkb(embedder, VAGUE, EARLIER, PTKB, M)
    assert alone[0][0] != 3  # the follow-up on its own says nothing about the cello
    assert with_history[0][0] == 3
    assert 3 in select_used(with_history, M)
    # Without the history weight the earlier turn is ignored.
    assert await rank_ptkb(embedder, VAGUE, EARLIER, PTKB, replace(M, history_weight=0.0)) == alone


async def test_history_older_than_max_history_is_not_read(minilm):
    embedder = minilm
    filler = ["What time is it in Tokyo?", "Is it going to rain tomorrow?"]
    params = replace(M, max_history=2)
    assert await rank_ptkb(embedder, VAGUE, [*EARLIER, *filler], PTKB, params) == \
        await rank_ptkb(embedder, VAGUE, filler, PTKB, params)


async def test_one_turn_encodes_only_the_new_utterance_once_statements_are_cached(minilm):
    embedder = minilm
    await rank_ptkb(embedder, VAGUE, EARLIER, PTKB, M)
    before = dict(embedder.stats)
    await rank_ptkb(embedder, "And on weekends, are the rates different?", [*EARLIER, VAGUE], PTKB, M)
    assert embedder.stats["batches"] - before["batches"] == 1
    assert embedder.stats["texts"] - before["texts"] == 1


async def test_lexical_weight_pulls_up_statements_sharing_words(minilm):
    embedder = minilm
    utterance = "Are there orchestra concerts this week?"
    plain = dict(await rank_ptkb(embedder, utterance, [], PTKB, M))
    lexical = dict(await rank_ptkb(embedder, utterance, [], PTKB, replace(M, lexical_weight=0.5)))
    assert lexical[3] > plain[3]  # shares "orchestra"
    assert lexical[1] == plain[1]  # shares nothing


async def test_provenance_is_the_whole_ranking_with_the_used_head_marked(minilm):
    params = replace(M, used_threshold=0.2, used_top_k=2, used_min=1)
    uses = await rank_ptkb_uses(minilm, VAGUE, EARLIER, PTKB, params)
    ranking = await rank_ptkb(minilm, VAGUE, EARLIER, PTKB, params)
    assert [(u.index, u.score) for u in uses] == ranking  # every statement, best first
    assert all(u.statement == PTKB[u.index - 1] for u in uses)
    assert [u.index for u in uses if u.used] == select_used(ranking, params)
    assert uses[0].used and uses[0].index == 3


def test_as_uses_marks_exactly_the_chosen():
    uses = as_uses([(2, 0.5), (1, 0.2), (3, 0.1)], ["a", "b", "c"], [2])
    assert [(u.index, u.statement, u.used) for u in uses] == [(2, "b", True), (1, "a", False), (3, "c", False)]


async def test_empty_ptkb_gives_an_empty_ranking(minilm):
    assert await rank_ptkb(minilm, VAGUE, EARLIER, [], M) == []


def test_score_is_the_current_similarity_or_the_discounted_best_earlier_one():
    sims = np.array([[0.2, 0.1, 0.0],    # now
                     [0.1, 0.6, 0.0],    # one turn back
                     [0.0, 0.0, 0.9]])   # two turns back
    params = RankParams(history_weight=0.5, decay=0.5)
    np.testing.assert_allclose(score_statements(sims, params), [0.2, 0.3, 0.225])
    np.testing.assert_allclose(score_statements(sims[:1], params), [0.2, 0.1, 0.0])


def test_used_gap_keeps_only_statements_close_to_the_turns_best():
    ranking = [(4, 0.5), (2, 0.45), (1, 0.2), (3, 0.05)]
    assert select_used(ranking, RankParams(used_threshold=-1.0, used_top_k=4, used_gap=0.1)) == [4, 2]
    assert select_used(ranking, RankParams(used_threshold=-1.0, used_top_k=4, used_gap=0.0)) == [4]
    assert select_used(ranking, RankParams(used_threshold=-1.0, used_top_k=4, used_gap=2.0)) == [4, 2, 1, 3]
    assert select_used(ranking, RankParams(used_threshold=0.3, used_top_k=4, used_gap=0.4)) == [4, 2]


def test_used_keeps_the_top_k_above_the_threshold_and_at_least_used_min():
    ranking = [(4, 0.5), (2, 0.3), (1, 0.2), (3, 0.05)]
    no_gap = {"used_gap": 2.0}
    assert select_used(ranking, RankParams(used_threshold=0.1, used_top_k=3, used_min=1, **no_gap)) == [4, 2, 1]
    assert select_used(ranking, RankParams(used_threshold=0.25, used_top_k=3, used_min=1, **no_gap)) == [4, 2]
    assert select_used(ranking, RankParams(used_threshold=0.9, used_top_k=3, used_min=1, **no_gap)) == [4]
    assert select_used(ranking, RankParams(used_threshold=0.9, used_top_k=3, used_min=0, **no_gap)) == []
    assert select_used([], DEFAULT_PARAMS) == []


@pytest.mark.parametrize("values, message", [
    ({"decay": 1.5}, "decay must be between 0 and 1"),
    ({"used_min": 4, "used_top_k": 3}, "used_min <= used_top_k"),
    ({"windo": 2}, "unknown PTKB ranker parameter 'windo'"),
    ({"used_gap": -0.1}, "used_gap must be between 0 and 2"),
])
def test_bad_parameters_are_rejected_by_name(values, message):
    with pytest.raises(ValueError, match=message):
        RankParams.from_mapping(values)


async def test_bench_skips_with_a_reason_when_the_data_is_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMLOOP_IKAT_DATA", str(tmp_path / "nowhere"))
    with bench_script("bench_ptkb") as bench:
        figures, details = await bench.run(True, tmp_path)
    assert figures == {}
    assert "iKAT data not found" in details["skipped"] and "SIMLOOP_IKAT_DATA" in details["skipped"]
