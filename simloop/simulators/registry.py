"""Voices and graders by name: the parts a rubric simulator is composed of (DESIGN §5).

Names map to ``module:attr`` and are imported on first use, as plugins are: an offline
run never imports the LLM parts, and ``llm.py`` (whose simulator builds on the offline
one) is never imported back by ``offline.py``, so the two modules form no cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError

if TYPE_CHECKING:  # the parts themselves load on first use (see above)
    from ..run import Context
    from .graders import Grader
    from .voices import Voice

__all__ = ["VOICES", "GRADERS", "make_voice", "make_grader"]

VOICES = {"template": "simloop.simulators.voices:TemplateVoice", "llm": "simloop.simulators.llm:LLMVoice"}
GRADERS = {"embedding": "simloop.simulators.graders:EmbeddingGrader", "llm": "simloop.simulators.llm:LLMGrader"}


def _load(kind: str, table: dict[str, str], name: str) -> Any:
    if name not in table:
        raise BadInputError(f"unknown {kind} {name!r}; choose one of {', '.join(table)}")
    module, _, attr = table[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def make_voice(name: str, ctx: Context, *, reveal_threshold: float = 0.35, candidates: int = 1) -> Voice:
    """A voice by name; each takes the options that apply to it."""
    cls = _load("voice", VOICES, name)
    options = {"reveal_threshold": reveal_threshold} if name == "template" else {"candidates": candidates}
    return cls(ctx, **options)


def make_grader(name: str, ctx: Context, *, max_words: int = 400) -> Grader:
    """A grader by name; ``max_words`` (the longest answer that can pass) applies to the
    embedding grader, the LLM grader reads the answer itself."""
    cls = _load("grader", GRADERS, name)
    return cls(ctx, max_words=max_words) if name == "embedding" else cls(ctx)
