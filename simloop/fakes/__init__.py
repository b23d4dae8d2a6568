"""The fakes subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .adversaries import clarifying_question, restate
    from .chat import CpuMeter, ScriptedChat
    from .falsify import NegationStyle, change_numbers, negate, swap_entities
    from .mockcli import add_arguments, main_from_args
    from .mockllm import MockLLM
    from .seams import MemoryRetriever
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "adversaries": ("clarifying_question", "restate",),
        "chat": ("CpuMeter", "ScriptedChat",),
        "mockcli": ("add_arguments", "main_from_args",),
        "mockllm": ("MockLLM",),
        "seams": ("MemoryRetriever",),
        "falsify": ("negate", "swap_entities", "change_numbers", "NegationStyle",),
    })

__all__ = [
    "CpuMeter", "MemoryRetriever", "MockLLM", "NegationStyle", "ScriptedChat", "add_arguments", "change_numbers",
    "clarifying_question", "main_from_args", "negate", "restate", "swap_entities",
]
