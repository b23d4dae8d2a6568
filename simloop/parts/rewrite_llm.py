"""Query rewriting and query generation with an LLM (DESIGN §6).

- ``llm_rewrite``: the utterance as a self-contained search query, using the conversation
  and PTKB statements (GenAIus); ``brief=True`` keeps only the question itself (NII RtG);
- ``iterative_rewrite``: rewrite, select PTKB with that rewrite, rewrite again with the
  selection (IIUoT's feedback loop);
- ``queries_per_ptkb``: a few BM25 queries for each selected statement + rewrite (NII RtG);
- ``queries_from_answer``: queries that would find the facts of a draft answer (NII GtR).

A rewrite that comes back empty or as a paragraph is cleaned or replaced by the
utterance: a retriever must always get a usable query.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..schema import PtkbUse, Stage
from .prompts import prompt_sections
from .stages import timed_stage

if TYPE_CHECKING:
    from ..llm import ChatModel

__all__ = ["llm_rewrite", "clean_query", "iterative_rewrite", "queries_per_ptkb", "queries_from_answer",
           "clean_queries", "QueryList"]

_REWRITE_SYSTEM = (
    "You turn the user's newest message into one search query for a document search engine. "
    "Keep the user's intent. Make the query self-contained: resolve pronouns and ellipsis from the "
    "conversation, and add details from the conversation or from the listed facts about the user "
    "only when they make the search more precise. Do not add anything that was not said. "
    "Reply with the query alone on one line - no label, quotes or explanation."
)
_BRIEF = (
    " Be brief: keep only the question itself with just the details it needs, phrased as one "
    "clear question."
)
_QUERIES_SYSTEM = (
    "You help a keyword (BM25) search engine. List up to {n} short, distinct keyword queries that "
    "would find documents answering the request below. Each query stands alone."
)
_FROM_ANSWER_SYSTEM = (
    "Below is a draft reply to a user. List up to {n} short, distinct search queries that would "
    "retrieve documents supporting the facts in that reply, one idea per query."
)
_LABEL = re.compile(r"^\s*(rewritten query|search query|query|rewrite|question)\s*[:\-]\s*", re.I)
_MAX_QUERY_WORDS = 60  # longer "queries" are paragraphs: the model ignored the instruction


class QueryList(BaseModel):
    queries: list[str] = Field(description="short search queries, one idea each")


def clean_query(text: str, fallback: str) -> str:
    """First non-empty line, without a label or quotes; ``fallback`` if nothing usable is left."""
    for line in text.splitlines():
        line = _LABEL.sub("", line).strip().strip("\"'`“”").strip()
        if line:
            return line if len(line.split()) <= _MAX_QUERY_WORDS else fallback
    return fallback


def clean_queries(queries: Sequence[str], limit: int) -> list[str]:
    """Stripped, non-empty, case-insensitively distinct queries, at most ``limit``."""
    out: dict[str, str] = {}
    for q in queries:
        q = " ".join(str(q).split()).strip("\"'")
        if q and q.lower() not in out and len(out) < limit:
            out[q.lower()] = q
    return list(out.values())


async def llm_rewrite(chat: ChatModel, utterance: str, context: str = "", ptkb: Sequence[str] = (), *,
                      brief: bool = False, stage: str = "rewrite") -> tuple[str, Stage]:
    """(query, stage): the utterance rewritten with ``context`` and the ``ptkb`` statements."""
    system = _REWRITE_SYSTEM + (_BRIEF if brief else "")
    messages = [{"role": "system", "content": system},
                {"role": "user", "content": prompt_sections(utterance, context, ptkb)}]
    result = await chat.chat(messages, stage=stage, temperature=0.0, max_tokens=96)
    return clean_query(result.text, utterance), result.stage


async def iterative_rewrite(chat: ChatModel, utterance: str, context: str, ptkb: Sequence[str],
                            select: Callable[[str], Awaitable[list[PtkbUse]]],
                            ) -> tuple[str, str, list[PtkbUse], list[Stage]]:
    """(first rewrite, refined rewrite, selection, stages): rewrite with the whole PTKB,
    let ``select`` pick statements for that rewrite, rewrite again with only those."""
    stages: list[Stage] = []
    first, st = await llm_rewrite(chat, utterance, context, ptkb, stage="rewrite.1")
    stages.append(st)
    async with timed_stage("rewrite.ptkb", stages):
        selected = await select(first)
    refined, st = await llm_rewrite(chat, utterance, context, [p.statement for p in selected], stage="rewrite.2")
    stages.append(st)
    return first, refined, selected, stages


async def _query_list(chat: ChatModel, system: str, content: str, n: int, stage: str) -> tuple[list[str], Stage]:
    messages = [{"role": "system", "content": system.format(n=n)}, {"role": "user", "content": content}]
    found, st = await chat.structured(messages, QueryList, stage=stage, temperature=0.0)
    return clean_queries(found.queries, n), st


async def queries_per_ptkb(chat: ChatModel, rewritten: str, statements: Sequence[str], n: int = 3
                           ) -> tuple[list[str], list[Stage]]:
    """Queries for each statement + rewrite, generated concurrently; with no statement,
    one group for the rewrite alone.  The rewrite itself always comes first."""
    groups = [f"{s} {rewritten}" for s in statements] or [rewritten]
    results = await asyncio.gather(*(
        _query_list(chat, _QUERIES_SYSTEM, f"Request: {g}", n, f"queries.{i}") for i, g in enumerate(groups, 1)
    ))
    queries = [rewritten, *(q for qs, _ in results for q in qs)]
    return clean_queries(queries, 1 + n * len(groups)), [st for _, st in results]


async def queries_from_answer(chat: ChatModel, utterance: str, answer: str, n: int = 5, *,
                              stage: str = "queries") -> tuple[list[str], Stage]:
    """Up to ``n`` queries for the facts of a draft ``answer`` to ``utterance``."""
    content = f"User message:\n{utterance}\n\nDraft reply:\n{answer}"
    return await _query_list(chat, _FROM_ANSWER_SYSTEM, content, n, stage)
