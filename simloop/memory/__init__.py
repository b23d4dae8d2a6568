"""Context strategies (DESIGN §6): how much of the dialogue an assistant puts in its prompts.

``full`` and ``window`` keep turns verbatim, ``summary`` keeps an evolving summary (an LLM,
or the offline extractive stand-in), ``adaptive`` is ACMS.  Build one by name with
``make_memory``; the contract is in ``base.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .adaptive import AdaptiveMemory, history_share
    from .base import BuiltContext, ContextPart, MemoryDeps, MemoryStrategy, render_turns
    from .full import FullHistory
    from .offline import OfflineSummariser
    from .registry import STRATEGIES, available_strategies, make_memory
    from .summary import Summariser, SummaryMemory, SummaryUpdate
    from .window import WindowMemory
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "adaptive": ("AdaptiveMemory", "history_share",),
        "base": ("BuiltContext", "ContextPart", "MemoryDeps", "MemoryStrategy", "render_turns",),
        "full": ("FullHistory",),
        "offline": ("OfflineSummariser",),
        "registry": ("STRATEGIES", "available_strategies", "make_memory",),
        "summary": ("Summariser", "SummaryMemory", "SummaryUpdate",),
        "window": ("WindowMemory",),
    })

__all__ = [
    "AdaptiveMemory", "BuiltContext", "ContextPart", "FullHistory", "MemoryDeps", "MemoryStrategy",
    "OfflineSummariser", "STRATEGIES", "Summariser", "SummaryMemory", "SummaryUpdate", "WindowMemory",
    "available_strategies", "history_share", "make_memory", "render_turns",
]
