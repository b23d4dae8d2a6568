"""Context strategies (DESIGN §6): how much of the dialogue an assistant puts in its prompts.

CONTRACT:
    strategy = make_memory("full" | "summary" | "window" | "adaptive", **params)
    text, info, stages = await strategy.build(state, deps, reserve_tokens=0)

``text`` is the dialogue context to place in a prompt (the current utterance is not part
of it: prompts carry that separately), ``info`` is ``ContextInfo(strategy, tokens, ...)``
with the tokens of ``text`` and strategy details as extra fields, and ``stages`` are the
LLM or compute stages the strategy ran this turn.  ``deps`` is anything with
``chat(role)`` and ``async embedder()`` - the plugin ``Context`` is one.
``reserve_tokens`` is what the caller already spends elsewhere (retrieved passages);
only budgeted strategies (``adaptive``) use it.

Strategies keep per-dialogue state in ``state.assistant_memory`` only: one instance
serves every dialogue of a run.  Building twice in the same turn returns the same
context without a second LLM call.

Tokens are counted one way everywhere: words x 1.3, rounded up.  tiktoken is not
installed here and its encodings would need the network; this estimate is what the mock
LLM reports as usage too, so context sizes and billed prompt sizes agree in tests.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol, Sequence, runtime_checkable

from ..errors import LLMError
from ..schema import ContextInfo, DialogueState, Stage, Turn

__all__ = [
    "TOKENS_PER_WORD", "count_tokens", "clip_words", "clip_to_tokens", "render_turns",
    "BuiltContext", "MemoryDeps", "MemoryStrategy",
    "FullHistory", "WindowMemory", "SummaryMemory", "STRATEGIES", "make_memory", "available_strategies",
]

TOKENS_PER_WORD = 1.3
NO_HISTORY = "(no earlier turns)"


def count_tokens(text: str) -> int:
    """Estimated tokens of ``text``: words x 1.3, rounded up (see the module notes)."""
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


def clip_words(text: str, max_words: int) -> str:
    """At most ``max_words`` words (whitespace normalised only when clipping)."""
    parts = text.split()
    return text.strip() if len(parts) <= max_words else " ".join(parts[:max_words])


def clip_to_tokens(text: str, max_tokens: int) -> str:
    """The longest word prefix whose ``count_tokens`` is at most ``max_tokens``."""
    return clip_words(text, max(0, math.floor(max_tokens / TOKENS_PER_WORD)))


def render_turns(turns: Sequence[Turn], first: int | None = None) -> str:
    """Finished turns as prompt text, one ``User (turn n): ...`` / ``Assistant (turn n): ...``
    line per message (bm25_extractive parses these prefixes back out of a context)."""
    lines: list[str] = []
    for offset, turn in enumerate(turns):
        n = turn.index if first is None else first + offset
        lines.append(f"User (turn {n}): {turn.user.utterance}")
        lines.append(f"Assistant (turn {n}): {turn.assistant.response}")
    return "\n".join(lines)


class BuiltContext(NamedTuple):
    text: str
    info: ContextInfo
    stages: list[Stage]


class MemoryDeps(Protocol):
    def chat(self, role: str) -> Any: ...

    async def embedder(self) -> Any: ...


@runtime_checkable
class MemoryStrategy(Protocol):
    name: str

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext: ...


def _built(name: str, text: str, stages: list[Stage] | None = None, **extra: Any) -> BuiltContext:
    return BuiltContext(text, ContextInfo(strategy=name, tokens=count_tokens(text), **extra), stages or [])


# ----------------------------------------------------------------------------- full, window


class FullHistory:
    """Every finished turn verbatim (the GenAIus "full" run)."""

    name = "full"

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        return _built(self.name, render_turns(state.turns), turns=len(state.turns))


class WindowMemory:
    """The last ``turns`` finished turns verbatim; older ones are dropped."""

    name = "window"

    def __init__(self, turns: int = 3):
        if turns < 0:
            raise ValueError("window turns must be >= 0")
        self.turns = turns

    def window(self, n_finished: int) -> range:
        """0-based indices of the finished turns kept when ``n_finished`` are done."""
        return range(max(0, n_finished - self.turns), n_finished)

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        kept = [state.turns[i] for i in self.window(len(state.turns))]
        return _built(self.name, render_turns(kept), turns=len(kept))


# ----------------------------------------------------------------------------- summary

_SUMMARY_SYSTEM = (
    "You maintain the running memory of a conversation between a user and an assistant, so that "
    "later turns can be handled without the full transcript. Update the memory with the newest "
    "exchange. Weigh the newest exchange and the user's current request most; keep earlier facts, "
    "needs, preferences and decisions that still matter; leave out pleasantries. State only what "
    "was actually said - no guesses. Reply with the updated memory only, as one plain paragraph of "
    "at most {max_words} words, without headings, bullet points or comments."
)
# The section headings, the "(empty" marker and the max_tokens formula below are read back
# by the offline stand-in summariser (memoryoffline.py): change them together.
_SUMMARY_USER = (
    "Memory so far:\n{summary}\n\n"
    "Previous exchange:\n{exchange}\n\n"
    "The user now says:\n{current}"
)
_EMPTY_SUMMARY = "(empty - the conversation has just started)"
_SUMMARY_KEY = "memory.summary"


def _clean_summary(text: str, max_words: int) -> str:
    text = text.strip().strip('"').strip()
    for label in ("updated memory:", "memory:", "summary:", "updated summary:"):
        if text.lower().startswith(label):
            text = text[len(label):].strip()
    return clip_words(" ".join(text.split()), max_words)


class SummaryMemory:
    """The GenAIus evolving summary: previous summary + previous user turn + previous
    response + current utterance -> new summary, one LLM call per turn (role
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

    def messages(self, summary: str, unseen: Sequence[Turn], current: str) -> list[dict[str, str]]:
        exchange = render_turns(unseen)
        user = _SUMMARY_USER.format(summary=summary or _EMPTY_SUMMARY, exchange=exchange, current=current)
        return [{"role": "system", "content": _SUMMARY_SYSTEM.format(max_words=self.max_words)},
                {"role": "user", "content": user}]

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        mem = state.assistant_memory.setdefault(_SUMMARY_KEY, {"summary": "", "through": 0, "turn": 0, "text": ""})
        turn = len(state.turns) + 1
        if mem["turn"] == turn:  # built already this turn: same context, no second call
            return _built(self.name, mem["text"], summarised_turns=mem["through"])
        unseen = state.turns[mem["through"]:]
        stages: list[Stage] = []
        if unseen:
            current = state.user.utterance if state.user is not None else ""
            chat = deps.chat(self.role)
            max_tokens = math.ceil(self.max_words * TOKENS_PER_WORD * 1.5)
            try:
                result = await chat.chat(self.messages(mem["summary"], unseen, current), stage="summary",
                                         temperature=self.temperature, max_tokens=max_tokens)
            except LLMError as exc:
                stages.append(getattr(exc, "stage", None) or Stage(name="summary", error=str(exc)[:300]))
                text = "\n".join(t for t in (mem["summary"], render_turns(unseen)) if t)
                mem.update(turn=turn, text=text)
                return _built(self.name, text, stages, summarised_turns=mem["through"])
            stages.append(result.stage)
            mem.update(summary=_clean_summary(result.text, self.max_words), through=len(state.turns))
        mem.update(turn=turn, text=mem["summary"])
        return _built(self.name, mem["summary"], stages, summarised_turns=mem["through"])


# ----------------------------------------------------------------------------- registry


def _adaptive(**params: Any) -> MemoryStrategy:
    from .adaptive import AdaptiveMemory  # it builds on this module's helpers

    return AdaptiveMemory(**params)


STRATEGIES: dict[str, Any] = {
    "full": FullHistory,
    "summary": SummaryMemory,
    "window": WindowMemory,
    "adaptive": _adaptive,
}


def available_strategies() -> list[str]:
    return list(STRATEGIES)


def make_memory(name: str, **params: Any) -> MemoryStrategy:
    """A strategy by name; unknown names and bad params raise ``ValueError`` (plugin
    loading turns that into one clear ``BadInputError``)."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown memory strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"bad params for memory strategy {name!r}: {exc}") from None
