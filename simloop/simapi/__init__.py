"""The simapi subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .app import ServeOptions, create_app
    from .client import SimApiClient, StateFile
    from .protocol import UserUtterance, reply_payload
    from .runs import RunService, ServeLimits
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "app": ("ServeOptions", "create_app",),
        "client": ("SimApiClient", "StateFile",),
        "protocol": ("UserUtterance", "reply_payload",),
        "runs": ("RunService", "ServeLimits",),
    })

__all__ = [
    "RunService", "ServeLimits", "ServeOptions", "SimApiClient", "StateFile", "UserUtterance", "create_app",
    "reply_payload",
]
