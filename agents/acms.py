"""acms: the Adaptive Context Management System (seed paper 001) as an iKAT assistant.

PTKB statements by the no-LLM ranker (``simloop.parts.ptkb_rank``) -> heuristic rewrite (no LLM: ACMS adds no rewrite
stage) -> BM25 -> personalised document score (ACMS level 2: similarity to the query, to
the selected PTKB statements, and the BM25 rank as the domain prior) -> history/knowledge
balance (level 3): alpha_history from dialogue length, query type and the best document
score; passages fill the knowledge share -> adaptive memory gets the rest of the budget
(formula (1) window + compressed blocks, level 1) -> one grounded answer (LLM, role
``assistant.generate``).  With ``compressor = "llm"`` low-importance blocks are condensed
by ``assistant.compress`` (cached per block, so rarely more than one call a turn).
"""

from __future__ import annotations

from typing import Literal

from simloop.memory import AdaptiveMemory, history_share
from simloop.parts import (
    MAX_WORDS,
    current_utterance,
    embedding_rerank,
    fit_passages,
    format_passage,
    grounded_reply,
    heuristic_rewrite,
    is_dependent,
    rank_ptkb_uses,
    ranker_embedder,
    timed_stage,
)
from simloop.run import Context
from simloop.schema import AssistantReply, DialogueState
from simloop.text import count_tokens

__all__ = ["ACMS"]


class ACMS:
    # The LLM roles it calls: the run asks each one's endpoint for an answer before it starts.
    llm_roles = ("assistant.generate",)
    needs = ("retriever", "embedder", "embedder:mpnet")  # opened before the first dialogue (run/runner.py warm_up)
    # BM25 depth is ``candidates`` (re-ranked, then cut to what fits the budget): a run's
    # --k / retrieval.k is rejected with this name rather than ignored (run/plugins.py).
    DEPTH_PARAM = "candidates"

    def __init__(self, ctx: Context, token_budget: int = 2048, system_tokens: int = 250, candidates: int = 30,
                 max_passages: int = 5, profile_weight: float = 0.2, prior_weight: float = 0.2,
                 compressor: Literal["extractive", "llm"] = "extractive", max_words: int = MAX_WORDS):
        if (candidates < 1 or max_passages < 1 or profile_weight + prior_weight >= 1
                or min(profile_weight, prior_weight) < 0):
            raise ValueError("need candidates, max_passages >= 1 and profile_weight + prior_weight < 1")
        self.ctx, self.candidates, self.max_passages, self.max_words = ctx, candidates, max_passages, max_words
        self.profile_weight, self.prior_weight = profile_weight, prior_weight
        self.memory = AdaptiveMemory(token_budget=token_budget, system_tokens=system_tokens, compressor=compressor)

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = current_utterance(state)
        stages: list = []
        embedder, retriever = await self.ctx.embedder(), await self.ctx.retriever()
        ptkb_embedder = await ranker_embedder(self.ctx)
        async with timed_stage("ptkb", stages):
            selected = await rank_ptkb_uses(ptkb_embedder, utterance, [u for u, _ in state.history()], state.ptkb)
        statements = [p.statement for p in selected if p.used]
        async with timed_stage("rewrite", stages):
            query = heuristic_rewrite(utterance, state.history())  # no PTKB words: see parts/rewrite.py
        async with timed_stage("retrieve", stages, k=self.candidates):
            found = await retriever.search(query, self.candidates)
        async with timed_stage("rerank", stages):
            hits = await embedding_rerank(embedder, query, found, profile=" ".join(statements) or None,
                                          profile_weight=self.profile_weight, prior_weight=self.prior_weight)
        share = history_share(len(state.turns), is_dependent(utterance), hits[0].score if hits else 0.0)
        knowledge = round((1 - share) * self.memory.available_tokens)
        shown = fit_passages(hits, knowledge, self.max_passages)
        reserve = sum(count_tokens(format_passage(h)) for h in shown)
        context, info, memory_stages, _ = await self.memory.build(state, self.ctx, reserve_tokens=max(1, reserve))
        stages += memory_stages
        info = info.model_copy(update={"history_share": share, "knowledge_tokens": reserve})
        return await grounded_reply(self.ctx.chat("assistant.generate"), utterance=utterance, hits=hits,
                                    shown=shown, context=context, info=info, ptkb=selected, stages=stages,
                                    query=query, max_words=self.max_words)
