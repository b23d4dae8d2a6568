"""LLM parts (PTKB selection, rewriting, query generation, grounded generation) and the
retrieval parts, against a scripted model and the seam fakes; grounded generation also
against the real mock LLM over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest

from simloop.config import RunConfig
from simloop.fakes import ScriptedChat
from simloop.fakes.mockllm import MockLLM
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.llm.config import LLMConfig, LLMRole
from simloop.parts.generate_llm import check_references, draft_answer, grounded_answer, suggest_elements
from simloop.parts.ptkb_llm import (
    classify_ptkb_llm,
    format_ptkb,
    lexical_scores,
    ranking_from_set,
    score_ptkb_llm,
    union_ptkb,
    used_only,
    uses_from_indices,
    vote_ptkb,
)
from simloop.parts.retrieve import (
    embedding_rerank,
    fit_passages,
    format_passage,
    multi_query,
    rrf_fuse,
    search_all,
    to_passages,
)
from simloop.parts.rewrite_llm import clean_query, iterative_rewrite, llm_rewrite, queries_from_answer, queries_per_ptkb
from simloop.run.plugins import Context
from simloop.schema import PtkbUse
from simloop.search import Hit
from simloop.text import count_tokens

PTKB = ["I am vegetarian.", "I live in Porto.", "I play the cello in an orchestra.", "I cycle to work."]
DOCS = [
    ("Cello", "Cello\nThe cello is a bowed string instrument tuned in fifths."),
    ("Cello_bow", "Cello bow\nA cello bow is strung with horsehair and rosin."),
    ("Porto", "Porto\nPorto is a coastal city in Portugal famous for port wine."),
    ("Tofu", "Tofu\nTofu is a vegetarian source of protein made from soy milk."),
]
HITS = [Hit(d, 10.0 - i, t) for i, (d, t) in enumerate(DOCS)]


# ----------------------------------------------------------------------------- PTKB


def test_indices_are_checked_and_numbered_one_based():
    assert format_ptkb(PTKB, [3, 1]) == "3: I play the cello in an orchestra.\n1: I am vegetarian."
    uses = uses_from_indices(PTKB, [3, 3, 0, 9, "2", "x", -1])
    assert [(u.index, u.statement) for u in uses] == [(3, PTKB[2]), (2, PTKB[1])]


async def test_binary_classifier_sees_numbered_statements_and_context():
    chat = ScriptedChat(['{"relevant": [3, 7, 3, 1]}'])
    uses, stage = await classify_ptkb_llm(chat, PTKB, "how is it tuned?", "User (turn 1): tell me about cellos")
    # a set as a ranking: the chosen first (used, score 1), then every other statement
    assert [u.index for u in uses if u.used] == [3, 1] and all(u.score == 1.0 for u in uses if u.used)
    assert [u.index for u in uses] == [3, 1, *(i for i in range(1, len(PTKB) + 1) if i not in (3, 1))]
    assert all(u.score == 0.0 and not u.used for u in uses[2:])
    prompt = chat.prompt()
    assert "3: I play the cello in an orchestra." in prompt and "tell me about cellos" in prompt
    assert stage.name == "ptkb.classify" and stage.model == "scripted" and chat.calls[0]["schema"] == "PtkbChoice"
    assert (await classify_ptkb_llm(ScriptedChat([]), [], "x"))[0] == []  # no PTKB: no call


async def test_llm_scores_vote_and_dynamic_threshold():
    cands = [PtkbUse(index=i, statement=PTKB[i - 1], score=s) for i, s in ((3, 0.55), (1, 0.35), (2, 0.32))]
    chat = ScriptedChat(['{"scores": [{"index": 3, "score": 9}, {"index": 2, "score": 2}, {"index": 4, "score": 10}]}'])
    llm, _ = await score_ptkb_llm(chat, PTKB, cands, "how do I tune my cello")
    assert llm == {3: 0.9, 1: 0.0, 2: 0.2}  # unlisted candidate 4 ignored, unscored 1 gets 0
    lexical = lexical_scores(cands, "how do I tune my cello")
    assert lexical[3] > 0 and lexical[1] == 0
    scores = {"embedding": {c.index: c.score for c in cands}, "llm": llm, "lexical": lexical}
    kept = vote_ptkb(cands, scores, {"embedding": 0.3, "llm": 0.5, "lexical": 0.2},
                     {"embedding": 0.4, "llm": 0.6, "lexical": 0.0})
    assert [u.index for u in kept] == [3] and kept[0].score == pytest.approx(0.4 * 0.55 + 0.6 * 0.9)
    # statement 1 has one vote only (embedding): a single model is not enough
    assert vote_ptkb(cands, scores, {"embedding": 0.3, "llm": 0.5, "lexical": 0.2},
                     {"embedding": 1, "llm": 0}, min_votes=1, relative=0.0)[1].index == 1


def test_union_scores_agreement():
    a = uses_from_indices(PTKB, [1, 3])
    b = uses_from_indices(PTKB, [3, 4])
    assert [(u.index, u.score) for u in union_ptkb(a, b)] == [(3, 1.0), (1, 0.5), (4, 0.5)]
    # rankings from a set classifier: only what a selection used counts, the rest trails unused
    ra, rb = ranking_from_set(PTKB, a), ranking_from_set(PTKB, b)
    union = union_ptkb(ra, rb)
    assert [(u.index, u.score, u.used) for u in union[:3]] == [(3, 1.0, True), (1, 0.5, True), (4, 0.5, True)]
    assert len(union) == len(PTKB) and not any(u.used or u.score for u in union[3:])
    assert used_only(union) == union[:3]


# ----------------------------------------------------------------------------- rewriting


def test_clean_query():
    assert clean_query('Query: "cello tuning in fifths"\nbecause ...', "u") == "cello tuning in fifths"
    assert clean_query("  \n", "fallback") == "fallback"
    assert clean_query("word " * 80, "fallback") == "fallback"


async def test_rewrite_brief_and_context():
    chat = ScriptedChat(["Rewritten query: how to tune a cello"] * 2)
    q, st = await llm_rewrite(chat, "how is it tuned?", "User (turn 1): cellos", ["I play the cello."])
    assert q == "how to tune a cello" and st.name == "rewrite"
    assert "- I play the cello." in chat.prompt() and "cellos" in chat.prompt()
    await llm_rewrite(chat, "how is it tuned?", brief=True)
    assert "brief" in chat.calls[-1]["messages"][0]["content"] and "Facts about the user" not in chat.prompt()


async def test_iterative_rewrite_feeds_the_selection_back():
    chat = ScriptedChat(["cello tuning orchestra", "orchestral cello tuning"])
    seen = []

    async def select(query):
        seen.append(query)
        return uses_from_indices(PTKB, [3])

    first, refined, selected, stages = await iterative_rewrite(chat, "how is it tuned?", "", PTKB, select)
    assert (first, refined, seen) == ("cello tuning orchestra", "orchestral cello tuning", ["cello tuning orchestra"])
    assert all(s in chat.prompt(0) for s in PTKB)  # first pass: the whole PTKB
    assert PTKB[2] in chat.prompt(1) and PTKB[0] not in chat.prompt(1)  # second: the selection only
    assert [s.name for s in stages] == ["rewrite.1", "rewrite.ptkb", "rewrite.2"] and [u.index for u in selected] == [3]


async def test_queries_per_statement_and_from_an_answer():
    chat = ScriptedChat(lambda m: json.dumps({"queries": ["cello tuning", " Cello Tuning ", "", "fifths"]}))
    queries, stages = await queries_per_ptkb(chat, "how to tune a cello", [PTKB[2], PTKB[1]], n=3)
    assert queries == ["how to tune a cello", "cello tuning", "fifths"]  # rewrite first, duplicates gone
    assert [s.name for s in stages] == ["queries.1", "queries.2"] and len(chat.calls) == 2
    assert PTKB[2] in chat.prompt(0) and PTKB[1] in chat.prompt(1)
    _, stages = await queries_per_ptkb(chat, "q", [], n=2)
    assert len(stages) == 1  # no statement selected: one group for the rewrite alone
    found, st = await queries_from_answer(chat, "how to tune?", "Tune in fifths: C G D A.", n=1)
    assert found == ["cello tuning"] and "Tune in fifths" in chat.prompt()


# ----------------------------------------------------------------------------- retrieval


def test_rrf_fuses_and_dedupes():
    a, b, c = (Hit(d, 1.0, d) for d in "abc")
    fused = rrf_fuse([[a, b], [b, c]], k=60)
    assert [h.docid for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61, abs=1e-6)
    assert len(rrf_fuse([[a, b], [b, c]], limit=1)) == 1


async def test_multi_query_without_search_many_and_rerank():
    retriever = MemoryRetriever(DOCS)
    assert not hasattr(retriever, "search_many")
    found = await multi_query(retriever, ["cello", "cello ", "porto wine"], k_per_query=3)
    assert retriever.queries == ["cello", "porto wine"]  # duplicates searched once
    assert len({h.docid for h in found}) == len(found) and {"Cello", "Porto"} <= {h.docid for h in found}
    assert len(await search_all(retriever, [], 3)) == 0
    ranked = await embedding_rerank(HashEmbedder(), "tofu vegetarian protein", HITS, top_n=2)
    assert [h.docid for h in ranked][0] == "Tofu" and len(ranked) == 2
    personal = await embedding_rerank(HashEmbedder(), "instrument", HITS, profile="horsehair rosin bow",
                                      profile_weight=0.6)
    assert personal[0].docid == "Cello_bow"


def test_passages_in_prompts_and_transcripts():
    assert format_passage(HITS[0]).startswith("[Cello] Cello The cello")
    one = count_tokens(format_passage(HITS[0]))
    assert [h.docid for h in fit_passages(HITS, one)] == ["Cello"]
    assert len(fit_passages(HITS, 0)) == 1 and len(fit_passages(HITS, 10_000, max_passages=3)) == 3
    ps = to_passages(HITS, ["Porto"], snippet_chars=5)
    assert [(p.rank, p.used, p.text) for p in ps][2] == (3, True, "Porto")


# ----------------------------------------------------------------------------- generation


def test_references_are_checked():
    assert check_references(["[Porto]", "Cello", "Nowhere"], HITS) == (["Cello", "Porto"],
                                                                        "dropped 1 unknown reference(s)")
    used, note = check_references(["Nowhere"], HITS)
    assert used == ["Cello"] and "cited the top passage" in note
    assert check_references([], []) == ([], None)


async def test_grounded_answer_validates_and_clips():
    reply = json.dumps({"response": "word " * 300, "references": ["Tofu", "Atlantis"]})
    chat = ScriptedChat([reply])
    out = await grounded_answer(chat, utterance="protein?", hits=HITS, ptkb=[PTKB[0]], max_words=50,
                                suggestion="mention tofu", drafts=["Tofu has protein."], query="vegetarian protein")
    assert out.used == ["Tofu"] and len(out.response.split()) == 50
    assert "Atlantis" not in out.used and "dropped 1" in out.stage.note and "cut to 50 words" in out.stage.note
    prompt = chat.prompt()
    for part in ("[Tofu] Tofu", "- I am vegetarian.", "mention tofu", "Draft 1: Tofu has protein.",
                 "vegetarian protein", "at most 50 words"):
        assert part in prompt


async def test_plan_and_draft_prompts():
    chat = ScriptedChat(["Needs: tuning order, peg care.", "Tune C G D A."])
    plan, st = await suggest_elements(chat, "how to tune a cello", "User (turn 1): hi", max_words=5)
    assert plan == "Needs: tuning order, peg care." and st.name == "suggest"
    draft, st = await draft_answer(chat, "how to tune?", "", PTKB, stage="m1.draft")
    assert draft == "Tune C G D A." and st.name == "m1.draft" and PTKB[3] in chat.prompt()


async def test_grounded_answer_against_the_mock_llm_over_http():
    async with MockLLM(seed=3) as mock:
        role = LLMRole(base_url=mock.url, model="mock-model", max_attempts=2, backoff_base_s=0.0, backoff_cap_s=0.0)
        ctx = Context(RunConfig(llm=LLMConfig(default=role)))
        try:
            outs = await asyncio.gather(*(grounded_answer(ctx.chat("assistant.generate"), utterance=f"cello {i}?",
                                                          hits=HITS) for i in range(3)))
        finally:
            await ctx.aclose()
    for out in outs:
        assert out.response and out.used and set(out.used) <= {h.docid for h in HITS}
        assert out.stage.model == "mock-model" and out.stage.role == "assistant.generate"
        assert out.stage.prompt_tokens > 0
