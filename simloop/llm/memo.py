"""A small bounded memo for the LLM layer's hot path (parsed URLs, prepared URLs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["memo"]

# A run asks for a handful of URLs; one with ever-changing queries must not grow the cache.
LIMIT = 256


def memo(cache: dict[K, V], key: K, make: Callable[[K], V]) -> V:
    """``cache[key]``, made by ``make(key)`` on a miss; the cache is emptied past ``LIMIT``."""
    hit = cache.get(key)
    if hit is None:
        if len(cache) > LIMIT:
            cache.clear()
        hit = cache[key] = make(key)
    return hit
