"""Grounded answers with an LLM (DESIGN §6).

- ``grounded_answer``: JSON ``{response, references}`` over passages shown as
  ``[docid] text``.  References are checked against the passages given: unknown ids are
  dropped; if none is left the top passage is cited and the stage says so (iKAT wants at
  least one provenance per response).  The response is cut to ``max_words``.
  Optional inputs: a ``suggestion`` (NII RtG's plan-then-answer) and ``drafts`` from
  other models (NII GtR's final answer merges two drafts);
- ``suggest_elements``: RtG stage one - what a good answer needs, and which of the
  user's preferences matter;
- ``draft_answer``: GtR's answer before retrieval, from the conversation and PTKB only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from ..schema import Stage
from ..search import Hit
from ..text import clip_words
from .prompts import prompt_sections
from .retrieve import PASSAGE_CHARS, format_passage
from .stages import stage_note

if TYPE_CHECKING:
    from ..llm import ChatModel

__all__ = ["GroundedAnswer", "Generated", "grounded_answer", "check_references", "suggest_elements",
           "draft_answer", "MAX_WORDS"]

MAX_WORDS = 220  # the iKAT response limit GenAIus used
_ANSWER_SYSTEM = (
    "You are a knowledgeable assistant giving personal, well-grounded replies. Answer the user's "
    "newest message directly and concisely, in at most {max_words} words. Use the facts about the "
    "user where they make the reply fit them better. Take information only from the passages, the "
    "conversation and the user facts given - no outside knowledge, nothing invented - and skip "
    "passages that do not help. Then list, under references, the ids (shown in square brackets) of "
    "every passage the reply actually uses; always list at least one - if none was used directly, "
    "the one closest to the reply."
)
_SUGGEST_SYSTEM = (
    "Before anyone replies to a user, plan the reply. Say briefly what elements a complete answer "
    "to the request needs, and which preferences or circumstances of this user should shape it. "
    "At most {max_words} words; do not answer the request itself."
)
_DRAFT_SYSTEM = (
    "You are an assistant talking with a user whose background facts are listed. Reply to the "
    "user's newest message from what you know, in at most {max_words} words, tailored to the user."
)


class GroundedAnswer(BaseModel):
    response: str = Field(description="the reply to the user")
    references: list[str] = Field(description="ids of the passages the reply uses, as shown in square brackets")


@dataclass(frozen=True)
class Generated:
    response: str
    used: list[str]  # cited docids, in the passages' rank order
    stage: Stage


def check_references(references: Sequence[str], hits: Sequence[Hit]) -> tuple[list[str], str | None]:
    """(cited docids in rank order, note): unknown ids dropped; the top passage when none is left."""
    given = [h.docid for h in hits]
    wanted = {str(r).strip().strip("[]").strip() for r in references}
    used = [d for d in given if d in wanted]
    unknown = len(wanted - set(given))
    note = f"dropped {unknown} unknown reference(s)" if unknown else None
    if not used and given:
        used = [given[0]]
        note = "; ".join(n for n in (note, "no valid reference: cited the top passage") if n)
    return used, note


async def grounded_answer(chat: ChatModel, *, utterance: str, hits: Sequence[Hit], context: str = "",
                          ptkb: Sequence[str] = (), max_words: int = MAX_WORDS, suggestion: str | None = None,
                          drafts: Sequence[str] = (), query: str | None = None, stage: str = "generate",
                          passage_chars: int = PASSAGE_CHARS) -> Generated:
    """A reply grounded in ``hits`` with validated references (see the module notes)."""
    passages = "\n".join(format_passage(h, passage_chars) for h in hits) or "(no passages were found)"
    extra = [("Search query used", query if query and query != utterance else ""),
             ("Plan for the reply", suggestion or ""),
             ("Draft replies from other assistants (unchecked: keep only what the passages support)",
              "\n".join(f"Draft {i}: {d}" for i, d in enumerate(drafts, 1))),
             ("Passages", passages)]
    messages = [{"role": "system", "content": _ANSWER_SYSTEM.format(max_words=max_words)},
                {"role": "user", "content": prompt_sections(utterance, context, ptkb, extra)}]
    answer, st = await chat.structured(messages, GroundedAnswer, stage=stage,
                                       max_tokens=max(256, int(max_words * 2.5)))
    used, note = check_references(answer.references, hits)
    response = answer.response.strip()
    if len(response.split()) > max_words:
        response = clip_words(response, max_words)
        note = "; ".join(n for n in (note, f"response cut to {max_words} words") if n)
    return Generated(response, used, stage_note(st, note) if note else st)


async def suggest_elements(chat: ChatModel, query: str, context: str = "", *, max_words: int = 300,
                           stage: str = "suggest") -> tuple[str, Stage]:
    """RtG stage one: the elements a good answer to ``query`` needs (no passages yet)."""
    messages = [{"role": "system", "content": _SUGGEST_SYSTEM.format(max_words=max_words)},
                {"role": "user", "content": prompt_sections(query, context)}]
    result = await chat.chat(messages, stage=stage, max_tokens=int(max_words * 1.6))
    return clip_words(result.text, max_words), result.stage


async def draft_answer(chat: ChatModel, utterance: str, context: str, ptkb: Sequence[str], *, max_words: int = 200,
                       stage: str = "draft") -> tuple[str, Stage]:
    """GtR's initial answer: no retrieval, only the conversation and the user's facts."""
    messages = [{"role": "system", "content": _DRAFT_SYSTEM.format(max_words=max_words)},
                {"role": "user", "content": prompt_sections(utterance, context, ptkb)}]
    result = await chat.chat(messages, stage=stage, max_tokens=int(max_words * 1.6))
    return clip_words(result.text, max_words), result.stage
