"""The validity card: pydantic models, verdicts, the ``validity.json`` writer.

A card holds, per criterion, the measured value, its seeded percentile-bootstrap 95%
interval, the number of units it was measured on, the threshold with its direction, a
verdict and a one-line meaning; a summary per role (grader, voice); the simulator
configuration it measured (with its digest: where ``run`` finds it); the data files
(with their digests) and library versions.  No secret is on a card: LLM endpoints are
redacted (``run.simulator_identity``) and keys are never read.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..schema import ValiditySummary, utcnow

__all__ = ["CARD_SCHEMA", "Direction", "Criterion", "SimulatorConfig", "DataFile", "ValidityCard", "criterion",
           "summarise", "write_card", "read_card", "file_digest", "store_card"]

CARD_SCHEMA = "simloop.validity/1"
Verdict = Literal["pass", "fail", "not measured", "info"]
Direction = Literal["higher", "lower", "within"]
Group = Literal["grader", "adversaries", "voice"]


class Criterion(BaseModel):
    """One measured figure.  ``threshold`` is a bound (``direction`` higher: value ≥ it
    passes; lower: value ≤ it) or a ``[low, high]`` range (``within``); None with verdict
    ``info``: reported, not judged."""

    model_config = ConfigDict(extra="forbid")
    name: str
    group: Group
    value: float | None
    ci: tuple[float, float] | None = None  # percentile bootstrap, 95%
    n: int  # units measured (turns, dialogues)
    unit: str  # what n counts
    threshold: float | tuple[float, float] | None
    direction: Direction | None
    verdict: Verdict
    meaning: str


class SimulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    llm: dict[str, dict[str, str]] = Field(default_factory=dict)  # role -> model, base_url (redacted)
    digest: str


class DataFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    sha256: str
    bytes: int


class ValidityCard(BaseModel):
    """``validity.json``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: str = Field(CARD_SCHEMA, alias="schema")
    created_at: datetime = Field(default_factory=utcnow)
    simulator: SimulatorConfig
    sample: int | None  # items per criterion; None: every item
    seed: int
    resamples: int
    criteria: list[Criterion]
    summary: ValiditySummary
    data: list[DataFile] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    took_s: float = 0.0
    notes: list[str] = Field(default_factory=list)  # what was left out or could not be graded
    details: dict[str, Any] = Field(default_factory=dict)  # per part: per-set scores, stop reasons, real statistics


def criterion(name: str, group: Group, value: float | None, ci: tuple[float, float] | None, n: int, unit: str,
              threshold: float | tuple[float, float] | None, direction: Direction | None, meaning: str) -> Criterion:
    """A criterion with its verdict."""
    if value is None:
        verdict: Verdict = "not measured"
    elif threshold is None:
        verdict = "info"
    elif isinstance(threshold, tuple):
        verdict = "pass" if threshold[0] <= value <= threshold[1] else "fail"
    elif direction == "lower":
        verdict = "pass" if value <= threshold else "fail"
    else:
        verdict = "pass" if value >= threshold else "fail"
    return Criterion(name=name, group=group, value=value, ci=ci, n=n, unit=unit, threshold=threshold,
                     direction=direction, verdict=verdict, meaning=meaning)


def _role(criteria: list[Criterion], groups: tuple[str, ...]) -> Literal["valid", "not valid", "not measured"]:
    judged = [c for c in criteria if c.group in groups and c.verdict in ("pass", "fail", "not measured")]
    if not judged or all(c.verdict == "not measured" for c in judged):
        return "not measured"
    return "valid" if all(c.verdict == "pass" for c in judged) else "not valid"


def summarise(criteria: list[Criterion], simulator: SimulatorConfig, sample: int | None, path: str = "",
              created_at: datetime | None = None) -> ValiditySummary:
    """Per role: valid when every judged criterion passed (one that could not be measured,
    e.g. no turn of a small sample had names to swap, leaves the role not shown valid), with
    the closing line naming what failed and what to use instead."""
    grader = _role(criteria, ("grader", "adversaries"))
    voice = _role(criteria, ("voice",))
    failing = [c.name for c in criteria if c.verdict in ("fail", "not measured") and c.threshold is not None]
    parts = []
    for role, verdict, groups in (("grader", grader, ("grader", "adversaries")), ("voice", voice, ("voice",))):
        failed = [c.name for c in criteria if c.group in groups and c.verdict == "fail"]
        unmeasured = [c.name for c in criteria if c.group in groups and c.verdict == "not measured"
                      and c.threshold is not None]
        why = "; ".join(x for x in (f"failed: {', '.join(failed)}" if failed else "",
                                    f"not measured: {', '.join(unmeasured)}" if unmeasured else "") if x)
        parts.append(f"{role}: {verdict}" + (f" ({why})" if why else ""))
    line = "; ".join(parts) + "."
    if grader == "not valid":
        if simulator.params.get("grader") == "llm":
            line += (" The grader is not valid: use the offline grader (`--simulator-param grader=embedding`)"
                     " with this voice.")
        else:
            line += " The grader is not valid on the failing criteria: do not trust its grades there."
    if voice == "not valid":
        if simulator.params.get("voice") == "llm":
            line += (" The voice is not valid: use the template voice (`--simulator-param voice=template`)"
                     " with this grader.")
        else:
            line += " The voice is not valid on the failing criteria: its users do not read like real ones there."
    if sample is not None:
        line += f" Measured on a sample of {sample} per criterion."
    return ValiditySummary(digest=simulator.digest, path=path, created_at=created_at or utcnow(), grader=grader,
                           voice=voice, failing=failing, sample=sample, line=line)


def file_digest(path: Path) -> DataFile:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return DataFile(path=str(path), sha256=h.hexdigest(), bytes=path.stat().st_size)


def write_card(card: ValidityCard, path: Path) -> Path:
    """Write ``card`` to ``path`` whole or not at all (a temporary file renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(card.model_dump(mode="json", by_alias=True), indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_card(path: Path) -> ValidityCard:
    return ValidityCard.model_validate_json(path.read_bytes())


def store_card(card: ValidityCard, out: Path, cache_dir: Path | None = None) -> tuple[ValidityCard, Path]:
    """Write ``card`` to ``out`` and to the cache under its configuration's digest (where
    ``run`` finds it: ``run.validity_card_path``); the card as written and the cache path."""
    from ..run import validity_card_path

    cached = validity_card_path(card.simulator.digest, cache_dir)
    card = card.model_copy(update={"summary": card.summary.model_copy(update={"path": str(cached)})})
    write_card(card, out)
    if cached.resolve() != out.resolve():
        write_card(card, cached)
    return card, cached
