"""iiuot: the IIUoT TREC iKAT 2024 pipeline (seed paper 002).

Context = the last three turns.  Rewrite with the whole PTKB (LLM) -> the no-LLM PTKB ranker
(``simloop.parts.ptkb_rank`` on MiniLM, ``MINILM_PARAMS``: the pre-filter's and the vote's
thresholds below were calibrated on MiniLM's cosines, and all-mpnet-base-v2's sit on another
scale) picks statements for that rewrite ->
rewrite again with only those (LLM): the paper's feedback loop.  PTKB ranking for the
refined query: pre-filter by the same ranker (against the query and the earlier user
utterances, its top ``prefilter_top_k`` scoring at least ``prefilter_threshold``) -> LLM
re-ranker scores -> weighted score S_rel = a * ranker + (1 - a) * LLM with a dynamic threshold
and at least two votes among the ranker, the LLM and word overlap (eq. 1-2; the fine-tuned BGE reranker is
not available offline, word overlap is the third voter).  The recorded ranking: the kept
statements (``used``), then the rest in the pre-filter ranker's order.  BM25 candidates (1,000 in the
paper, 50 by default here to keep MiniLM on a CPU quick) are re-ranked by MiniLM against
the refined query plus the top-3 statements; the top five ground the answer (Self-RAG in
the paper, the grounded JSON answer here).  LLM roles: ``assistant.rewrite``,
``assistant.ptkb``, ``assistant.generate``.
"""

from __future__ import annotations

from simloop.memory import make_memory
from simloop.parts import (
    DEFAULT_THRESHOLD,
    MAX_WORDS,
    MINILM_PARAMS,
    current_utterance,
    embedding_rerank,
    grounded_reply,
    iterative_rewrite,
    lexical_scores,
    rank_ptkb_uses,
    score_ptkb_llm,
    timed_stage,
    used_only,
    vote_ptkb,
)
from simloop.run import Context
from simloop.schema import AssistantReply, DialogueState, PtkbUse, Stage

__all__ = ["IIUoT"]

_THRESHOLDS = {"embedding": DEFAULT_THRESHOLD, "llm": 0.5, "lexical": 0.2}


class IIUoT:
    # The LLM roles it calls: the run asks each one's endpoint for an answer before it starts.
    llm_roles = ("assistant.ptkb", "assistant.rewrite", "assistant.generate")
    needs = ("retriever", "embedder")  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(self, ctx: Context, window: int = 3, candidates: int = 50, k: int = 20, passages: int = 5,
                 alpha: float = 0.4, prefilter_threshold: float = 0.15, prefilter_top_k: int = 5,
                 max_words: int = MAX_WORDS):
        if min(candidates, k, passages) < 1 or candidates < k or not 0.0 <= alpha <= 1.0:
            raise ValueError("need candidates >= k >= 1, passages >= 1 and 0 <= alpha <= 1")
        self.ctx, self.candidates, self.k, self.passages, self.max_words = ctx, candidates, k, passages, max_words
        self.weights = {"embedding": alpha, "llm": 1.0 - alpha, "lexical": 0.0}  # overlap votes, never weighs
        self.prefilter = (prefilter_threshold, prefilter_top_k)
        self.memory = make_memory("window", turns=window)

    async def _rank_ptkb(self, state: DialogueState, query: str, stages: list[Stage]) -> list[PtkbUse]:
        embedder = await self.ctx.embedder()  # MiniLM, as MINILM_PARAMS says
        threshold, top_k = self.prefilter
        async with timed_stage("ptkb.prefilter", stages):
            ranking = await rank_ptkb_uses(embedder, query, [u for u, _ in state.history()], state.ptkb, MINILM_PARAMS)
        cands = [c for c in ranking[:top_k] if (c.score or 0.0) >= threshold]
        llm, st = await score_ptkb_llm(self.ctx.chat("assistant.ptkb"), state.ptkb, cands, query)
        stages.append(st)
        scores = {"embedding": {c.index: c.score or 0.0 for c in cands}, "llm": llm,
                  "lexical": lexical_scores(cands, query)}
        kept = [c.model_copy(update={"used": True}) for c in vote_ptkb(cands, scores, _THRESHOLDS, self.weights)]
        chosen = {c.index for c in kept}
        return [*kept, *(c.model_copy(update={"used": False}) for c in ranking if c.index not in chosen)]

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = current_utterance(state)
        context, info, stages, _ = await self.memory.build(state, self.ctx)
        embedder = await self.ctx.embedder()  # MiniLM, as MINILM_PARAMS says

        async def select(query: str) -> list[PtkbUse]:
            return used_only(await rank_ptkb_uses(embedder, query, [u for u, _ in state.history()], state.ptkb,
                                                  MINILM_PARAMS))

        _, refined, _, sts = await iterative_rewrite(self.ctx.chat("assistant.rewrite"), utterance, context,
                                                     state.ptkb, select)
        stages += sts
        selected = await self._rank_ptkb(state, refined, stages)
        retriever = await self.ctx.retriever()
        async with timed_stage("retrieve", stages, k=self.candidates):
            found = await retriever.search(refined, self.candidates)
        async with timed_stage("rerank", stages):
            profile = " ".join([refined, *(p.statement for p in used_only(selected)[:3])])
            hits = await embedding_rerank(embedder, profile,
                                          found, self.k)
        return await grounded_reply(self.ctx.chat("assistant.generate"), utterance=utterance, hits=hits,
                                    shown=self.passages, context=context, info=info, ptkb=selected, stages=stages,
                                    query=refined, max_words=self.max_words)
