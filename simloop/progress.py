"""The counting seam between a long job and whoever shows its progress.

An index build's embedding or an evaluation's judge calls take minutes; the library code
doing them reports here and knows nothing of terminals.  ``phase(label, total)`` starts a
step (``total`` None: its length is unknown), ``advance(n)`` counts finished units.  The
CLI hands in its rich bar (``cli/console.py``, ``CountingBar``); everyone else gets
``NO_PROGRESS``, which ignores both.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["ProgressSink", "NoProgress", "NO_PROGRESS"]


class ProgressSink(Protocol):
    def phase(self, label: str, total: int | None = None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class NoProgress:
    """Reports to nobody (the default of every library call)."""

    def phase(self, label: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass


NO_PROGRESS = NoProgress()
