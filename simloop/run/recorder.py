"""Writing run directories: ``run.json`` + ``dialogues.jsonl`` (DESIGN §4), crash-safe.

A dialogue is appended when it ends: one line, flushed and fsynced, so a SIGKILL loses at
most the dialogue being written.  Writes happen on a worker thread so the event loop never
waits for the disk.

Resuming repairs the dialogues file (read by ``runfiles.py``) in one atomic rewrite:
corrupt lines and repeated dialogue ids move to ``dialogues.rejected.jsonl``, and with
``retry_errors`` the lines of dialogues that ended in an infrastructure error move to
``dialogues.retried.jsonl``; those dialogues have no line any more, so the run re-runs them
and the file keeps one line per dialogue.  The recorder tallies every line of the run (old
and new), so ``run.json`` counts stay true for the whole run after any number of resumes.

One process at a time: ``create`` and ``resume`` lock the run directory (``runlock.py``)
before writing in it, and ``close`` (``finish``) lets it go; a second process is refused.

A write that fails (a full disk, a quota, a file-size limit) leaves the dialogues file as
it was before that write: the bytes of a half-written batch are cut off again, so every
line in it is whole and a resume re-runs the dialogues that were lost.  The run then ends
``interrupted`` (resumable), not ``failed``; when no new ``run.json`` fits on the disk, the
one there is overwritten in place with the shorter compact form (it fits in the space the
file holds already).  ``write_error`` keeps what failed, for the command to say.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import FileIO
from pathlib import Path

from ..errors import DataFileError, ResumeError
from ..files import atomic_open, atomic_write, folder_problem
from ..schema import RunManifest, Transcript, utcnow
from .runfiles import INFRASTRUCTURE, REJECTED, RETRIED, ReadReport, RunDir, read_manifest, scan_lines
from .runlock import LOCK_FILE, RunLock

__all__ = ["Recorder", "Tally", "check_out_dir", "check_run_id", "new_run_id", "occupied"]

log = logging.getLogger(__name__)

# What a disk with no room left says: no space, a quota, a file-size limit (RLIMIT_FSIZE).
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_run_id(prefix: str = "run") -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{os.urandom(2).hex()}"


def check_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id):
        raise DataFileError(f"run id {run_id!r}: use ASCII letters, digits, '.', '_' or '-' (max 128)")
    return run_id


def check_out_dir(out: Path) -> None:
    """Fail early (before plugins load and long before a dialogue ends) when the output
    folder cannot hold a run directory: a file in its place, or a folder we cannot write."""
    problem = folder_problem(out)
    if problem is not None:
        raise DataFileError(f"--out {out}: {problem}; give a folder for run directories")


@dataclass
class Tally:
    """Counts over every line of a run (``run.json`` counts), kept as lines are read or written."""

    dialogues: int = 0
    turns: int = 0
    errors: int = 0
    infra_errors: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, t: Transcript) -> None:
        self.dialogues += 1
        self.turns += len(t.turns)
        self.reasons[t.stop.reason] += 1
        if t.error is not None:
            self.errors += 1
            self.infra_errors += t.error.source in INFRASTRUCTURE

    def counts(self) -> dict[str, int]:
        return {"dialogues": self.dialogues, "turns": self.turns, "errors": self.errors,
                "errors.infrastructure": self.infra_errors,
                **{f"stop.{k}": v for k, v in sorted(self.reasons.items())}}


class Recorder:
    """Owns one run directory while a run is going."""

    def __init__(self, run_dir: Path, manifest: RunManifest):
        self.dir = RunDir(run_dir)
        self.manifest = manifest
        self._fh: FileIO | None = None  # unbuffered: a failed write leaves nothing behind to flush later
        self._lock = asyncio.Lock()
        self._waiting: list[tuple[bytes, Transcript]] = []  # lines not yet handed to a write
        self._queued = self._taken = 0  # lines queued so far / handed to a write so far
        self._failed: list[tuple[int, int, BaseException]] = []  # (after, up to line, why) of failed writes
        self.written = 0
        self.retried = 0  # lines moved out by resume(retry_errors=True) for a re-run
        self._finished_at: datetime | None = None  # a finished run's time, while a resume adds nothing
        self._reopened_with = 0  # lines the run held when this session reopened it
        self.tally = Tally()
        self._run_lock: RunLock | None = None  # held from create/resume until close (runlock.py)
        self.write_error: OSError | None = None  # the first write of a dialogue line that failed
        self.manifest_error: OSError | None = None  # run.json could not be updated at the end either

    # ---------------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, out: Path, manifest: RunManifest) -> Recorder:
        run_dir = Path(out) / check_run_id(manifest.run_id)
        _refuse_existing(run_dir)  # before any write, the lock file included
        run_dir.mkdir(parents=True, exist_ok=True)
        rec = cls(run_dir, manifest)
        rec._run_lock = RunLock.take(run_dir)
        try:
            _refuse_existing(run_dir)  # again under the lock: another process with this run id got there first
            rec.write_manifest()
        except BaseException:
            rec.close()
            raise
        return rec

    @classmethod
    def resume(cls, run_dir: Path, expected_hash: str,
               retry_errors: bool = False) -> tuple[Recorder, set[str], ReadReport]:
        """Reopen a run: the ids already recorded, and what was repaired (see the module doc)."""
        run_dir = Path(run_dir)
        manifest = read_manifest(run_dir)
        if manifest.config_hash != expected_hash:
            raise ResumeError(
                f"{run_dir}: config differs from the one the run started with "
                f"(hash {manifest.config_hash} vs {expected_hash}); resume with the same config"
            )
        problem = folder_problem(run_dir)  # a read-only copy: found before the lock file is written
        if problem:
            raise ResumeError(f"cannot resume {run_dir}: {problem}")
        rec = cls(run_dir, manifest)
        rec._run_lock = RunLock.take(run_dir)  # before reading the lines another writer may be adding to
        try:
            done, report = rec._reopen(retry_errors)
        except BaseException:
            rec.close()
            raise
        return rec, done, report

    def _reopen(self, retry_errors: bool) -> tuple[set[str], ReadReport]:
        """Read the lines so far, repair the file and mark the run running again."""
        report = ReadReport()
        kept: list[bytes] = []
        moved: dict[str, list[bytes]] = {REJECTED: [], RETRIED: []}
        done: set[str] = set()
        for line, _ in scan_lines(self.dir.dialogues, report):
            t = line.transcript
            if t is None or t.dialogue_id in done:  # corrupt, torn, or a second line for one dialogue
                moved[REJECTED].append(line.raw if line.raw.endswith(b"\n") else line.raw + b"\n")
            elif retry_errors and t.error is not None and t.error.source in INFRASTRUCTURE:
                moved[RETRIED].append(line.raw)
                self.retried += 1
            else:
                kept.append(line.raw)
                done.add(t.dialogue_id)
                self.tally.add(t)
        if moved[REJECTED] or moved[RETRIED]:
            # Keep the moved lines first: a crash between the two steps leaves a copy, never a loss.
            for name, lines in moved.items():
                if lines:
                    _append_lines(self.dir.path / name, lines)
            with atomic_open(self.dir.dialogues, "wb") as fh:
                fh.writelines(kept)
        if self.retried:  # in run.json now: a resume killed before its finish must not lose them
            self.manifest.counts = {**self.manifest.counts,
                                    "retried": self.manifest.counts.get("retried", 0) + self.retried}
        if self.manifest.status == "finished" and not (self.retried or report.bad_lines or report.torn_line):
            self._finished_at = self.manifest.finished_at  # kept if this session adds nothing
        self.manifest.status = "running"
        self.manifest.finished_at = None
        self.written = self._reopened_with = len(done)
        self.write_manifest()
        return done, report

    def write_manifest(self) -> None:
        try:
            atomic_write(self.dir.manifest, self.manifest.model_dump_json(indent=2).encode())
        except OSError as exc:  # no room for a new file beside the old one: the old one's room, then
            if exc.errno not in _NO_ROOM or not _overwrite_in_place(self.dir.manifest,
                                                                   self.manifest.model_dump_json().encode()):
                raise
            log.warning("%s: no room for a new copy (%s); overwritten in place", self.dir.manifest, exc.strerror)

    # ---------------------------------------------------------------- appends
    def _append_sync(self, batch: list[tuple[bytes, Transcript]]) -> None:
        start = None
        try:
            if self._fh is None:
                self._fh = FileIO(self.dir.dialogues, "a")
            start = os.lseek(self._fh.fileno(), 0, os.SEEK_END)
            data = memoryview(b"".join(line for line, _ in batch))
            while data:  # an unbuffered write may take part of it; the next one says why it stopped
                n = self._fh.write(data)
                if not n:
                    raise OSError(errno.EIO, "the write wrote nothing")
                data = data[n:]
            os.fsync(self._fh.fileno())
        except OSError as exc:  # a full disk: say which file (a write on an open file names none)
            if start is not None:
                self._cut_back(start)
            named = exc if exc.filename is not None else OSError(exc.errno, exc.strerror, str(self.dir.dialogues))
            self.write_error = self.write_error or named
            if named is exc:
                raise
            raise named from exc
        # Counted by the write, not by each waiter: a waiter cancelled (Ctrl-C) after its line
        # went out with another's batch never returns to count it, and run.json fell short.
        for _, transcript in batch:
            self.written += 1
            self.tally.add(transcript)

    def _cut_back(self, size: int) -> None:
        """Drop what a failed write left past ``size`` (part of a line): the file keeps whole lines."""
        try:
            if self._fh is not None:
                os.ftruncate(self._fh.fileno(), size)
        except OSError as exc:  # the torn tail stays; a resume moves it to dialogues.rejected.jsonl
            log.warning("%s: could not cut a half-written line (%s)", self.dir.dialogues, exc.strerror)

    async def _write(self, batch: list[tuple[bytes, Transcript]]) -> None:
        """The batch written off the loop; a cancelled writer still waits for its thread, so
        the lock is not given up while a write is under way and run.json counts it."""
        job = asyncio.ensure_future(asyncio.to_thread(self._append_sync, batch))
        cancelled = False
        while True:
            try:
                await asyncio.shield(job)
                break
            except asyncio.CancelledError:
                cancelled = True  # a write takes milliseconds: finish it, then give up
                if job.done():
                    break
        if cancelled:
            raise asyncio.CancelledError
        job.result()  # the write's own error, if any

    async def append(self, transcript: Transcript) -> None:
        """Returns once the line is on disk.  Lines that arrive while a write is under way go
        out together with one fsync (group commit): 1,000 dialogues ending at once cost a few
        fsyncs of ~2 ms, not 1,000 in a row (measured: 3 s at the end of the 2 s benchmark)."""
        self._waiting.append((transcript.model_dump_json().encode() + b"\n", transcript))  # DESIGN §4: null fields stay
        mine = self._queued = self._queued + 1
        async with self._lock:  # one writer at a time keeps lines whole and ordered
            if mine > self._taken:  # not in an earlier writer's batch: write every waiting line
                lo, hi = self._taken, self._queued
                batch, self._waiting, self._taken = self._waiting, [], hi
                try:
                    await self._write(batch)
                except BaseException as exc:
                    self._failed.append((lo, hi, exc))
                    raise
            for lo, hi, why in self._failed:  # that batch was written before we got the lock ...
                if lo < mine <= hi:  # ... or failed
                    raise why

    def counts(self) -> dict[str, int]:
        """Counts over every line of the run, this session's and earlier ones'."""
        return {**self.tally.counts(), "recorded": self.written}

    def finish(self, status: str, counts: dict[str, int]) -> None:
        """``counts`` from the caller (scenarios, ...) under the recorder's own whole-run counts.
        A run whose dialogue lines could not be written ends ``interrupted``, whatever the
        caller says: nothing is lost that a resume does not re-run.  Then a ``run.json``
        that cannot be written either is noted in ``manifest_error``, not raised over the
        write error that stopped the run."""
        if self.write_error is not None:
            status = "interrupted"
        self.manifest.status = status  # type: ignore[assignment]
        unchanged = status == "finished" and self._finished_at is not None and self.written == self._reopened_with
        self.manifest.finished_at = self._finished_at if unchanged else utcnow()
        counts = {**counts, **self.counts()}
        counts["retried"] = self.manifest.counts.get("retried", 0)  # 0 until a --retry-errors (_reopen)
        self.manifest.counts = counts
        try:
            self.write_manifest()
        except OSError as exc:
            if self.write_error is None:
                raise
            self.manifest_error = exc
            log.warning("%s: not updated (%s)", self.dir.manifest, exc.strerror or exc)
        finally:
            self.close()

    def close(self) -> None:
        """Close the dialogues file and let other processes have the run (its lock)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        lock, self._run_lock = self._run_lock, None
        if lock is not None:
            lock.release()


def occupied(run_dir: Path) -> bool:
    """Does ``run_dir`` hold anything?  A lock file alone does not count: a crash between
    taking the lock and writing ``run.json`` leaves one, and no run."""
    return run_dir.exists() and any(p.name != LOCK_FILE for p in run_dir.iterdir())


def _refuse_existing(run_dir: Path) -> None:
    """A new run's directory must be new (or empty, but for a lock file a crash left)."""
    if occupied(run_dir):
        raise ResumeError(f"{run_dir} already exists; use --resume {run_dir} or another --run-id")


def _overwrite_in_place(path: Path, data: bytes) -> bool:
    """Write ``data`` over ``path`` in the room the file holds, when it is no longer than the
    file, so that no new block is needed; False when it is longer or the write fails.  Not
    atomic, so only for when an atomic write found no room (a copy-on-write file system,
    which needs room even to overwrite, refuses the write before it changes anything)."""
    try:
        if len(data) > path.stat().st_size:
            return False
        with path.open("r+b") as fh:
            fh.write(data)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
    except OSError:
        return False
    return True


def _append_lines(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as fh:
        fh.writelines(lines)
        fh.flush()
        os.fsync(fh.fileno())
