"""What the memory stress test's tests share: a tiny corpus and the configs `simloop memory` builds."""

from __future__ import annotations

from pathlib import Path

from simloop.config import RunConfig, load_config
from tests.helpers.data import ROOT

DOCS = [
    ("Allergy", "Allergy\nAn allergy is an immune response to a harmless substance. Peanut allergy is common."),
    ("Snack", "Snack\nA snack is a small portion of food eaten between meals. Fruit and nuts are snacks."),
    ("Marathon", "Marathon\nThe marathon is a long-distance road race of 42.195 kilometres."),
]


def memory_config(**kw) -> dict:
    """The memory test's own settings: one fact at distances 1 and 3, and ``kw``."""
    return {"facts": ["allergy-peanut"], "distances": [1, 3], **kw}


def base_config(tmp_path: Path, **llm) -> RunConfig:
    """The run config every strategy starts from (what `simloop memory` builds from its flags)."""
    return load_config(None, {"scenarios": {"personas_dir": ROOT / "personas", "persona_ids": ["maya"]},
                              "out": tmp_path, "run_id": "m", "concurrency": 2, "llm": {"default": llm}}, environ={})
