"""bm25_extractive: the offline default assistant — no LLM anywhere.

PTKB statements are ranked by the no-LLM ranker (``simloop.parts.ptkb_rank``:
all-mpnet-base-v2 similarity to the utterance and, discounted, to the earlier user
utterances; ``ptkb_params={"encoder": "minilm"}`` ranks with MiniLM and its own values,
worse and ~1/6 of the CPU); the whole ranking is the turn's ``ptkb_provenance`` and the
``used`` head of it (of the top ``ptkb_top_k``, those scoring at least ``ptkb_threshold``
and within ``used_gap`` of the turn's best) is what the answer may name; the
query is rewritten heuristically with context terms from earlier turns, no PTKB words
(``simloop/parts/rewrite.py`` says why); BM25 retrieves; the response is the
best sentences of the top passages that stay on the question, opened by a sentence naming
the user's facts that bear on it (PTKB statements, and what the memory strategy kept:
``simloop/parts/generate_focus.py``).

With ``memory`` set to a context strategy (``full``, ``summary``, ``window``,
``adaptive``; see ``simloop/memory/``) the rewrite draws its context terms from that
strategy's built context instead of the last user turns: the context's user messages
(``BuiltContext.parts``, never parsed back out of the prompt text) stand in for the
history, and the statements in it (what the user said about themselves, or a summary's
sentences) are ranked by MiniLM similarity to the utterance like PTKB
statements; the best ones lend their salient words to the query, and those words weigh
like the user's own in the extractive answer (the user did say them).  So what a strategy
keeps is what the query can still use (``simloop memory`` measures exactly that).
Without ``memory`` (the default) the agent behaves as it always did.

PTKB parameters: ``ptkb_threshold`` / ``ptkb_top_k`` are the ranker's ``used_threshold`` /
``used_top_k``, ``ptkb_params`` any other ``RankParams`` field; the defaults were chosen on
the iKAT 2023 train topics only (``simloop/parts/ptkb_rank.py`` says how and what they
score on the report sets).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simloop.memory import ContextPart, MemoryStrategy, make_memory
from simloop.parts import (
    DEFAULT_PARAMS,
    RankParams,
    focused_answer,
    heuristic_rewrite,
    question_part,
    rank_ptkb_by_embedding,
    rank_ptkb_uses,
    ranker_embedder,
    request_text,
    respell,
    timed_stage,
    turns_down,
    used_only,
)
from simloop.run import Context
from simloop.schema import AssistantReply, ContextInfo, DialogueState, Passage, Stage
from simloop.search import CountsTerms, Embedder, english_words
from simloop.text import content_words, count_tokens, sentences, stem

__all__ = ["BM25Extractive", "DEFAULT_PTKB_THRESHOLD", "memory_statements"]

DEFAULT_PTKB_THRESHOLD = DEFAULT_PARAMS.used_threshold  # MPNet's, chosen on 2023 train (parts/ptkb_rank.py)
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

    needs: tuple[str, ...] = ("retriever", "embedder")  # opened before the first dialogue (run/runner.py warm_up)

    def __init__(
        self,
        ctx: Context,
        k: int = 10,
        ptkb_threshold: float | None = None,
        ptkb_top_k: int = DEFAULT_PARAMS.used_top_k,
        ptkb_params: dict[str, Any] | None = None,
        max_words: int = 220,
        memory: str | None = None,
        memory_params: dict[str, Any] | None = None,
        memory_threshold: float = DEFAULT_MEMORY_THRESHOLD,
        memory_top_k: int = 2,
    ):
        if k < 1 or ptkb_top_k < 0 or max_words < 10 or memory_top_k < 0:
            raise ValueError("need k >= 1, ptkb_top_k >= 0, memory_top_k >= 0 and max_words >= 10")
        if not -1.0 <= (ptkb_threshold or 0.0) <= 1.0 or not -1.0 <= memory_threshold <= 1.0:
            raise ValueError("ptkb_threshold and memory_threshold are cosine similarities, between -1 and 1")
        if memory_params and memory is None:
            raise ValueError("memory_params need a memory strategy")
        self.ctx = ctx
        self.k, self.max_words = k, max_words  # the PTKB values live in ptkb_params
        self.memory = make_memory(memory, **(memory_params or {})) if memory is not None else None
        self.memory_threshold, self.memory_top_k = memory_threshold, memory_top_k
        # ptkb_threshold None: the encoder's own (ENCODER_DEFAULTS), as every value not given.
        ranker = {**(ptkb_params or {}), "used_top_k": ptkb_top_k}
        if ptkb_threshold is not None:
            ranker["used_threshold"] = ptkb_threshold
        base = RankParams.from_mapping({"encoder": ranker.get("encoder", RankParams.encoder)})
        ranker["used_min"] = min(ranker.get("used_min", base.used_min), ptkb_top_k)  # top_k 0: use none
        self.ptkb_params = RankParams.from_mapping(ranker)
        if self.ptkb_params.encoder != "minilm":  # opened before the first dialogue too
            from simloop.search import check_available

            check_available()  # missing weights are one line before the run writes anything
            self.needs = (*self.needs, f"embedder:{self.ptkb_params.encoder}")

    async def respond(self, state: DialogueState) -> AssistantReply:
        utterance = state.user.utterance if state.user is not None else ""
        history = state.history()
        earlier = [user for user, _ in history]  # the ranker and the answer's opening both read them
        window = earlier[-1:]  # the previous user turn disambiguates
        stages: list[Stage] = []

        # Resources are fetched outside the timers: the first turn would otherwise charge
        # the model load and JVM boot to one dialogue's stage latencies.
        embedder = await self.ctx.embedder()
        ptkb_embedder = await ranker_embedder(self.ctx, self.ptkb_params)
        async with timed_stage("ptkb", stages):
            ranking = await rank_ptkb_uses(ptkb_embedder, utterance, earlier, state.ptkb, self.ptkb_params)
        selected = used_only(ranking)  # what the answer may name
        context: ContextInfo | None = None
        focus: str | None = None
        remembered: list[str] = []
        retriever = await self.ctx.retriever()
        heard = await self._heard(retriever, utterance, history, state.ptkb, stages)
        if self.memory is None:
            async with timed_stage("rewrite", stages):
                query = heuristic_rewrite(heard, history)  # no PTKB words: see parts/rewrite.py
                asked = heuristic_rewrite(question_part(heard), history)
        else:
            query, context, remembered = await self._rewrite_from_memory(self.memory, state, heard, embedder,
                                                                         stages)
            focus = _with_remembered(question_part(heard), query, remembered)
            asked = query
        async with timed_stage("retrieve", stages):
            hits = await retriever.search(query, self.k)
        chosen = [p.statement for p in selected]  # the used head of the ranking
        async with timed_stage("generate", stages):
            response, used = await focused_answer(
                embedder, query, hits, utterance=heard, ptkb=chosen, remembered=remembered,
                earlier=earlier, max_words=self.max_words, passages=_GENERATION_PASSAGES,
                focus=focus or question_part(heard), asked=asked, told=[a for _, a in history],
                turned_down=turns_down(utterance),
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
            ptkb_provenance=ranking,
            context=context or ContextInfo(strategy="window", tokens=count_tokens(" ".join(read))),
            stages=stages,
        )

    @staticmethod
    async def _heard(retriever: Any, utterance: str, history: Sequence[tuple[str, str]], ptkb: Sequence[str],
                     stages: list[Stage]) -> str:
        """What the utterance asks (``request_text``: no feedback, no framing words), with the
        typos the index can resolve respelt (``parts/spelling.py``), the dialogue's own
        words first; as typed when the retriever cannot count terms."""
        if not utterance or not isinstance(retriever, CountsTerms):
            return utterance
        known = [w for text in (*(t for turn in history for t in turn), *ptkb) for w in content_words(text)]
        async with timed_stage("spelling", stages):
            return await respell(request_text(utterance), retriever.doc_freq, known, english_words())

    async def _rewrite_from_memory(self, memory: MemoryStrategy, state: DialogueState, utterance: str,
                                   embedder: Embedder, stages: list[Stage]) -> tuple[str, ContextInfo, list[str]]:
        """The heuristic rewrite fed from the strategy's context (see the module notes)."""
        built = await memory.build(state, self.ctx)
        stages += built.stages
        users, statements = memory_statements(built.parts)
        async with timed_stage("rewrite", stages):
            recalled = await rank_ptkb_by_embedding(embedder, utterance, statements, self.memory_threshold,
                                                    self.memory_top_k)
            remembered = [r.statement for r in recalled]
            query = heuristic_rewrite(utterance, [(u, "") for u in users], remembered)
        return query, built.info.model_copy(update={"recalled": remembered}), remembered
