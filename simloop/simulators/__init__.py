"""The simulators subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .claims import entities, name_terms, name_words
    from .cues import is_asking
    from .evidence import Thresholds, check_evidence, focus_share, pieces_of, prepare
    from .graders import EmbeddingGrader, Grader
    from .llm import LLMGrader, LLMSimulator, LLMVoice, invalid_reason
    from .offline import OfflineSimulator
    from .policy import Action, SimContext
    from .replay import ReplaySimulator
    from .simapi import API_SCHEMES, DEFAULT_TOKEN_ENV, SimApiSimulator
    from .voices import TemplateVoice
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "graders": ("EmbeddingGrader", "Grader",),
        "llm": ("LLMGrader", "LLMSimulator", "LLMVoice", "invalid_reason",),
        "offline": ("OfflineSimulator",),
        "policy": ("Action", "SimContext",),
        "replay": ("ReplaySimulator",),
        "simapi": ("API_SCHEMES", "DEFAULT_TOKEN_ENV", "SimApiSimulator",),
        "voices": ("TemplateVoice",),
        "evidence": ("Thresholds", "check_evidence", "pieces_of", "prepare", "focus_share",),
        "claims": ("entities", "name_terms", "name_words",),
        "cues": ("is_asking",),
    })

__all__ = [
    "API_SCHEMES", "Action", "DEFAULT_TOKEN_ENV", "EmbeddingGrader", "Grader", "LLMGrader", "LLMSimulator",
    "LLMVoice", "OfflineSimulator", "ReplaySimulator", "SimApiSimulator", "SimContext", "TemplateVoice", "Thresholds",
    "check_evidence", "entities", "focus_share", "is_asking", "name_terms", "name_words", "pieces_of", "prepare",
    "invalid_reason",
]
