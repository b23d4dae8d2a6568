"""genaius: the GenAIus TREC iKAT 2025 pipeline (seed paper 000).

memory -> PTKB classification (LLM) -> rewrite (LLM) -> BM25 top-20 -> grounded answer
(LLM, JSON with passage ids).  ``memory = "full"`` conditions every stage on the whole
dialogue; ``"summary"`` on the evolving summary (one more LLM call per turn from turn 2),
the two runs the paper compares.  LLM roles: ``assistant.summary``, ``assistant.ptkb``,
``assistant.rewrite``, ``assistant.generate`` (each falls back to ``assistant``).
"""

from __future__ import annotations

from typing import Literal

from simloop.memory import make_memory
from simloop.parts import MAX_WORDS, classify_ptkb_llm, current_utterance, grounded_reply, llm_rewrite, timed_stage
from simloop.run import Context
from simloop.schema import AssistantReply, DialogueState

__all__ = ["GenAIus"]


class GenAIus:
    # The LLM roles it calls: the run asks each one's endpoint for an answer before it starts.
    llm_roles = ("assistant.ptkb", "assistant.rewrite", "assistant.generate")
    needs = ("retriever",)  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(self, ctx: Context, memory: Literal["full", "summary"] = "full", k: int = 20,
                 max_words: int = MAX_WORDS, summary_words: int = 150):
        if memory not in ("full", "summary"):
            raise ValueError("memory is 'full' or 'summary'")
        if k < 1 or max_words < 10:
            raise ValueError("need k >= 1 and max_words >= 10")
        self.ctx, self.k, self.max_words = ctx, k, max_words
        self.memory = make_memory(memory, **({"max_words": summary_words} if memory == "summary" else {}))

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = current_utterance(state)
        context, info, stages, _ = await self.memory.build(state, self.ctx)
        selected, st = await classify_ptkb_llm(self.ctx.chat("assistant.ptkb"), state.ptkb, utterance, context)
        statements = [p.statement for p in selected if p.used]
        query, st2 = await llm_rewrite(self.ctx.chat("assistant.rewrite"), utterance, context, statements)
        stages += [st, st2]
        retriever = await self.ctx.retriever()
        async with timed_stage("retrieve", stages, k=self.k):
            hits = await retriever.search(query, self.k)
        return await grounded_reply(self.ctx.chat("assistant.generate"), utterance=utterance, hits=hits,
                                    context=context, info=info, ptkb=selected, stages=stages, query=query,
                                    max_words=self.max_words)
