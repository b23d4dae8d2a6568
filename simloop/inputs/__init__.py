"""The inputs subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .from_ikat import personas_from_ikat, write_personas
    from .ikat import load_ikat_topics
    from .personas import load_personas
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "from_ikat": ("personas_from_ikat", "write_personas",),
        "ikat": ("load_ikat_topics",),
        "personas": ("load_personas",),
    })

__all__ = [
    "load_ikat_topics", "load_personas", "personas_from_ikat", "write_personas",
]
