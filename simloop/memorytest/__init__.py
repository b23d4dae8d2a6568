"""The memorytest subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .formats import MemoryResults
    from .run import MemoryTest, parse_config
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "formats": ("MemoryResults",),
        "run": ("MemoryTest", "parse_config",),
    })

__all__ = [
    "MemoryResults", "MemoryTest", "parse_config",
]
