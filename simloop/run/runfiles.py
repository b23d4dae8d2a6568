"""Reading run directories (DESIGN §4): the names of a run's files, ``run.json`` and
``dialogues.jsonl``.  Reading is tolerant but never silent: a corrupt line anywhere (not
JSON, not a transcript, or a torn last line from a crash mid-write) is skipped and reported
with its line number.  ``recorder.py`` writes what this reads.

Schema versions: a record's ``schema_version`` is ``MAJOR.MINOR``.  A newer minor version
only adds fields, so it is read with a warning that names it (what this simloop does not
know is kept but not read); another major version may have moved or renamed fields, and
reading it as ours would show its dialogues without turns, so it is refused, one line.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import DataFileError, first_error
from ..files import check_in_file, check_run_dir
from ..schema import SCHEMA_VERSION, RunManifest, Transcript

__all__ = ["MANIFEST", "DIALOGUES", "REJECTED", "RETRIED", "INFRASTRUCTURE", "ReadReport", "RunDir", "Line",
           "scan_lines", "read_transcripts", "read_manifest", "check_schema_version"]

log = logging.getLogger(__name__)

MANIFEST = "run.json"
DIALOGUES = "dialogues.jsonl"
REJECTED = "dialogues.rejected.jsonl"  # corrupt or repeated lines, moved out on resume
RETRIED = "dialogues.retried.jsonl"  # infrastructure failures replaced by a re-run (--retry-errors)
# error.source values that say the machinery failed, not the plugins: worth a retry.
INFRASTRUCTURE = frozenset({"llm", "retrieval", "engine"})

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?$")


def _parts(version: str) -> tuple[int, int] | None:
    m = _VERSION.match(version.strip())
    return (int(m[1]), int(m[2] or 0)) if m else None


def check_schema_version(version: str, where: Path | str) -> str | None:
    """None when this simloop reads records of ``version`` as written; a warning line
    naming it when it is a newer minor version; a ``DataFileError`` for another major
    version, or one that is not a version at all (see the module doc)."""
    ours, theirs = _parts(SCHEMA_VERSION), _parts(version)
    assert ours is not None  # our own constant
    if theirs is None or theirs[0] != ours[0]:
        raise DataFileError(f"{where}: schema_version {version!r} is not one this simloop reads "
                            f"({ours[0]}.x; it writes {SCHEMA_VERSION}); read it with the simloop that wrote it")
    if theirs > ours:
        return (f"{where}: schema_version {version} is newer than this simloop's {SCHEMA_VERSION}; "
                "fields it added are not read")
    return None


@dataclass
class ReadReport:
    """What reading a dialogues file found besides valid lines."""

    torn_line: int | None = None  # the torn last line's number (a crash mid-write), if any
    bad_lines: list[int] = field(default_factory=list)  # corrupt lines (the torn tail not included)
    reasons: dict[int, str] = field(default_factory=dict)  # line number -> what is wrong with it
    newer: str | None = None  # a newer minor schema_version's warning (the first line's; not in ``notes``)

    @property
    def torn_tail(self) -> bool:
        return self.torn_line is not None

    def repair_notes(self, run_dir: Path, retried: int = 0) -> list[str]:
        """What resuming repaired, one line each (local and Ray runs print them)."""
        lines = []
        if self.torn_tail:
            lines.append(f"{run_dir}/dialogues.jsonl ended with a torn line (a crash mid-write); "
                         "it was moved to dialogues.rejected.jsonl and that dialogue will re-run")
        if self.bad_lines:
            shown = ", ".join(map(str, self.bad_lines[:10])) + (" ..." if len(self.bad_lines) > 10 else "")
            lines.append(f"{run_dir}/dialogues.jsonl: corrupt line(s) {shown} moved to dialogues.rejected.jsonl; "
                         "their dialogues will re-run")
        if retried:
            lines.append(f"{retried} dialogue(s) that ended in an infrastructure error will re-run "
                         "(their old lines are in dialogues.retried.jsonl)")
        return lines

    def notes(self, path: Path | str) -> list[str]:
        """One line per problem of the dialogues file ``path``: what the reader logs, for a
        reader that says it itself (``log_problems=False``)."""
        out = [_corrupt(path, n, self.reasons.get(n, "corrupt")) for n in self.bad_lines]
        if self.torn_tail:
            out.append(_torn(path, self.torn_line))
        return out


def _corrupt(path: Path | str, lineno: int, reason: str) -> str:
    return f"{path}:{lineno}: corrupt line skipped ({reason})"


def _torn(path: Path | str, lineno: int | None) -> str:
    return f"{path}:{lineno}: last line is incomplete (a crash mid-write); skipped"


@dataclass
class Line:
    """One line of a dialogues file as read."""

    lineno: int
    raw: bytes
    transcript: Transcript | None  # None: corrupt or torn


def scan_lines(path: Path, report: ReadReport, log_problems: bool = True) -> Iterator[tuple[Line, int]]:
    """(line, byte offset) for every line; corrupt and torn ones are noted in ``report``
    (and logged with their line number unless ``log_problems`` is False) and yielded too,
    with no transcript.  A line of another major schema version stops the read with a
    ``DataFileError`` (see the module doc); a newer minor one is noted once."""
    warn = log.warning if log_problems else log.debug
    if not path.exists():
        return
    check_in_file(path, error=DataFileError)  # a folder in its place is the user's to fix
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            torn = not raw.endswith(b"\n")  # only the last line can lack its newline
            transcript, reason = None, "not a JSON line"
            try:
                transcript = Transcript.model_validate_json(raw)
            except ValidationError as exc:
                where, msg = first_error(exc)
                if exc.errors()[0]["type"] != "json_invalid":
                    _version_first(raw, f"{path}:{lineno}")
                    reason = f"not a transcript: {where}: {msg}" if where else f"not a transcript: {msg}"
            if transcript is not None and not torn:
                _check_line_version(transcript, f"{path}:{lineno}", report, warn)
            if torn:
                transcript = None  # even if it parses: the write did not finish
                report.torn_line = lineno
                warn("%s", _torn(path, lineno))
            elif transcript is None:
                report.bad_lines.append(lineno)
                report.reasons[lineno] = reason
                warn("%s", _corrupt(path, lineno, reason))
            yield Line(lineno, raw, transcript), start


def _check_line_version(t: Transcript, where: str, report: ReadReport, warn: Callable[..., None]) -> None:
    if t.schema_version == SCHEMA_VERSION:
        return
    note = check_schema_version(t.schema_version, where)  # raises for another major version
    if note is not None and report.newer is None:
        report.newer = note
        warn("%s", note)


def read_transcripts(run_dir: Path, report: ReadReport | None = None, *,
                     log_problems: bool = True) -> Iterator[Transcript]:
    """Transcripts of a run, validated; a corrupt or torn line is skipped, logged with its
    line number (unless the caller says them itself: ``log_problems=False``), and noted in
    ``report``."""
    report = report if report is not None else ReadReport()
    path = Path(run_dir) / DIALOGUES
    if not path.exists():
        if (Path(run_dir) / MANIFEST).is_file():  # a run stopped before its first dialogue ended
            return
        raise DataFileError(f"{path}: no such file (is {run_dir} a run directory?)")
    for line, _ in scan_lines(path, report, log_problems):
        if line.transcript is not None:
            yield line.transcript


def read_manifest(run_dir: Path) -> RunManifest:
    path = Path(run_dir) / MANIFEST
    if Path(run_dir).exists():
        check_run_dir(run_dir, error=DataFileError)  # a file in its place
    if not path.exists():
        raise DataFileError(f"{path}: no such file (is {run_dir} a run directory?)")
    raw = check_in_file(path, error=DataFileError).read_bytes()
    try:
        manifest = RunManifest.model_validate_json(raw)
    except ValidationError as exc:
        _version_first(raw, path)  # another schema's run.json fails as that, not as a missing field
        where, msg = first_error(exc)
        raise DataFileError(f"{path}: not a simloop run manifest: {where or '(top level)'}: {msg}") from None
    note = check_schema_version(manifest.schema_version, path)
    if note is not None:
        log.warning("%s", note)
    return manifest


def _version_first(raw: bytes, path: Path | str) -> None:
    """A ``DataFileError`` naming the schema version when ``raw`` is JSON of another one."""
    try:
        version = json.loads(raw).get("schema_version")
    except (ValueError, AttributeError):
        return
    if isinstance(version, str):
        check_schema_version(version, path)


class RunDir:
    """Paths of one run directory."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    @property
    def dialogues(self) -> Path:
        return self.path / DIALOGUES
