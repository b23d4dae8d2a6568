"""`simloop eval` on the PTKB provenance bm25_extractive records scores as the bench does
(issue 12: the same PTKB figure from a replay and from scripts/bench_ptkb.py).

The real PTKB encoder (all-mpnet-base-v2, the default, and MiniLM, the fast one), the real iKAT
2023 test topics and NIST PTKB qrels; only the retriever and the other encoder are seam
fakes (the PTKB stage reads neither)."""

from __future__ import annotations

import pytest

from agents.bm25_extractive import BM25Extractive
from simloop.config import RunConfig
from simloop.evaluate.provenance import ptkb_scores
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.parts.ptkb_rank import DEFAULT_PARAMS, MINILM_PARAMS
from simloop.run.plugins import Context
from simloop.schema import DialogueState, Scenario, UserTurn
from simloop.search.embeddings import open_embedder
from tests.helpers.cli import bench_script
from tests.helpers.data import IKAT, ikat_file

CONVERSATIONS = 2  # enough turns to carry history; the full set is the bench's job


@pytest.fixture
def bench_ptkb(monkeypatch):
    ikat_file("2023", "ptkb_rel_nist")
    monkeypatch.setenv("SIMLOOP_IKAT_DATA", str(IKAT))
    with bench_script("bench_ptkb") as module:
        yield module


@pytest.mark.parametrize("encoder", ["mpnet", "minilm"])  # the default ranker and the fast one
async def test_agent_provenance_scores_as_the_bench(bench_ptkb, encoder):
    params = DEFAULT_PARAMS if encoder == "mpnet" else MINILM_PARAMS
    assert params.encoder == encoder
    real = await open_embedder(encoder=encoder)
    try:
        await _scores_as_the_bench(bench_ptkb, params, real)
    finally:
        await real.aclose()


async def _scores_as_the_bench(bench_ptkb, params, real):
    ts = bench_ptkb.TopicSet("ikat23", bench_ptkb.data_dir())
    picked = {p.id for p in ts.personas[:CONVERSATIONS]}
    rankings, used = await bench_ptkb.rank_all(ts, real, params)
    bench = ts.score(rankings, used, only=picked)

    # The real encoder under the key the ranker asks for; a fake for the other one.
    key = "embedder" if params.encoder == "minilm" else f"embedder:{params.encoder}"
    overrides = {"retriever": MemoryRetriever([]), "embedder": HashEmbedder(), "embedder:mpnet": HashEmbedder(),
                 key: real}
    agent = BM25Extractive(Context(RunConfig(), overrides=overrides), ptkb_params={"encoder": params.encoder})
    replayed = []
    for persona, t in zip(ts.personas, ts.transcripts):
        if persona.id not in picked:
            continue
        scenario = Scenario(dialogue_id=t.dialogue_id, persona=persona, topic=persona.topics[0],
                            behaviour=persona.behaviour, seed=0)
        state = DialogueState(dialogue_id=t.dialogue_id, scenario=scenario)
        for turn in t.turns:  # the replay: gold utterances in order, the agent's own answers
            state.user = UserTurn(utterance=turn.user.utterance)
            reply = await agent.respond(state)
            assert sorted(u.index for u in reply.ptkb_provenance) == list(range(1, len(persona.ptkb) + 1))
            turn.assistant = reply.to_turn()
            state.turns.append(turn)
        replayed.append(t)
    assert sum(len(t.turns) for t in replayed) > 10
    agent_scores = ptkb_scores(replayed, ts.qrels).summary
    assert agent_scores["turns"] > 0
    assert {k: agent_scores[k] for k in bench} == bench
