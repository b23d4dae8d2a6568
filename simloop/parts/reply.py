"""The last step of every pipeline: an ``AssistantReply`` from what the stages produced."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..schema import AssistantReply, ContextInfo, DialogueState, PtkbUse, Stage
from ..search import Hit
from .generate_llm import MAX_WORDS, grounded_answer
from .retrieve import SNIPPET_CHARS, to_passages

if TYPE_CHECKING:
    from ..llm import ChatModel

__all__ = ["build_reply", "grounded_reply", "current_utterance"]


def current_utterance(state: DialogueState) -> str:
    """The utterance to answer now ("" outside a turn, which the engine never does)."""
    return state.user.utterance if state.user is not None else ""


def build_reply(*, response: str, hits: Sequence[Hit], used: Sequence[str], ptkb: Sequence[PtkbUse],
                context: ContextInfo, stages: Sequence[Stage], query: str | None = None,
                snippet_chars: int = SNIPPET_CHARS) -> AssistantReply:
    """``passages`` are the ranked ``hits`` with ``used`` = cited in the response."""
    return AssistantReply(
        response=response,
        rewritten_query=query,
        passages=to_passages(hits, used, snippet_chars),
        ptkb_provenance=list(ptkb),
        context=context,
        stages=list(stages),
    )


async def grounded_reply(chat: ChatModel, *, utterance: str, hits: Sequence[Hit],
                         shown: int | Sequence[Hit] | None = None,
                         context: str, info: ContextInfo, ptkb: Sequence[PtkbUse], stages: Sequence[Stage],
                         query: str | None = None, max_words: int = MAX_WORDS, **generate: Any) -> AssistantReply:
    """The grounded LLM answer over the passages ``shown`` (a count of top ``hits``, a list,
    or all ``hits``) with the selected PTKB statements, wrapped up as the turn's reply.
    ``generate`` passes on to ``grounded_answer`` (``suggestion``, ``drafts`` ...)."""
    passages = hits[:shown] if isinstance(shown, int) else (hits if shown is None else shown)
    answer = await grounded_answer(chat, utterance=utterance, hits=passages, context=context,
                                   ptkb=[p.statement for p in ptkb if p.used], max_words=max_words, query=query,
                                   **generate)
    return build_reply(response=answer.response, hits=hits, used=answer.used, ptkb=ptkb, context=info,
                       stages=[*stages, answer.stage], query=query)
