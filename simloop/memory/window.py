"""The ``window`` strategy: the last few finished turns verbatim."""

from __future__ import annotations

from ..schema import DialogueState
from .base import BuiltContext, MemoryDeps, built, render_turns, turn_parts

__all__ = ["WindowMemory"]


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
        return built(self.name, render_turns(kept), turn_parts(kept), turns=len(kept))
