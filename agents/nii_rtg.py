"""nii_rtg: NII's Retrieve-then-Generate pipeline for TREC iKAT 2024 (seed paper 003).

brief rewrite (LLM) -> PTKB selection for the rewrite (LLM) -> BM25 queries per selected
statement (one LLM call each, concurrently; one call when none is selected) -> BM25 per
query, reciprocal-rank fusion -> MiniLM re-rank against the rewrite (the paper uses a
cross-encoder, not available offline) -> plan the reply (LLM) -> grounded answer from
the plan and the top passages (LLM).  LLM roles: ``assistant.rewrite``, ``assistant.ptkb``,
``assistant.queries``, ``assistant.suggest``, ``assistant.generate``.
"""

from __future__ import annotations

from simloop.memory import make_memory
from simloop.parts import (
    MAX_WORDS,
    classify_ptkb_llm,
    current_utterance,
    embedding_rerank,
    grounded_reply,
    llm_rewrite,
    multi_query,
    queries_per_ptkb,
    suggest_elements,
    timed_stage,
)
from simloop.run import Context
from simloop.schema import AssistantReply, DialogueState

__all__ = ["NiiRtG"]


class NiiRtG:
    # The LLM roles it calls: the run asks each one's endpoint for an answer before it starts.
    llm_roles = ("assistant.ptkb", "assistant.rewrite", "assistant.queries", "assistant.suggest", "assistant.generate")
    needs = ("retriever", "embedder")  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(self, ctx: Context, k: int = 20, k_per_query: int = 50, rerank_depth: int = 50, passages: int = 5,
                 queries_per_statement: int = 3, max_statements: int = 3, max_words: int = MAX_WORDS):
        if min(k, k_per_query, passages, queries_per_statement) < 1 or rerank_depth < k or max_statements < 0:
            raise ValueError("need k, k_per_query, passages, queries_per_statement >= 1 and rerank_depth >= k")
        self.ctx, self.k, self.k_per_query, self.rerank_depth = ctx, k, k_per_query, rerank_depth
        self.passages, self.n_queries, self.max_statements, self.max_words = (
            passages, queries_per_statement, max_statements, max_words)
        self.memory = make_memory("full")

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = current_utterance(state)
        context, info, stages, _ = await self.memory.build(state, self.ctx)
        rewritten, st = await llm_rewrite(self.ctx.chat("assistant.rewrite"), utterance, context, brief=True)
        selected, st2 = await classify_ptkb_llm(self.ctx.chat("assistant.ptkb"), state.ptkb, rewritten)
        statements = [p.statement for p in selected if p.used][: self.max_statements]
        queries, sts = await queries_per_ptkb(self.ctx.chat("assistant.queries"), rewritten, statements, self.n_queries)
        stages += [st, st2, *sts]
        retriever, embedder = await self.ctx.retriever(), await self.ctx.embedder()
        async with timed_stage("retrieve", stages, queries=len(queries)):
            fused = await multi_query(retriever, queries, self.k_per_query, limit=self.rerank_depth)
        async with timed_stage("rerank", stages):
            hits = await embedding_rerank(embedder, rewritten, fused, self.k)
        plan, st3 = await suggest_elements(self.ctx.chat("assistant.suggest"), rewritten, context)
        stages.append(st3)
        return await grounded_reply(self.ctx.chat("assistant.generate"), utterance=rewritten, hits=hits,
                                    shown=self.passages, context=context, info=info, ptkb=selected, stages=stages,
                                    query=rewritten, max_words=self.max_words, suggestion=plan)
