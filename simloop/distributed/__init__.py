"""The distributed subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .driver import run_ray
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "driver": ("run_ray",),
    })

__all__ = [
    "run_ray",
]
