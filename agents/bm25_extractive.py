"""bm25_extractive: the offline default assistant (DESIGN §6) — no LLM anywhere.

PTKB statements are selected by MiniLM similarity to the utterance and the previous user
turn (a "window" of one turn); the query is rewritten heuristically with context terms;
BM25 retrieves; the response is the best sentences of the top passages that stay on the
question, opened by a sentence naming the user's facts that bear on it (PTKB statements,
and what the memory strategy kept: ``simloop/parts/generate_focus.py``).

With ``memory`` set to a context strategy (``full``, ``summary``, ``window``,
``adaptive``; see ``simloop/memory/``) the rewrite draws its context terms from that
strategy's built context instead of the last user turns: the context's user messages
(``BuiltContext.parts``, never parsed back out of the prompt text) stand in for the history, and the statements in it (what the user said about themselves, or a
summary's sentences) are ranked by MiniLM similarity to the utterance like PTKB
statements; the best ones lend their salient words to the query, and those words weigh
like the user's own in the extractive answer (the user did say them).  So what a strategy
keeps is what the query can still use (``simloop memory`` measures exactly that).
Without ``memory`` (the default) the agent behaves as it always did.

Threshold calibration (all-MiniLM-L6-v2, query = utterance + previous user utterance):
obviously related statements score 0.30-0.60 ("What is gout and what causes an attack?"
vs "I had my first gout attack..." 0.59; "What exactly is a marathon...?" vs "I signed up
for the Lisbon Marathon..." 0.48; "What does the pancreas do?" vs "I was diagnosed with
type 2 diabetes..." 0.32), unrelated ones stay below 0.24 (the best statement for "What
is the capital of Australia?" scores 0.15-0.23 across the shipped personas, for
"Explain how photosynthesis works." 0.03-0.21).  On the iKAT 2023 PTKB qrels
(ptkb_rel_nist, 98 turns, top-3) 0.30 gives P 0.67 / R 0.30 and 0.35 gives P 0.73 / R 0.20.
"""

from __future__ import annotations

from typing import Any, Sequence

from simloop.memory import ContextPart, MemoryStrategy, make_memory
from simloop.parts.generate_focus import focused_answer
from simloop.parts.ptkb import DEFAULT_THRESHOLD, rank_ptkb_by_embedding
from simloop.parts.rewrite import heuristic_rewrite
from simloop.parts.stages import timed_stage
from simloop.text import content_words, count_tokens, sentences, stem
from simloop.schema import AssistantReply, ContextInfo, DialogueState, Passage, PtkbUse, Stage

__all__ = ["BM25Extractive", "DEFAULT_PTKB_THRESHOLD", "memory_statements"]

DEFAULT_PTKB_THRESHOLD = DEFAULT_THRESHOLD  # 0.30, see the calibration notes above
_GENERATION_PASSAGES = 5  # the extractive answer reads the top few passages only
_SNIPPET_CHARS = 300
# Context statements compete only with each other (the PTKB has its own threshold), and a
# remembered fact rarely shares words with the later question that needs it: "I have a
# peanut allergy" vs "Which snacks should I pack?" scores 0.26, unrelated pairs < 0.12.
DEFAULT_MEMORY_THRESHOLD = 0.15
_FIRST_PERSON = frozenset("i i'm i've i'll i'd me my mine we we're we've our ours".split())


def memory_statements(parts: Sequence[ContextPart]) -> tuple[list[str], list[str]]:
    """(user messages, statements) of a built context's parts.  Statements are declarative
    sentences the user said about themselves or any declarative sentence of the strategy's
    own text, such as a summary; questions carry no fact."""
    users: list[str] = []
    statements: list[str] = []
    for role, text in parts:
        text = text.strip()
        if role == "assistant" or not text:
            continue
        if role == "user":
            users.append(text)
        for s in sentences(text):
            s = s.strip(" -")
            if s.endswith(("?", ":")) or not content_words(s):
                continue
            first_person = any(w.strip(".,;!").lower() in _FIRST_PERSON for w in s.split())
            if (role is None or first_person) and s not in statements:
                statements.append(s)
    return users, statements


def _with_remembered(utterance: str, query: str, remembered: list[str]) -> str:
    """The answer's focus: the utterance plus the query words taken from what the user
    said earlier - the user's own words, so they weigh like the question's."""
    said = {stem(w) for s in remembered for w in content_words(s)} - {stem(w) for w in content_words(utterance)}
    extra = [w for w in content_words(query) if stem(w) in said]
    return " ".join([utterance, *extra])


class BM25Extractive:
    """BM25 + extractive answer, with embedding-selected PTKB and a heuristic rewrite."""

    def __init__(
        self,
        ctx: Any,
        k: int = 10,
        ptkb_threshold: float = DEFAULT_PTKB_THRESHOLD,
        ptkb_top_k: int = 3,
        max_words: int = 220,
        memory: str | None = None,
        memory_params: dict[str, Any] | None = None,
        memory_threshold: float = DEFAULT_MEMORY_THRESHOLD,
        memory_top_k: int = 2,
    ):
        if k < 1 or ptkb_top_k < 0 or max_words < 10 or memory_top_k < 0:
            raise ValueError("need k >= 1, ptkb_top_k >= 0, memory_top_k >= 0 and max_words >= 10")
        if not -1.0 <= ptkb_threshold <= 1.0 or not -1.0 <= memory_threshold <= 1.0:
            raise ValueError("ptkb_threshold and memory_threshold are cosine similarities, between -1 and 1")
        if memory_params and memory is None:
            raise ValueError("memory_params need a memory strategy")
        self.ctx = ctx
        self.k, self.ptkb_threshold, self.ptkb_top_k, self.max_words = k, ptkb_threshold, ptkb_top_k, max_words
        self.memory = make_memory(memory, **(memory_params or {})) if memory is not None else None
        self.memory_threshold, self.memory_top_k = memory_threshold, memory_top_k

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = state.user.utterance if state.user is not None else ""
        history = state.history()
        window = [user for user, _ in history[-1:]]  # the previous user turn disambiguates
        stages: list[Stage] = []

        # Resources are fetched outside the timers: the first turn would otherwise charge
        # the model load and JVM boot to one dialogue's stage latencies.
        embedder = await self.ctx.embedder()
        async with timed_stage("ptkb", stages):
            selected = await rank_ptkb_by_embedding(
                embedder, " ".join([utterance, *window]), state.ptkb, self.ptkb_threshold, self.ptkb_top_k
            )
        context: ContextInfo | None = None
        focus: str | None = None
        remembered: list[str] = []
        if self.memory is None:
            async with timed_stage("rewrite", stages):
                query = heuristic_rewrite(utterance, history, [p.statement for p in selected])
        else:
            query, context, remembered = await self._rewrite_from_memory(self.memory, state, utterance, embedder,
                                                                         selected, stages)
            focus = _with_remembered(utterance, query, remembered)
        retriever = await self.ctx.retriever()
        async with timed_stage("retrieve", stages):
            hits = await retriever.search(query, self.k)
        # PtkbUse.used (the set the assistant relies on) where the PTKB stage marks one.
        chosen = [p.statement for p in selected if getattr(p, "used", True)]
        async with timed_stage("generate", stages):
            response, used = await focused_answer(
                embedder, query, hits, utterance=utterance, ptkb=chosen, remembered=remembered,
                max_words=self.max_words, passages=_GENERATION_PASSAGES, focus=focus or utterance,
            )

        read = [utterance, *window, *(p.statement for p in selected), *(h.text for h in hits[:_GENERATION_PASSAGES])]
        cited = set(used)
        return AssistantReply(
            response=response,
            rewritten_query=query,
            passages=[
                Passage(rank=i, docid=h.docid, score=h.score, used=h.docid in cited, text=h.text[:_SNIPPET_CHARS])
                for i, h in enumerate(hits, 1)
            ],
            ptkb_provenance=selected,
            context=context or ContextInfo(strategy="window", tokens=count_tokens(" ".join(read))),
            stages=stages,
        )

    async def _rewrite_from_memory(self, memory: MemoryStrategy, state: DialogueState, utterance: str,
                                   embedder: Any, selected: list[PtkbUse],
                                   stages: list[Stage]) -> tuple[str, ContextInfo, list[str]]:
        """The heuristic rewrite fed from the strategy's context (see the module notes)."""
        built = await memory.build(state, self.ctx)
        stages += built.stages
        users, statements = memory_statements(built.parts)
        async with timed_stage("rewrite", stages):
            recalled = await rank_ptkb_by_embedding(embedder, utterance, statements, self.memory_threshold,
                                                    self.memory_top_k)
            remembered = [r.statement for r in recalled]
            statements = [*remembered, *(p.statement for p in selected)]  # what was just said weighs first
            query = heuristic_rewrite(utterance, [(u, "") for u in users], statements)
        return query, built.info.model_copy(update={"recalled": remembered}), remembered
