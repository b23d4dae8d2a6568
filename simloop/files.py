"""Atomic file writes (the one helper every file simloop writes whole goes through), the
checks of a path the user gave for a file to write, a file to read or a run to read, the
reading of a text or TOML file the user gave, and the JSON envelope for plugin memory that
outlives a process.

Content goes to a temp file next to the target, is flushed and fsynced, and is renamed
over the target: a reader never sees half a file, and a crash (even a power cut, after
the fsync) leaves either the old file or the new one.  Appends (``dialogues.jsonl``) are
not whole-file writes; the recorder fsyncs those itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pickle
import re
import shutil
import tomllib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import BadInputError

__all__ = ["file_sha256", "atomic_folder", "atomic_open", "atomic_write", "check_out_file", "check_in_file",
           "check_run_dir", "read_text", "read_toml", "folder_problem", "sqlite_problem", "pack_memory",
           "unpack_memory"]

SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def check_out_file(path: Path | str, new_folders: bool = False) -> Path:
    """A file the user named for output, checked before any work: a folder in its place (or
    ``--out ''``, which is the current folder) would only fail at the final rename, after
    the work, as an OSError.  ``new_folders``: missing parent folders will be created (else
    the parent must exist, so that a typo in it is not silently made into a folder)."""
    path = Path(path)
    if not path.name:  # '' and '.' both reach us as Path('.')
        raise BadInputError(f"output file {str(path)!r}: no file name (that is the current folder); give a file name")
    if path.is_dir():
        raise BadInputError(f"{path}: is a folder, not a file; give a file name for the output")
    if not new_folders and not path.parent.exists():
        raise BadInputError(f"{path.parent}: output folder does not exist")
    problem = folder_problem(path.parent)
    if problem is not None:
        raise BadInputError(f"{path}: {problem}")
    return path


def check_run_dir(path: Path | str, error: type[BadInputError] = BadInputError) -> Path:
    """A run directory the user named: a file or nothing in its place is one ``error`` line
    here, not an OSError from the first read inside it."""
    path = Path(path)
    if not path.is_dir():
        why = "it is a file" if path.exists() else "no such folder"
        raise error(f"{path}: not a run directory ({why})")
    return path


def check_in_file(path: Path | str, what: str = "file", *, flag: str = "",
                  error: type[BadInputError] = BadInputError) -> Path:
    """A file the user named for reading (``what`` says which kind, ``flag`` the flag that
    named it): nothing there, or a folder in its place, is one line here instead of an
    OSError from the first read (``IsADirectoryError``, ``NotADirectoryError``)."""
    path = Path(path)
    where = f"{flag} {path}" if flag else str(path)
    if path.is_dir():
        raise error(f"{where}: is a folder, not a file")
    if not path.exists():
        raise error(f"{where}: {what} not found")
    return path


def read_text(path: Path | str, what: str = "file", *, error: type[BadInputError] = BadInputError) -> str:
    """The UTF-8 text of a file the user named; every way it cannot be read is one ``error``
    line naming the file (missing, a folder, unreadable, not UTF-8 with the byte where)."""
    path = check_in_file(path, what, error=error)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: not UTF-8 text (byte {exc.start})") from None


_TOML_POS = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")


def read_toml(path: Path | str, what: str = "TOML file", *,
              error: type[BadInputError] = BadInputError) -> dict[str, Any]:
    """A TOML file the user named (``read_text``), parsed; a syntax error is one line with
    its position: ``FILE: line 3, column 7: invalid TOML: Expected ...``."""
    path = Path(path)
    text = read_text(path, what, error=error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: {_toml_error(exc)}") from None


def _toml_error(exc: tomllib.TOMLDecodeError) -> str:
    """'line 3, column 7: invalid TOML: Expected ...' (Python 3.11 keeps the position in the text)."""
    msg = str(exc).splitlines()[0] if str(exc) else "syntax error"
    m = _TOML_POS.search(msg)
    if m is None:
        return f"invalid TOML: {msg}"
    where = f"line {m.group(1)}, column {m.group(2)}" if m.group(1) else "end of file"
    return f"{where}: invalid TOML: {msg[: m.start()]}"


@contextmanager
def atomic_open(path: Path | str, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """A file handle (``"w"`` text or ``"wb"`` binary) whose content replaces ``path`` when
    the block ends without an exception; on an exception nothing changes."""
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open writes a whole file: mode 'w' or 'wb'")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: its 0600 mode would survive the rename and surprise other users.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb" if mode == "wb" else "x", encoding=None if mode == "wb" else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_folder(path: Path | str) -> Iterator[Path]:
    """A fresh sibling folder to fill; it becomes ``path`` when the block ends without an
    exception (an OSError if ``path`` is there by then, e.g. another process was first)
    and is removed in every other case: a reader never sees a half-written folder."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.mkdir(parents=True)
    try:
        yield tmp
        os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write(path: Path | str, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see ``atomic_open``)."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)


def file_sha256(path: Path | str) -> str | None:
    """The SHA-256 of a file's bytes, read in chunks; None when it cannot be read (a missing
    file, a folder): whoever reads the file next says what is wrong with it, in one line."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists: what creating ``path`` would build on."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def folder_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot be (or be made) a folder we write in, for an up-front check
    that runs before anything is created; None when it can."""
    probe = _nearest_existing(Path(path))
    if not probe.is_dir():
        return f"{probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"cannot write in {probe} ({_why_not_writable(probe)})"
    made = probe / f".simloop-probe-{uuid.uuid4().hex[:8]}"
    try:  # access() says yes to root anywhere; /proc, or a disk with no room, refuse only a real try
        made.mkdir()
        made.rmdir()
    except OSError as exc:
        return f"cannot create anything in {probe} ({exc.strerror or exc})"
    return None


def _why_not_writable(folder: Path) -> str:
    try:  # access() says no for a read-only mount too: name the cause the user must fix
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "read-only file system"
    except (OSError, AttributeError):  # no statvfs (Windows)
        pass
    return "permission denied"


def sqlite_problem(path: Path | str) -> str | None:
    """Why ``path`` cannot be opened as an SQLite database to write in; None when it can.
    Checked up front because sqlite3 only says "file is not a database" at the first
    statement, which for a lazily opened file is deep inside a run.  A missing or empty
    file is fine: SQLite starts a new database there."""
    path = Path(path)
    if path.is_dir():
        return "a folder, not an SQLite database file"
    if not path.exists():
        return folder_problem(path.parent)
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if head and head != SQLITE_HEADER:
        return "not an SQLite database"
    if not os.access(path, os.W_OK):
        return "read-only (permission denied)"
    return None


def pack_memory(memory: dict[str, Any]) -> dict[str, Any]:
    """A plugin's per-dialogue memory in a JSON-safe envelope (sessions that outlive a process).

    Plain JSON when the memory is JSON (the policy keeps it so); otherwise pickled, so a
    plugin that keeps an RNG or an array still survives a restart of the process that
    wrote it (the file is only read back by the same deployment).
    """
    try:
        text = json.dumps(memory)
        if json.loads(text) == memory:
            return {"json": memory}
    except (TypeError, ValueError):
        pass
    return {"pickle": base64.b64encode(pickle.dumps(memory)).decode()}


def unpack_memory(packed: dict[str, Any] | None) -> dict[str, Any]:
    if not packed:
        return {}
    if "json" in packed:
        return dict(packed["json"])
    return pickle.loads(base64.b64decode(packed["pickle"]))
