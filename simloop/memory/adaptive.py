"""The ACMS adaptive context (seed paper 001): a budgeted window plus compressed older history.

Per turn, with ``available = token_budget - system_tokens`` and ``rag`` the tokens spent
on retrieved passages (passed in as ``reserve_tokens``, else reserved by the
history/knowledge balance):

1. window size by formula (1): ``k = min(k_max, floor((available - rag) / avg_msg_tokens))``
   messages kept verbatim (shrunk further if the real messages are longer than average);
2. older messages are cut into blocks of 5-10 messages, at user turns, where the topic
   shifts (MiniLM similarity to the running block drops) or the block is full;
3. each block gets an importance score: similarity to the query, to the user profile
   (PTKB mean, updated with each user message by exponential smoothing, lambda 0.9),
   recency, and key entities (numbers, names, dates, decisions);
4. blocks scoring at least ``compress_below`` (ACMS: 0.4) keep more of their sentences;
   the others are compressed hard - extractively (offline) or by the LLM
   (``compressor="llm"``, role ``assistant.compress``, cached per block) - and the best
   blocks are packed into what the window leaves of the budget.

The produced context never exceeds ``available - rag`` tokens (``count_tokens``).
``BuiltContext.parts`` holds the same sentences with who said them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..errors import LLMError
from ..parts import is_dependent, timed_stage
from ..schema import DialogueState, Stage, Turn
from ..text import clip_to_tokens, clip_words, content_words, count_tokens, sentences, stem
from .base import BuiltContext, ContextPart, MemoryDeps, built

__all__ = ["AdaptiveMemory", "window_size", "history_share", "segment", "entity_score", "profile_vector"]

_KEY = "memory.adaptive"
_EARLIER = "Earlier in the conversation (condensed):"
_RECENT = "Most recent messages:"
_DECISION = frozenset(
    "decide decided decision chose choose chosen plan planned booked book bought buy prefer preferred budget "
    "allergic diagnosed agreed will won't cannot must deadline".split()
)
_MONTHS = frozenset(
    "january february march april may june july august september october november december monday tuesday "
    "wednesday thursday friday saturday sunday".split()
)
_COMPRESS_SYSTEM = (
    "You condense part of an earlier conversation so an assistant can keep it in mind cheaply. Keep "
    "names, numbers, dates, the user's needs, preferences and decisions; drop everything else. Reply "
    "with the condensed text only, at most {words} words."
)


@dataclass(frozen=True)
class _Msg:
    turn: int
    role: str  # "User" or "Assistant"
    text: str

    def line(self) -> str:
        return f"{self.role} (turn {self.turn}): {self.text}"

    def part(self) -> ContextPart:
        return ContextPart("user" if self.role == "User" else "assistant", self.text)


def _messages(turns: Sequence[Turn]) -> list[_Msg]:
    out: list[_Msg] = []
    for t in turns:
        out += [_Msg(t.index, "User", t.user.utterance), _Msg(t.index, "Assistant", t.assistant.response)]
    return out


def window_size(history_budget: int, avg_msg_tokens: float, k_max: int) -> int:
    """ACMS formula (1), with ``history_budget = token_budget - system_tokens - rag_tokens``."""
    if avg_msg_tokens <= 0:
        return k_max
    return max(0, min(k_max, math.floor(history_budget / avg_msg_tokens)))


def history_share(n_turns: int, dependent: bool, rag_quality: float | None = None) -> float:
    """alpha_history, the history part of the history/knowledge balance (ACMS level 3):
    more history for long dialogues and for follow-ups that lean on earlier turns, more
    knowledge when retrieval found strong matches (``rag_quality``: best cosine, 0-1)."""
    share = 0.3 + 0.2 * min(1.0, n_turns / 10)
    if dependent:
        share += 0.15
    if rag_quality is not None:
        share += 0.2 * (0.5 - min(1.0, max(0.0, rag_quality)))
    return round(min(0.7, max(0.2, share)), 3)


def profile_vector(ptkb_vecs: np.ndarray, user_vecs: np.ndarray, smoothing: float = 0.9) -> np.ndarray | None:
    """The user profile: PTKB mean, then each user message blended in (exponential smoothing)."""
    if len(ptkb_vecs) == 0 and len(user_vecs) == 0:
        return None
    p = ptkb_vecs.mean(axis=0) if len(ptkb_vecs) else user_vecs[0]
    for v in user_vecs:
        p = smoothing * p + (1 - smoothing) * v
    norm = float(np.linalg.norm(p))
    return p / norm if norm else p


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


def segment(roles: Sequence[str], vecs: np.ndarray, lo: int = 5, hi: int = 10, shift: float = 0.25) -> list[list[int]]:
    """Blocks of ``lo``-``hi`` message indices; a block is closed before a user message when
    the topic shifts or the next exchange would overflow it, and always at ``hi``."""
    blocks: list[list[int]] = []
    cur: list[int] = []
    for i, role in enumerate(roles):
        if cur and len(cur) >= hi:
            blocks.append(cur)
            cur = []
        elif cur and role == "User" and len(cur) >= lo:
            centroid = _unit(vecs[cur].mean(axis=0))
            if float(vecs[i] @ centroid) < shift or len(cur) + 2 > hi:
                blocks.append(cur)
                cur = []
        cur.append(i)
    if cur:
        if blocks and len(cur) < lo and len(blocks[-1]) + len(cur) <= hi:
            blocks[-1] += cur  # a short tail joins its neighbour rather than stand alone
        else:
            blocks.append(cur)
    return blocks


def entity_score(text: str) -> float:
    """Share of sentences carrying a number, a name, a date or a decision."""
    sents = sentences(text) or [text]
    hits = 0
    for s in sents:
        tokens = s.split()
        lowered = {t.strip(".,;:!?()\"'").lower() for t in tokens}
        named = any(t[:1].isupper() for t in tokens[1:])
        if any(c.isdigit() for c in s) or named or lowered & _MONTHS or lowered & _DECISION:
            hits += 1
    return hits / len(sents)


def _terms(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def _extract(msgs: Sequence[_Msg], query_terms: set[str], ratio: float) -> list[ContextPart]:
    """Keep the most important sentences (query overlap, entities, the user's own words),
    grouped by the message they come from, in dialogue order."""
    units = [(i, s) for i, m in enumerate(msgs) for s in (sentences(m.text) or [m.text])]
    if not units:
        return []

    def score(unit: tuple[int, str]) -> float:
        i, s = unit
        overlap = len(query_terms & _terms(s)) / (len(query_terms) or 1)
        return overlap + 0.3 * entity_score(s) + (0.2 if msgs[i].role == "User" else 0.0)

    keep = max(1, math.ceil(ratio * len(units)))
    best: list[int] = []
    seen: set[str] = set()
    for j in sorted(range(len(units)), key=lambda j: (-score(units[j]), j)):
        key = " ".join(units[j][1].lower().split())
        if key not in seen:  # users repeat themselves; a repeat adds nothing
            seen.add(key)
            best.append(j)
        if len(best) == keep:
            break
    groups: list[tuple[int, list[str]]] = []
    for j in sorted(best):
        i, s = units[j]
        if groups and groups[-1][0] == i:
            groups[-1][1].append(s)
        else:
            groups.append((i, [s]))
    return [msgs[i].part()._replace(text=" ".join(said)) for i, said in groups]


def _render(parts: Sequence[ContextPart]) -> str:
    """Extracted sentences as prompt text: ``User: ... Assistant: ...``."""
    return " ".join(f"{p.role.capitalize()}: {p.text}" if p.role else p.text for p in parts)


@dataclass
class _Block:
    msgs: list[_Msg]
    span: tuple[int, int]  # message indices, for the LLM cache
    score: float
    parts: list[ContextPart] = field(default_factory=list)
    short: list[ContextPart] = field(default_factory=list)  # the hardest compression: one sentence

    def line(self, text: str) -> str:
        first, last = self.msgs[0].turn, self.msgs[-1].turn
        turns = f"turn {first}" if first == last else f"turns {first}-{last}"
        return f"- {turns}: {text}"


class AdaptiveMemory:
    """ACMS context management; see the module notes.  Parameters are validated here."""

    name = "adaptive"

    def __init__(self, token_budget: int = 2048, system_tokens: int = 250, k_max: int = 8, block_min: int = 5,
                 block_max: int = 10, compress_below: float = 0.4, keep_ratio: float = 0.5, low_ratio: float = 0.15,
                 weights: Sequence[float] = (0.5, 0.2, 0.15, 0.15), smoothing: float = 0.9, topic_shift: float = 0.25,
                 compressor: Literal["extractive", "llm"] = "extractive", role: str = "assistant.compress"):
        if token_budget <= system_tokens or system_tokens < 0:
            raise ValueError("adaptive memory needs token_budget > system_tokens >= 0")
        if not 5 <= block_min <= block_max <= 10:
            raise ValueError("adaptive memory blocks hold 5-10 messages: need 5 <= block_min <= block_max <= 10")
        if k_max < 0 or not 0 < low_ratio <= keep_ratio <= 1 or len(weights) != 4 or min(weights) < 0:
            raise ValueError("adaptive memory: need k_max >= 0, 0 < low_ratio <= keep_ratio <= 1, four weights >= 0")
        if compressor not in ("extractive", "llm"):
            raise ValueError("adaptive memory compressor is 'extractive' or 'llm'")
        self.token_budget, self.system_tokens, self.k_max = token_budget, system_tokens, k_max
        self.block_min, self.block_max, self.compress_below = block_min, block_max, compress_below
        self.keep_ratio, self.low_ratio = keep_ratio, low_ratio
        self.smoothing, self.topic_shift = smoothing, topic_shift
        total = sum(weights) or 1.0
        self.weights = tuple(w / total for w in weights)
        self.compressor, self.role = compressor, role

    @property
    def available_tokens(self) -> int:
        """What history and passages share: the budget minus the system prompt."""
        return self.token_budget - self.system_tokens

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        query = state.user.utterance if state.user is not None else ""
        share = history_share(len(state.turns), is_dependent(query))
        rag = reserve_tokens if reserve_tokens > 0 else round((1 - share) * self.available_tokens)
        budget = max(0, self.available_tokens - rag)
        msgs = _messages(state.turns)
        avg = sum(count_tokens(m.text) for m in msgs) / len(msgs) if msgs else 0.0
        k = min(len(msgs), window_size(budget, avg, self.k_max))
        while k > 0 and count_tokens(_recent(msgs[len(msgs) - k:])) > budget:
            k -= 1  # formula (1) uses the average; the real last messages may be longer
        window, older = msgs[len(msgs) - k:] if k else [], msgs[: len(msgs) - k]
        stages: list[Stage] = []
        blocks = await self._blocks(state, deps, older, query, stages) if older else []
        text, parts, kept = _pack(blocks, window, budget)
        return built(self.name, text, parts, stages, budget=budget, window_messages=k, blocks=len(blocks),
                     kept_blocks=kept, history_share=share)

    async def _blocks(self, state: DialogueState, deps: MemoryDeps, older: list[_Msg], query: str,
                      stages: list[Stage]) -> list[_Block]:
        user_texts = [t.user.utterance for t in state.turns]
        embedder = await deps.embedder()
        async with timed_stage("memory.score", stages):
            vecs = await embedder.encode([query, *(m.text for m in older), *state.ptkb, *user_texts])
            q = vecs[0]
            mvecs = vecs[1:1 + len(older)]
            ptkb_end = 1 + len(older) + len(state.ptkb)
            pvecs, uvecs = vecs[1 + len(older):ptkb_end], vecs[ptkb_end:]
            profile = profile_vector(pvecs, uvecs, self.smoothing)
            spans = segment([m.role for m in older], mvecs, self.block_min, self.block_max, self.topic_shift)
            blocks = [self._score(older, span, mvecs, q, profile, i, len(spans)) for i, span in enumerate(spans)]
        terms = _terms(query)
        for b in blocks:
            high = b.score >= self.compress_below
            b.parts = _extract(b.msgs, terms, self.keep_ratio if high else self.low_ratio)
            b.short = _extract(b.msgs, terms, 1e-9)
            if not high and self.compressor == "llm":
                b.parts = await self._llm_compress(state, deps, b, stages)
        return blocks

    def _score(self, older: list[_Msg], span: list[int], mvecs: np.ndarray, q: np.ndarray,
               profile: np.ndarray | None, i: int, n: int) -> _Block:
        msgs = [older[j] for j in span]
        v = _unit(mvecs[span].mean(axis=0))
        sim_q = max(0.0, float(v @ q))
        sim_p = max(0.0, float(v @ profile)) if profile is not None else 0.0
        recency = (i + 1) / n
        entities = entity_score(" ".join(m.text for m in msgs))
        wq, wp, wr, we = self.weights
        score = wq * sim_q + wp * sim_p + wr * recency + we * entities
        return _Block(msgs, (span[0], span[-1]), round(score, 4))

    async def _llm_compress(self, state: DialogueState, deps: MemoryDeps, b: _Block,
                            stages: list[Stage]) -> list[ContextPart]:
        cache = state.assistant_memory.setdefault(_KEY, {})
        key = f"{b.span[0]}-{b.span[1]}"
        if key in cache:
            return [ContextPart(None, cache[key])]
        words = max(15, math.ceil(self.low_ratio * sum(len(m.text.split()) for m in b.msgs)))
        messages = [{"role": "system", "content": _COMPRESS_SYSTEM.format(words=words)},
                    {"role": "user", "content": "\n".join(m.line() for m in b.msgs)}]
        try:
            result = await deps.chat(self.role).chat(messages, stage="memory.compress", temperature=0.0,
                                                     max_tokens=math.ceil(words * 2))
        except LLMError as exc:  # keep the extractive version; the stage says why
            stages.append(exc.stage or Stage(name="memory.compress", error=str(exc)[:300]))
            return b.parts
        stages.append(result.stage)
        cache[key] = clip_words(" ".join(result.text.split()), words)
        return [ContextPart(None, cache[key])]


def _recent(window: Sequence[_Msg]) -> str:
    return "\n".join([_RECENT, *(m.line() for m in window)]) if window else ""


def _assemble(chosen: Sequence[tuple[_Block, list[ContextPart]]], window: Sequence[_Msg]) -> str:
    sections: list[str] = []
    if chosen:
        ordered = sorted(chosen, key=lambda c: c[0].span)
        sections.append("\n".join([_EARLIER, *(b.line(_render(parts)) for b, parts in ordered)]))
    if window:
        sections.append(_recent(window))
    return "\n\n".join(sections)


def _pack(blocks: Sequence[_Block], window: Sequence[_Msg], budget: int) -> tuple[str, list[ContextPart], int]:
    """The most important blocks that still fit next to the window, in dialogue order;
    a block that does not fit in its compressed form may still fit as one sentence.
    Returns the text, its parts and how many blocks were kept."""
    chosen: list[tuple[_Block, list[ContextPart]]] = []
    for b in sorted(blocks, key=lambda b: (-b.score, b.span)):
        for parts in (b.parts, b.short):
            if parts and count_tokens(_assemble([*chosen, (b, parts)], window)) <= budget:
                chosen.append((b, parts))
                break
    text = _assemble(chosen, window)
    if count_tokens(text) > budget:  # only when even the window's last message overflows
        text = clip_to_tokens(text, budget)
    kept = [p for _, parts in sorted(chosen, key=lambda c: c[0].span) for p in parts]
    return text, [*kept, *(m.part() for m in window)], len(chosen)
