"""The offline default assistant: unit tests with the seam fakes, one end-to-end run with
the real demo index, MiniLM and MPNet (the PTKB ranker)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from agents.bm25_extractive import BM25Extractive
from simloop.errors import BadInputError
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.run.plugins import Assistant, Context, load_plugin
from simloop.schema import Behaviour, DialogueState, Persona, RubricQuestion, Scenario, Topic, Turn, UserTurn
from simloop.search import RetrievalConfig

DOCS = [
    ("cello", "Cello\nThe cello is a bowed string instrument. Its four strings are tuned in fifths."),
    ("cello_price", "Cello price\nThe price of a student cello is a few hundred euros. A master cello costs far more."),
    ("porto", "Porto\nPorto is a coastal city in Portugal. It is famous for port wine."),
    ("tofu", "Tofu\nTofu is made from soy milk. Vegetarian cooks use tofu as a source of protein."),
]
PTKB = ["I am vegetarian and I cook tofu often.", "I live in Porto.", "I play the cello in an orchestra."]


def make_config(index: Path | None = None):
    try:
        from simloop.config import RunConfig

        return RunConfig(retrieval=RetrievalConfig(index=index))
    except ImportError:  # config.py not there yet in a partial checkout
        return types.SimpleNamespace(retrieval=RetrievalConfig(index=index))


def make_state(ptkb: list[str], history: list[tuple[str, str]], utterance: str) -> DialogueState:
    topic = Topic(id="t", title="t", rubric=[RubricQuestion(id="q1", question="?")])
    persona = Persona(id="p", ptkb=ptkb, topics=[topic])
    scenario = Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=Behaviour(), seed=1)
    turns = [
        Turn(index=i, user=UserTurn(utterance=u), assistant={"response": a}) for i, (u, a) in enumerate(history, 1)
    ]
    return DialogueState(dialogue_id="d", scenario=scenario, turns=turns, user=UserTurn(utterance=utterance))


@pytest.fixture
def fake_ctx() -> Context:
    fake = HashEmbedder()
    fakes = {"retriever": MemoryRetriever(DOCS), "embedder": fake, "embedder:mpnet": fake}
    return Context(make_config(), overrides=fakes)


async def test_reply_has_provenance_stages_and_context(fake_ctx: Context):
    agent = BM25Extractive(fake_ctx, k=3, ptkb_threshold=0.2)
    assert isinstance(agent, Assistant)
    state = make_state(PTKB, [("Tell me about the cello", "The cello is ...")], "what about its price?")
    reply = await agent.respond(state)

    assert "cello" in reply.rewritten_query and reply.rewritten_query.startswith("what about its price?")
    assert fake_ctx.overrides["retriever"].queries == [reply.rewritten_query]
    assert [p.rank for p in reply.passages] == list(range(1, len(reply.passages) + 1))
    assert reply.passages[0].docid == "cello_price" and reply.passages[0].used
    assert "hundred euros" in reply.response
    for p in reply.passages:  # used = cited: the passage's text is in the response
        assert p.used == any(s in reply.response for s in dict(DOCS)[p.docid].split("\n")[1].split(". "))
        assert p.text == dict(DOCS)[p.docid][:300]
    assert [u.index for u in reply.ptkb_provenance if u.used] == [3]
    assert sorted(u.index for u in reply.ptkb_provenance) == list(range(1, len(PTKB) + 1))  # the whole ranking
    scores = [u.score for u in reply.ptkb_provenance]
    assert scores == sorted(scores, reverse=True) and reply.ptkb_provenance[0].index == 3
    assert reply.context.strategy == "window" and reply.context.tokens > len(reply.response.split())
    assert [s.name for s in reply.stages] == ["ptkb", "rewrite", "retrieve", "generate"]
    assert all(s.model is None and s.prompt_tokens == s.completion_tokens == 0 for s in reply.stages)


async def test_unrelated_question_uses_no_ptkb_when_the_rule_allows_none(fake_ctx: Context):
    agent = BM25Extractive(fake_ctx, ptkb_threshold=0.3, ptkb_params={"used_min": 0})
    reply = await agent.respond(make_state(PTKB, [], "Which coastal city makes port wine?"))
    assert len(reply.ptkb_provenance) == len(PTKB) and not any(u.used for u in reply.ptkb_provenance)
    assert reply.passages[0].docid == "porto"


async def test_no_hits_gives_an_honest_answer(fake_ctx: Context):
    agent = BM25Extractive(fake_ctx)  # the default relies on >= 1 statement: its words stay out of the query
    reply = await agent.respond(make_state(PTKB, [], "quantum chromodynamics"))
    assert any(u.used for u in reply.ptkb_provenance)
    assert reply.rewritten_query == "quantum chromodynamics"  # else the tiny corpus finds tofu for a vegetarian
    assert reply.passages == [] and "could not find" in reply.response


def test_registered_and_params_validated(fake_ctx: Context):
    agent = load_plugin("assistant", "bm25_extractive", {"k": 5, "max_words": 100}, fake_ctx)
    assert isinstance(agent, BM25Extractive) and agent.k == 5
    with pytest.raises(BadInputError):
        load_plugin("assistant", "bm25_extractive", {"k": 0}, fake_ctx)
    with pytest.raises(BadInputError):
        load_plugin("assistant", "bm25_extractive", {"temperature": 1}, fake_ctx)


@pytest.mark.slow
async def test_end_to_end_with_demo_index_and_minilm(demo_cache: Path):
    ptkb = [
        "I signed up for the Lisbon Marathon in October; it will be my first.",
        "I live in Lisbon with my partner and our rescue dog.",
        "I don't drink coffee after 2 pm because it ruins my sleep.",
    ]
    ctx = Context(make_config())
    try:
        agent = BM25Extractive(ctx)
        state = make_state(ptkb, [], "What exactly is a marathon and how long is the race?")
        reply = await agent.respond(state)
        assert [u.index for u in reply.ptkb_provenance if u.used] == [1]
        assert len(reply.passages) == 10 and reply.passages[0].docid == "Marathon"
        assert "42.195" in reply.response and len(reply.response.split()) <= 220
        retriever = await ctx.retriever()
        for p in reply.passages:
            doc = await retriever.doc(p.docid)
            assert doc is not None and doc.text.startswith(p.text)
        assert any(p.used for p in reply.passages)

        state.turns.append(Turn(index=1, user=state.user, assistant=reply.to_turn()))
        state.user = UserTurn(utterance="Where does its name come from?")
        follow_up = await agent.respond(state)
        assert "marathon" in follow_up.rewritten_query.lower()
        assert "Marathon" in [p.docid for p in follow_up.passages[:3]]  # the topic carried over

        # A typo the index cannot match is respelt against its vocabulary, and the framing
        # words of a request stay out of the query ("focus" finds an optics article).
        typed = await agent.respond(make_state(ptkb, [], "Could you focus on the London Undreground?"))
        assert typed.rewritten_query == "The London Underground?"
        assert typed.passages[0].docid == "London_Underground" and typed.passages[0].used
        assert [s.name for s in typed.stages] == ["ptkb", "spelling", "rewrite", "retrieve", "generate"]
    finally:
        await ctx.aclose()
