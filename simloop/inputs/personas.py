"""Personas from TOML: one persona per file, PTKB + behaviour + topics.

A persona file looks like ``personas/maya.toml``::

    id = "maya"                 # must equal the file stem
    name = "Maya Okafor"
    ptkb = ["I am a vegetarian.", ...]
    [behaviour]                 # optional; Behaviour defaults otherwise
    patience = 3                # or a range drawn per scenario: patience = [2, 5]
    [[topics]]
    id = "maya-marathon"        # unique across all files
    title = "..."
    need = "..."
    [[topics.rubric]]
    id = "q1"
    question = "..."
    keywords = ["...", "..."]

Every problem becomes one ``DataFileError`` line that names the file and the field
path (``personas/maya.toml: topics.0.rubric.2.question: Field required``), so the CLI
can print it and exit 2.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..errors import DataFileError, first_error
from ..files import read_toml
from ..schema import Persona

__all__ = ["load_personas", "load_persona_file"]

def load_personas(path: Path | str) -> list[Persona]:
    """Personas from a folder of ``*.toml`` files (sorted by file name) or from one file."""
    path = Path(path)
    if path.is_dir():
        files = sorted((f for f in path.glob("*.toml") if f.is_file()), key=lambda f: f.name)
        if not files:
            raise DataFileError(f"{path}: no persona files (*.toml) in this folder")
    elif path.is_file():
        files = [path]
    elif path.exists():
        raise DataFileError(f"{path}: not a file or folder of persona TOML files")
    else:
        # A relative default (personas/) is read from the current folder: show where that is.
        raise DataFileError(f"{path.absolute()}: no such persona file or folder; pass --personas DIR or --topics FILE "
                            "(the demo personas are in the simloop checkout's personas/)")
    loaded = [(f, load_persona_file(f, check_stem=False)) for f in files]
    _check_unique(loaded)
    for f, persona in loaded:
        _check_stem(f, persona)
    return [p for _, p in loaded]


def load_persona_file(path: Path | str, check_stem: bool = True) -> Persona:
    """One persona file, parsed and validated (topic and rubric ids unique within it)."""
    path = Path(path)
    data = read_toml(path, "persona file", error=DataFileError)
    try:
        persona = Persona.model_validate(data)
    except ValidationError as exc:
        raise DataFileError(f"{path}: {_first_error(exc)}") from None
    if not persona.topics:
        raise DataFileError(f"{path}: topics: at least one [[topics]] table is required")
    for ti, topic in enumerate(persona.topics):
        seen: dict[str, int] = {}
        for qi, q in enumerate(topic.rubric):
            if q.id in seen:
                raise DataFileError(
                    f"{path}: topics.{ti}.rubric.{qi}.id: duplicate rubric id {q.id!r} "
                    f"(also topics.{ti}.rubric.{seen[q.id]}.id)"
                )
            seen[q.id] = qi
    if check_stem:
        _check_stem(path, persona)
    return persona


# --------------------------------------------------------------------------- helpers


def _first_error(exc: ValidationError) -> str:
    """The first pydantic error as 'field.path: message', plus how many more there are."""
    loc, msg = first_error(exc)
    n = exc.error_count()
    more = f" (and {n - 1} more problem{'s' if n > 2 else ''})" if n > 1 else ""
    return f"{loc or '(top level)'}: {msg}{more}"


def _check_unique(loaded: list[tuple[Path, Persona]]) -> None:
    """Persona ids and topic ids are unique across every loaded file."""
    persona_at: dict[str, Path] = {}
    topic_at: dict[str, tuple[Path, int]] = {}
    for f, persona in loaded:
        if persona.id in persona_at:
            raise DataFileError(f"{f}: id: duplicate persona id {persona.id!r} (also in {persona_at[persona.id]})")
        persona_at[persona.id] = f
        for ti, topic in enumerate(persona.topics):
            if topic.id in topic_at:
                other, oi = topic_at[topic.id]
                where = f"topics.{oi}.id" if other == f else f"{other} topics.{oi}.id"
                raise DataFileError(f"{f}: topics.{ti}.id: duplicate topic id {topic.id!r} (also {where})")
            topic_at[topic.id] = (f, ti)


def _check_stem(path: Path, persona: Persona) -> None:
    if persona.id != path.stem:
        raise DataFileError(
            f"{path}: id: {persona.id!r} must match the file name (expected {path.stem!r}, or rename the file)"
        )
