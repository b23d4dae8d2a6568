"""Run directories: ``run.json`` + ``dialogues.jsonl`` (DESIGN §4), crash-safe.

A dialogue is appended when it ends: one line, flushed and fsynced, so a SIGKILL loses at
most the dialogue being written.  A torn last line (the process died mid-write) is
reported and cut off on resume, never fatal.  Writes happen on a worker thread so the
event loop never waits for the disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterator

from pydantic import ValidationError

from ..errors import DataFileError, ResumeError, first_error
from ..files import atomic_write
from ..schema import RunManifest, Transcript, utcnow

__all__ = ["Recorder", "RunDir", "read_transcripts", "read_manifest", "new_run_id", "ReadReport"]

log = logging.getLogger(__name__)

MANIFEST = "run.json"
DIALOGUES = "dialogues.jsonl"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{os.urandom(2).hex()}"


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise DataFileError(f"run id {run_id!r}: use letters, digits, '.', '_' or '-' (max 128)")
    return run_id


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("simloop", "pydantic", "openai", "pyserini"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


@dataclass
class ReadReport:
    """What reading a dialogues file found besides valid lines."""

    torn_tail: bool = False
    torn_offset: int | None = None  # byte offset where the torn line starts
    bad_lines: list[int] = field(default_factory=list)


def _scan(path: Path, report: ReadReport) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for every complete JSON line; note torn/bad ones."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            start, offset = offset, offset + len(raw)
            complete = raw.endswith(b"\n")
            try:
                obj = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                obj = None
            if obj is not None and complete:
                yield lineno, obj
            elif not complete:  # only the last line can lack its newline: a torn write
                report.torn_tail, report.torn_offset = True, start
            elif raw.strip():
                report.bad_lines.append(lineno)


def read_transcripts(run_dir: Path, report: ReadReport | None = None) -> Iterator[Transcript]:
    """Transcripts of a run, validated; a torn last line is skipped and reported."""
    report = report if report is not None else ReadReport()
    path = Path(run_dir) / DIALOGUES
    if not path.exists():
        raise DataFileError(f"{path}: no such file (is {run_dir} a run directory?)")
    for lineno, obj in _scan(path, report):
        try:
            yield Transcript.model_validate(obj)
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise DataFileError(f"{path}:{lineno}: {where}: {msg}") from None
    if report.torn_tail:
        log.warning("%s: last line is incomplete (a crash mid-write); ignored", path)


def read_manifest(run_dir: Path) -> RunManifest:
    path = Path(run_dir) / MANIFEST
    try:
        return RunManifest.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise DataFileError(f"{path}: no such file (is {run_dir} a run directory?)") from None
    except ValidationError as exc:
        raise DataFileError(f"{path}: not a simloop run manifest: {first_error(exc)[1]}") from None


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


class Recorder:
    """Owns one run directory while a run is going."""

    def __init__(self, run_dir: Path, manifest: RunManifest):
        self.dir = RunDir(run_dir)
        self.manifest = manifest
        self._fh = None
        self._lock = asyncio.Lock()
        self.written = 0

    # ---------------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, out: Path, manifest: RunManifest) -> "Recorder":
        run_dir = Path(out) / check_run_id(manifest.run_id)
        if run_dir.exists() and any(run_dir.iterdir()):
            raise ResumeError(f"{run_dir} already exists; use --resume {run_dir} or another --run-id")
        run_dir.mkdir(parents=True, exist_ok=True)
        rec = cls(run_dir, manifest)
        rec.write_manifest()
        return rec

    @classmethod
    def resume(cls, run_dir: Path, expected_hash: str) -> tuple["Recorder", set[str], ReadReport]:
        """Reopen a run: the ids already recorded, and what was repaired."""
        run_dir = Path(run_dir)
        manifest = read_manifest(run_dir)
        if manifest.config_hash != expected_hash:
            raise ResumeError(
                f"{run_dir}: config differs from the one the run started with "
                f"(hash {manifest.config_hash} vs {expected_hash}); resume with the same config"
            )
        report = ReadReport()
        done = {t.dialogue_id for t in read_transcripts(run_dir, report)} if RunDir(run_dir).dialogues.exists() else set()
        if report.torn_tail and report.torn_offset is not None:
            # Cut the torn line so the next append starts on a clean line.
            with RunDir(run_dir).dialogues.open("r+b") as fh:
                fh.truncate(report.torn_offset)
        manifest.status = "running"
        manifest.finished_at = None
        rec = cls(run_dir, manifest)
        rec.written = len(done)
        rec.write_manifest()
        return rec, done, report

    def write_manifest(self) -> None:
        atomic_write(self.dir.manifest, self.manifest.model_dump_json(indent=2).encode())

    # ---------------------------------------------------------------- appends
    def _append_sync(self, line: bytes) -> None:
        if self._fh is None:
            self._fh = self.dir.dialogues.open("ab")
        self._fh.write(line)
        self._fh.flush()
        os.fsync(self._fh.fileno())

    async def append(self, transcript: Transcript) -> None:
        line = transcript.model_dump_json(exclude_none=True).encode() + b"\n"
        async with self._lock:  # one writer at a time keeps lines whole and ordered
            await asyncio.to_thread(self._append_sync, line)
            self.written += 1

    def finish(self, status: str, counts: dict[str, int]) -> None:
        self.manifest.status = status  # type: ignore[assignment]
        self.manifest.finished_at = utcnow()
        self.manifest.counts = counts
        self.write_manifest()
        self.close()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
