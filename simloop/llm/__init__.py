"""The llm subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .client import ChatModel, ChatResult
    from .config import LLMConfig, LLMRole, LLMRoleOverride, role_setting
    from .limits import Permit
    from .meter import metered
    from .pool import LLMPool
    from .preflight import check_endpoints, check_judge_llm
    from .transport import transport_name
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "client": ("ChatModel", "ChatResult",),
        "config": ("LLMConfig", "LLMRole", "LLMRoleOverride", "role_setting",),
        "limits": ("Permit",),
        "meter": ("metered",),
        "pool": ("LLMPool",),
        "preflight": ("check_endpoints", "check_judge_llm",),
        "transport": ("transport_name",),
    })

__all__ = [
    "ChatModel", "ChatResult", "LLMConfig", "LLMPool", "LLMRole", "LLMRoleOverride", "Permit",
    "check_endpoints", "check_judge_llm", "metered", "role_setting", "transport_name",
]
