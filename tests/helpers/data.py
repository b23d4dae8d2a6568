"""The checkout, the iKAT data, and small inputs written by hand (personas, scenarios, corpora)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from simloop.schema import Behaviour, Persona, RubricQuestion, Scenario, Topic

ROOT = Path(__file__).resolve().parents[2]


def _ikat_dir() -> Path:
    """``$SIMLOOP_IKAT_DATA`` (as scripts/bench_common.py), else ``shared/data/ikat`` beside
    the checkout or further up (a git worktree sits one level deeper).  A fresh clone elsewhere has none: ``ikat_file``
    then skips the tests that need it instead of failing them."""
    if os.environ.get("SIMLOOP_IKAT_DATA"):
        return Path(os.environ["SIMLOOP_IKAT_DATA"])
    found = (p / "shared" / "data" / "ikat" for p in ROOT.parents)
    return next((c for c in found if c.is_dir()), ROOT.parent / "shared" / "data" / "ikat")


IKAT = _ikat_dir()


def ikat_file(*parts: str) -> Path:
    """A file under the iKAT data folder, or a skip with a one-line reason when it is absent."""
    path = IKAT.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"iKAT data not found: {path} (set SIMLOOP_IKAT_DATA to the ikat folder)")
    return path


def write_personas(folder: Path, **tomls: str) -> Path:
    """A personas folder holding ``<id>.toml`` for each keyword (the loader wants the file
    stem to equal the persona id)."""
    folder.mkdir(parents=True, exist_ok=True)
    for pid, text in tomls.items():
        (folder / f"{pid}.toml").write_text(text)
    return folder


def make_persona(pid: str = "p1", topics: int = 2, questions: int = 3) -> Persona:
    return Persona(
        id=pid,
        name=pid.upper(),
        ptkb=["I am vegetarian.", "I live in Porto.", "I play the cello."],
        behaviour=Behaviour(),
        topics=[
            Topic(id=f"{pid}-t{i}", title=f"topic {i}",
                  rubric=[RubricQuestion(id=f"q{j}", question=f"question {j} of topic {i}?") for j in range(questions)])
            for i in range(topics)
        ],
    )


def make_scenario(pid: str = "p1", dialogue_id: str = "d1", seed: int = 1) -> Scenario:
    p = make_persona(pid)
    return Scenario(dialogue_id=dialogue_id, persona=p, topic=p.topics[0], behaviour=p.behaviour, seed=seed)


# A corpus of six short documents in the JSONL form `simloop index build` reads.
DOCS = [
    {"id": "cello", "title": "Cello", "contents": "The cello is a bowed string instrument of the violin family."},
    {"id": "porto", "title": "Porto", "contents": "Porto is a coastal city in northwest Portugal known for port wine."},
    {"id": "tofu", "title": "Tofu", "contents": "Tofu is made from soy milk and is popular with vegetarians."},
    {"id": "shark", "title": "Shark", "contents": "Sharks are cartilaginous fish with a streamlined body."},
    {"id": "glycogen", "contents": "Glycogen is the main storage form of glucose in the liver and muscles."},
    {"id": "marathon", "title": "Marathon", "contents": "The marathon is a road race of 42.195 kilometres."},
]


def write_jsonl(path: Path, docs: list[dict], extra_lines: Sequence[str] = ()) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs) + "".join(extra_lines), encoding="utf-8")
    return path
