"""One process writes a run directory at a time.

Two writers on one run (``--resume`` of a run that is still going, two ``--resume`` at
once) would each re-run the dialogues the other is running: ``dialogues.jsonl`` would get
two lines for a dialogue and ``run.json`` counts of one writer only.  The recorder
therefore takes an OS advisory lock (``flock``) on ``.simloop.lock`` inside the run
directory before it writes there, and holds it until the run is finished (``Recorder.close``).

The kernel drops the lock with the process, however it ends (a crash, SIGKILL, a second
Ctrl-C's ``os._exit``), so the file left behind is only a name: a stale one never blocks a
later resume.  The file stays (unlinking it while another process may be opening it would
let two processes each lock a different file); it holds the pid of the last holder, for
the refusal message.  ``flock`` locks belong to an open file, not a process: a second
recorder in the same process is refused too.  Where ``flock`` is missing (Windows) or
the file system does not support it, the run goes on unlocked, with a warning.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import IO

from ..errors import ResumeError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks here
    fcntl = None  # type: ignore[assignment]

__all__ = ["RunLock", "LOCK_FILE"]

log = logging.getLogger(__name__)

LOCK_FILE = ".simloop.lock"


class RunLock:
    """The lock on one run directory; ``take`` it, ``release`` it when the run ends."""

    def __init__(self, run_dir: Path, fh: IO[str] | None):
        self.run_dir = Path(run_dir)
        self._fh = fh

    @classmethod
    def take(cls, run_dir: Path) -> RunLock:
        """Lock ``run_dir`` for this process, or raise ``ResumeError`` naming the holder's pid."""
        run_dir = Path(run_dir)
        if fcntl is None:
            return cls(run_dir, None)
        # "a+": opening must not empty the file, which holds the holder's pid.
        fh = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            pid = fh.read().strip()
            fh.close()
            holder = f"pid {pid}" if pid.isdigit() else "pid unknown"
            raise ResumeError(f"run {run_dir} is in use by another simloop process ({holder}); "
                              "wait for it to end or stop it, then resume") from None
        except OSError as exc:  # e.g. a network file system without flock
            log.warning("%s: cannot lock the run directory (%s); make sure no other process writes it",
                        run_dir, exc.strerror or exc)
            fh.close()
            return cls(run_dir, None)
        except BaseException:
            fh.close()
            raise
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        return cls(run_dir, fh)

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fh.close()  # closing the file drops the lock
