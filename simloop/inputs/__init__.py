"""The inputs subpackage."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .from_ikat import personas_from_ikat, write_personas
    from .ikat import REFERENCE_PASSAGE_WORDS, load_ikat_topics, load_passage_texts, passage_evidence, turn_reference
    from .personas import load_persona_file, load_personas
    from .references import Pick, pick_references, set_references
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "from_ikat": ("personas_from_ikat", "write_personas",),
        "ikat": (
            "REFERENCE_PASSAGE_WORDS", "load_ikat_topics", "load_passage_texts", "passage_evidence", "turn_reference",
        ),
        "personas": ("load_persona_file", "load_personas",),
        "references": ("pick_references", "set_references", "Pick",),
    })

__all__ = [
    "Pick", "REFERENCE_PASSAGE_WORDS", "load_ikat_topics", "load_passage_texts", "load_persona_file", "load_personas",
    "passage_evidence", "personas_from_ikat", "pick_references", "set_references", "turn_reference", "write_personas",
]
