"""The ``summary`` strategy: the GenAIus evolving summary, written by a summariser.

The summariser is the ``assistant.summary`` model (one LLM call per turn) or anything
that implements ``Summariser`` - the offline stand-in (``memory/offline.py``) does, and
gets the update as structured values (``SummaryUpdate``), not as a prompt to parse back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import LLMError
from ..schema import DialogueState, Stage, Turn
from ..text import TOKENS_PER_WORD, clip_words
from .base import BuiltContext, ContextPart, MemoryDeps, built, render_turns, turn_parts

if TYPE_CHECKING:
    from ..llm import ChatModel

__all__ = ["SummaryMemory", "SummaryUpdate", "Summariser", "summary_messages"]

_SUMMARY_SYSTEM = (
    "You maintain the running memory of a conversation between a user and an assistant, so that "
    "later turns can be handled without the full transcript. Update the memory with the newest "
    "exchange. Weigh the newest exchange and the user's current request most; keep earlier facts, "
    "needs, preferences and decisions that still matter; leave out pleasantries. State only what "
    "was actually said - no guesses. Reply with the updated memory only, as one plain paragraph of "
    "at most {max_words} words, without headings, bullet points or comments."
)
_SUMMARY_USER = (
    "Memory so far:\n{summary}\n\n"
    "Previous exchange:\n{exchange}\n\n"
    "The user now says:\n{current}"
)
_EMPTY_SUMMARY = "(empty - the conversation has just started)"
_SUMMARY_KEY = "memory.summary"


@dataclass(frozen=True)
class SummaryUpdate:
    """One update request: the memory so far ("" at the start), the finished turns not yet
    folded in, what the user says now, and the word budget of the new memory."""

    summary: str
    turns: Sequence[Turn]
    current: str
    max_words: int


@runtime_checkable
class Summariser(Protocol):
    """Writes the new memory from an update (clipped to ``max_words`` by the caller); its
    stage records what it cost."""

    async def summarise(self, update: SummaryUpdate, *, stage: str) -> tuple[str, Stage]: ...


def summary_messages(update: SummaryUpdate) -> list[dict[str, str]]:
    """The chat messages that ask a model for ``update``."""
    user = _SUMMARY_USER.format(summary=update.summary or _EMPTY_SUMMARY, exchange=render_turns(update.turns),
                                current=update.current)
    return [{"role": "system", "content": _SUMMARY_SYSTEM.format(max_words=update.max_words)},
            {"role": "user", "content": user}]


def _clean_summary(text: str, max_words: int) -> str:
    text = text.strip().strip('"').strip()
    for label in ("updated memory:", "memory:", "summary:", "updated summary:"):
        if text.lower().startswith(label):
            text = text[len(label):].strip()
    return clip_words(" ".join(text.split()), max_words)


class _ChatSummariser:
    """A chat model as a Summariser: the prompt above; the caller cleans and clips the reply."""

    def __init__(self, chat: ChatModel, temperature: float | None):
        self.chat, self.temperature = chat, temperature

    async def summarise(self, update: SummaryUpdate, *, stage: str) -> tuple[str, Stage]:
        # Room for the budget plus half again: a model that overshoots is clipped, not cut mid-word.
        max_tokens = math.ceil(update.max_words * TOKENS_PER_WORD * 1.5)
        result = await self.chat.chat(summary_messages(update), stage=stage, temperature=self.temperature,
                                      max_tokens=max_tokens)
        return result.text, result.stage


class SummaryMemory:
    """The GenAIus evolving summary: previous summary + previous user turn + previous
    response + current utterance -> new summary, one summariser call per turn (role
    ``assistant.summary``).  The first turn has nothing to summarise yet and makes no call.

    Turns not yet folded in (normally just the previous one) are all passed on, so a
    failed update is retried with the next turn instead of losing an exchange.  When the
    call fails, the context is the old summary plus those turns verbatim and the stage
    carries the error: a memory hiccup should not end the dialogue.
    """

    name = "summary"

    def __init__(self, role: str = "assistant.summary", max_words: int = 150, temperature: float | None = 0.2):
        if max_words < 10:
            raise ValueError("summary max_words must be >= 10")
        self.role, self.max_words, self.temperature = role, max_words, temperature

    def summariser(self, deps: MemoryDeps) -> Summariser:
        model = deps.chat(self.role)
        return model if isinstance(model, Summariser) else _ChatSummariser(model, self.temperature)

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        mem = state.assistant_memory.setdefault(_SUMMARY_KEY, {"summary": "", "through": 0, "turn": 0, "text": ""})
        turn = len(state.turns) + 1
        if mem["turn"] == turn:  # built already this turn: same context, no second call
            return built(self.name, mem["text"], _parts(mem["summary"], state.turns[mem["through"]:]),
                         summarised_turns=mem["through"])
        unseen = state.turns[mem["through"]:]
        stages: list[Stage] = []
        if unseen:
            current = state.user.utterance if state.user is not None else ""
            update = SummaryUpdate(mem["summary"], unseen, current, self.max_words)
            try:
                summary, stage = await self.summariser(deps).summarise(update, stage="summary")
            except LLMError as exc:
                stages.append(exc.stage or Stage(name="summary", error=str(exc)[:300]))
                text = "\n".join(t for t in (mem["summary"], render_turns(unseen)) if t)
                mem.update(turn=turn, text=text)
                return built(self.name, text, _parts(mem["summary"], unseen), stages,
                             summarised_turns=mem["through"])
            stages.append(stage)
            mem.update(summary=_clean_summary(summary, self.max_words), through=len(state.turns))
        mem.update(turn=turn, text=mem["summary"])
        return built(self.name, mem["summary"], _parts(mem["summary"], ()), stages, summarised_turns=mem["through"])


def _parts(summary: str, unseen: Sequence[Turn]) -> list[ContextPart]:
    return [*([ContextPart(None, summary)] if summary else []), *turn_parts(unseen)]
