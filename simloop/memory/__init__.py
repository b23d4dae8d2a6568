"""Context strategies (DESIGN §6): how much of the dialogue an assistant puts in its prompts.

``full`` and ``window`` keep turns verbatim, ``summary`` keeps an evolving summary (an LLM,
or the offline extractive stand-in), ``adaptive`` is ACMS.  Build one by name with
``make_memory``; the contract is in ``base.py``.
"""

from __future__ import annotations

from .adaptive import AdaptiveMemory, history_share
from .base import BuiltContext, ContextPart, MemoryDeps, MemoryStrategy, render_turns
from .full import FullHistory
from .registry import STRATEGIES, available_strategies, make_memory
from .summary import Summariser, SummaryMemory, SummaryUpdate
from .window import WindowMemory

__all__ = [
    "MemoryStrategy", "MemoryDeps", "BuiltContext", "ContextPart", "render_turns",
    "FullHistory", "WindowMemory", "SummaryMemory", "Summariser", "SummaryUpdate", "AdaptiveMemory",
    "history_share", "STRATEGIES", "make_memory", "available_strategies",
]
