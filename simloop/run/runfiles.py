"""Reading run directories (DESIGN §4): the names of a run's files, ``run.json`` and
``dialogues.jsonl``.  Reading is tolerant but never silent: a corrupt line anywhere (not
JSON, not a transcript, or a torn last line from a crash mid-write) is skipped and reported
with its line number.  ``recorder.py`` writes what this reads.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..errors import DataFileError, first_error
from ..files import check_in_file, check_run_dir
from ..schema import RunManifest, Transcript

__all__ = ["MANIFEST", "DIALOGUES", "REJECTED", "RETRIED", "INFRASTRUCTURE", "ReadReport", "RunDir", "Line",
           "scan_lines", "read_transcripts", "read_manifest"]

log = logging.getLogger(__name__)

MANIFEST = "run.json"
DIALOGUES = "dialogues.jsonl"
REJECTED = "dialogues.rejected.jsonl"  # corrupt or repeated lines, moved out on resume
RETRIED = "dialogues.retried.jsonl"  # infrastructure failures replaced by a re-run (--retry-errors)
# error.source values that say the machinery failed, not the plugins: worth a retry.
INFRASTRUCTURE = frozenset({"llm", "retrieval", "engine"})


@dataclass
class ReadReport:
    """What reading a dialogues file found besides valid lines."""

    torn_line: int | None = None  # the torn last line's number (a crash mid-write), if any
    bad_lines: list[int] = field(default_factory=list)  # corrupt lines (the torn tail not included)
    reasons: dict[int, str] = field(default_factory=dict)  # line number -> what is wrong with it

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
    with no transcript."""
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
                    reason = f"not a transcript: {where}: {msg}" if where else f"not a transcript: {msg}"
            if torn:
                transcript = None  # even if it parses: the write did not finish
                report.torn_line = lineno
                warn("%s", _torn(path, lineno))
            elif transcript is None:
                report.bad_lines.append(lineno)
                report.reasons[lineno] = reason
                warn("%s", _corrupt(path, lineno, reason))
            yield Line(lineno, raw, transcript), start


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
    try:
        return RunManifest.model_validate_json(check_in_file(path, error=DataFileError).read_bytes())
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise DataFileError(f"{path}: not a simloop run manifest: {where or '(top level)'}: {msg}") from None


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
