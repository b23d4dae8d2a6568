"""nii_gtr: NII's Generate-then-Retrieve pipeline with two LLMs (seed paper 003).

Each of two models (roles ``assistant`` and ``assistant.second``; GPT-4o and Claude-3-opus
in the paper), concurrently: draft an answer without retrieval and select PTKB
statements (two calls at once) -> up to five queries from its draft (one call) -> BM25
per query, fused and de-duplicated -> MiniLM re-rank against its own draft.  Then the two
candidate lists are merged and re-ranked against the second model's draft, the PTKB
selections are united (score = share of models that chose a statement), and
``assistant.generate`` writes the final grounded answer from the top passages and both
drafts.  The paper re-ranks with a cross-encoder; a bi-encoder stands in offline.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from simloop.memory import make_memory
from simloop.parts import (
    MAX_WORDS,
    classify_ptkb_llm,
    current_utterance,
    draft_answer,
    embedding_rerank,
    grounded_reply,
    multi_query,
    queries_from_answer,
    rrf_fuse,
    timed_stage,
    union_ptkb,
)
from simloop.run import Context
from simloop.schema import AssistantReply, DialogueState, PtkbUse, Stage
from simloop.search import Hit

__all__ = ["NiiGtR"]

ROLES = ("assistant", "assistant.second")


@dataclass
class _Branch:
    draft: str
    selected: list[PtkbUse]
    hits: list[Hit]
    stages: list[Stage]


class NiiGtR:
    # The LLM roles it calls: the run asks each one's endpoint for an answer before it starts.
    llm_roles = (*ROLES, "assistant.generate")
    needs = ("retriever", "embedder")  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(self, ctx: Context, k: int = 20, k_per_query: int = 50, queries: int = 5, rerank_depth: int = 50,
                 passages: int = 5, max_words: int = MAX_WORDS, draft_words: int = 200):
        if min(k, k_per_query, queries, passages, draft_words) < 1 or rerank_depth < k:
            raise ValueError("need k, k_per_query, queries, passages, draft_words >= 1 and rerank_depth >= k")
        self.ctx, self.k, self.k_per_query, self.n_queries = ctx, k, k_per_query, queries
        self.rerank_depth, self.passages = rerank_depth, passages
        self.max_words, self.draft_words = max_words, draft_words
        self.memory = make_memory("full")

    async def _branch(self, role: str, label: str, utterance: str, context: str, state: DialogueState) -> _Branch:
        chat = self.ctx.chat(role)
        (draft, st1), (selected, st2) = await asyncio.gather(
            draft_answer(chat, utterance, context, state.ptkb, max_words=self.draft_words, stage=f"{label}.draft"),
            classify_ptkb_llm(chat, state.ptkb, utterance, context, stage=f"{label}.ptkb"))
        queries, st3 = await queries_from_answer(chat, utterance, draft, self.n_queries, stage=f"{label}.queries")
        stages = [st1, st2, st3]
        retriever, embedder = await self.ctx.retriever(), await self.ctx.embedder()
        async with timed_stage(f"{label}.retrieve", stages, queries=len(queries)):
            found = await multi_query(retriever, [utterance, *queries], self.k_per_query)
        async with timed_stage(f"{label}.rerank", stages):
            hits = await embedding_rerank(embedder, draft, found, self.rerank_depth)
        return _Branch(draft, selected, hits, stages)

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = current_utterance(state)
        context, info, stages, _ = await self.memory.build(state, self.ctx)
        first, second = await asyncio.gather(*(
            self._branch(role, f"m{i}", utterance, context, state) for i, role in enumerate(ROLES, 1)))
        stages += [*first.stages, *second.stages]
        embedder = await self.ctx.embedder()
        async with timed_stage("merge.rerank", stages):
            merged = rrf_fuse([first.hits, second.hits])  # de-duplicates; the re-rank sets the order
            hits = await embedding_rerank(embedder, second.draft, merged, self.k)
        return await grounded_reply(self.ctx.chat("assistant.generate"), utterance=utterance, hits=hits,
                                    shown=self.passages, context=context, info=info,
                                    ptkb=union_ptkb(first.selected, second.selected), stages=stages,
                                    max_words=self.max_words, drafts=[first.draft, second.draft])
