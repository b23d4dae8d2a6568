"""The context strategies by name (DESIGN §6): ``make_memory("adaptive", token_budget=1024)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .adaptive import AdaptiveMemory
from .base import MemoryStrategy
from .full import FullHistory
from .summary import SummaryMemory
from .window import WindowMemory

__all__ = ["STRATEGIES", "make_memory", "available_strategies"]

STRATEGIES: dict[str, Callable[..., MemoryStrategy]] = {
    "full": FullHistory,
    "summary": SummaryMemory,
    "window": WindowMemory,
    "adaptive": AdaptiveMemory,
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
