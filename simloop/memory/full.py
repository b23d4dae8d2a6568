"""The ``full`` strategy: every finished turn verbatim."""

from __future__ import annotations

from ..schema import DialogueState
from .base import BuiltContext, MemoryDeps, built, render_turns, turn_parts

__all__ = ["FullHistory"]


class FullHistory:
    """Every finished turn verbatim (the GenAIus "full" run)."""

    name = "full"

    async def build(self, state: DialogueState, deps: MemoryDeps, reserve_tokens: int = 0) -> BuiltContext:
        return built(self.name, render_turns(state.turns), turn_parts(state.turns), turns=len(state.turns))
