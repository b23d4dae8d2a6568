"""What every context strategy shares (DESIGN §6): the protocol, the built context, rendering.

CONTRACT:
    strategy = make_memory("full" | "summary" | "window" | "adaptive", **params)
    built = await strategy.build(state, deps, reserve_tokens=0)
    built.text, built.info, built.stages, built.parts

``text`` is the dialogue context to place in a prompt (the current utterance is not part
of it: prompts carry that separately), ``info`` is ``ContextInfo(strategy, tokens, ...)``
with the tokens of ``text`` and strategy details as extra fields, ``stages`` are the LLM
or compute stages the strategy ran this turn, and ``parts`` is the same context as
structured values - who said each piece - so that a part never has to parse ``text``
back (DESIGN §10.10).  ``deps`` is anything with ``chat(role)`` and ``async embedder()``
- the plugin ``Context`` is one.  ``reserve_tokens`` is what the caller already spends
elsewhere (retrieved passages); only budgeted strategies (``adaptive``) use it.

Strategies keep per-dialogue state in ``state.assistant_memory`` only: one instance
serves every dialogue of a run.  Building twice in the same turn returns the same
context without a second LLM call.  Tokens are ``simloop.text.count_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

from ..schema import ContextInfo, DialogueState, Stage, Turn
from ..text import count_tokens

if TYPE_CHECKING:
    from ..llm import ChatModel
    from ..search import Embedder

__all__ = ["ContextPart", "BuiltContext", "MemoryDeps", "MemoryStrategy", "render_turns", "turn_parts", "built"]


class ContextPart(NamedTuple):
    """One piece of a built context: who said it (None: the strategy's own words, such as
    a summary) and the text."""

    role: Literal["user", "assistant"] | None
    text: str


class BuiltContext(NamedTuple):
    text: str
    info: ContextInfo
    stages: list[Stage]
    parts: tuple[ContextPart, ...] = ()


class MemoryDeps(Protocol):
    def chat(self, role: str) -> ChatModel: ...

    async def embedder(self) -> Embedder: ...


@runtime_checkable
class MemoryStrategy(Protocol):
    """How much of the dialogue goes into the assistant's prompts (see the module notes)."""

    name: str

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext: ...


def render_turns(turns: Sequence[Turn], first: int | None = None) -> str:
    """Finished turns as prompt text, one ``User (turn n): ...`` / ``Assistant (turn n): ...``
    line per message."""
    lines: list[str] = []
    for offset, turn in enumerate(turns):
        n = turn.index if first is None else first + offset
        lines.append(f"User (turn {n}): {turn.user.utterance}")
        lines.append(f"Assistant (turn {n}): {turn.assistant.response}")
    return "\n".join(lines)


def turn_parts(turns: Sequence[Turn]) -> tuple[ContextPart, ...]:
    """The structured twin of ``render_turns``."""
    return tuple(p for t in turns for p in (ContextPart("user", t.user.utterance),
                                            ContextPart("assistant", t.assistant.response)))


def built(name: str, text: str, parts: Sequence[ContextPart] = (), stages: list[Stage] | None = None,
          **extra: Any) -> BuiltContext:
    """A BuiltContext whose ``info.tokens`` counts ``text``."""
    info = ContextInfo(strategy=name, tokens=count_tokens(text), **extra)
    return BuiltContext(text, info, stages or [], tuple(parts))
