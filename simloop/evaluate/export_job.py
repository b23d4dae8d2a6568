"""The seam between `simloop export` and its formats.

``ExportJob`` is everything a format may read: the run (its directory and run.json), the
dialogues the filters kept, the personas or topic file they came from (loaded only by
the formats that need them), who submits the run, and a list the format appends notes
to.  ``ExportFormat`` is a format: its ``--format`` name, its default file suffix, what
one row is, and the function that writes it.  Every format writes through ``atomic_open``
(built in memory, checked, written to a temp file and renamed), so a failure never
leaves half a file where a training job or trec_eval would pick it up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BadInputError, DataFileError
from ..files import atomic_write
from ..schema import Persona, RunManifest, Transcript
from .export_select import ExportFilter
from .summary import resolve_source

__all__ = ["ExportFormat", "ExportJob", "RunTag", "scenario_sources", "write_json", "write_lines"]


@dataclass
class RunTag:
    """Who submits a run (the ``metadata`` of every ikat25-run line): the team, the run's
    name (default: the simloop run id) and how it was made."""

    team_id: str = "simloop"
    run_id: str | None = None
    run_type: str = "automatic"


def scenario_sources(run_dir: Path, manifest: RunManifest | None, personas_dir: Path | None = None,
                     topics: Path | None = None) -> dict[str, Persona]:
    """Personas (PTKB, topic titles) of a run: flags first, else what run.json recorded."""
    scen = _scenarios(manifest)
    topics = topics or (scen.get("topics") and resolve_source(scen["topics"], run_dir))
    if topics:
        from ..inputs import load_ikat_topics

        return {p.id: p for p in load_ikat_topics(Path(topics))}
    personas_dir = personas_dir or (scen.get("personas_dir") and resolve_source(scen["personas_dir"], run_dir))
    if not personas_dir:
        raise DataFileError(f"{run_dir}: cannot find the run's personas or topic file; "
                            "pass --personas DIR or --topics FILE")
    from ..inputs import load_personas

    return {p.id: p for p in load_personas(Path(personas_dir))}


def _scenarios(manifest: RunManifest | None) -> dict[str, Any]:
    """The ``scenarios`` section of the config run.json recorded (empty without run.json)."""
    return (manifest.config.get("scenarios") or {}) if manifest is not None else {}


@dataclass
class ExportJob:
    """One export: the run, the dialogues to write, and what the formats may ask for."""

    run_dir: Path
    manifest: RunManifest | None
    transcripts: Sequence[Transcript]  # the dialogues the filters kept, in run order
    filt: ExportFilter = field(default_factory=ExportFilter)
    tag: RunTag = field(default_factory=RunTag)
    personas_dir: Path | None = None  # --personas
    topics: Path | None = None  # --topics
    notes: list[str] = field(default_factory=list)  # one line each, shown to the user

    @property
    def run_id(self) -> str:
        return self.manifest.run_id if self.manifest is not None else self.run_dir.name

    @property
    def limit(self) -> int | None:
        """``scenarios.limit`` of the run's config: a run limited to part of its inputs."""
        limit = _scenarios(self.manifest).get("limit")
        return int(limit) if limit is not None else None

    def sources(self) -> dict[str, Persona]:
        """The run's personas (or replayed topics); a run whose sources cannot be found is an error."""
        return scenario_sources(self.run_dir, self.manifest, self.personas_dir, self.topics)

    def soft_sources(self) -> dict[str, Persona] | None:
        """The run's personas when they can be found, else None with a note (for formats
        that can live without them).  Only when the run's own record leads nowhere: a
        ``--personas`` or ``--topics`` the user gave must load (a typo would otherwise
        quietly drop what the format takes from it)."""
        try:
            return self.sources()
        except DataFileError as exc:
            if self.topics or self.personas_dir:  # the topic file wins when both are given (scenario_sources)
                flag, path = ("--topics", self.topics) if self.topics else ("--personas", self.personas_dir)
                named = str(exc) if str(path) in str(exc) else f"{path}: {exc}"  # the path once
                raise DataFileError(f"{flag} {named}") from None
            self.notes.append(f"PTKB from cited statements only ({exc})")
            return None

    def replayed_topics(self) -> dict[str, Persona]:
        """The topic file the run replayed; a run of personas is bad input for the formats
        keyed by the topic file's turns."""
        if self.topics is None and not _scenarios(self.manifest).get("topics"):
            raise BadInputError(f"{self.run_dir}: not a replay of an iKAT topic file (it ran personas); this format "
                                "needs a run of `simloop run --simulator replay --topics FILE`")
        return scenario_sources(self.run_dir, self.manifest, None, self.topics)


@dataclass(frozen=True)
class ExportFormat:
    """One ``--format``: ``write`` writes the job to a file and returns how many ``unit`` it wrote."""

    name: str
    suffix: str  # the default file is RUN_DIR/export.<suffix> (trec-run and ptkb-run differ, so both fit)
    unit: str  # what a row is: "turns", "lines", "dialogues", "topics"
    write: Callable[[ExportJob, Path], int]


def write_lines(out: Path, lines: list[str]) -> int:
    """One line of text per row."""
    atomic_write(out, "".join(line + "\n" for line in lines))
    return len(lines)


def write_json(out: Path, rows: list[dict[str, Any]]) -> int:
    """A JSON array of rows, indented, non-ASCII kept."""
    atomic_write(out, json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    return len(rows)
