"""Preparation steps that take seconds to minutes (the demo corpus and index, a model unpack,
filling the vector cache): how they say what they wait for, how they stop, and how a
coroutine waits for one.

A step is a blocking function given a ``Step``.  It runs on the main thread of a command
(``simloop index build``: there SIGINT/SIGTERM arrive as KeyboardInterrupt between two
bytecodes) or on a worker thread of a run, which a signal cannot reach; so:

- ``step.check()`` raises ``Stopped`` once whoever waits has given up (a run's first
  SIGINT/SIGTERM).  Long loops call it between chunks, never more than a second apart, and
  leave through their ``finally``/``except BaseException`` blocks, which remove their scratch
  files: nothing half-made is left where the next run would take it for complete.
- ``step.note(text)`` says what the step waits for and why (through a ``ProgressSink``:
  the bar's label on a terminal, a line on stderr in a run without one).  A note goes out
  when the wait starts if the wait is known to be long (an index build), or once a lock
  held by another process has kept it a second; a run names any other wait that lasts
  ``NOTE_AFTER_S``.

``off_loop`` runs a step on a thread for a coroutine: cancelling the coroutine stops the
step and waits (``STOP_GRACE_S`` at most) for it to clean up, so a run interrupted during
preparation exits within seconds without leaving a thread at work.  ``held_lock`` is the
cross-process lock of a step that must run once: the holder writes its pid into a side
file, and a waiter names it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..files import atomic_write
from ..progress import NO_PROGRESS, ProgressSink

__all__ = ["Step", "Stopped", "LockHolder", "off_loop", "held_lock", "lock_holder", "NOTE_AFTER_S", "LOCK_NOTE_AFTER_S",
           "STOP_GRACE_S"]

log = logging.getLogger(__name__)

T = TypeVar("T")

NOTE_AFTER_S = 5.0  # a wait this long is named: any longer wait says what it waits for
LOCK_NOTE_AFTER_S = 1.0  # a lock held longer than this is held by a build or an unpack: name the holder at once
STOP_GRACE_S = 3.0  # how long a cancelled coroutine waits for its step to clean up
_POLL_S = 0.2  # how often a waiting step looks at its stop flag


class Stopped(KeyboardInterrupt):
    """The step was told to stop (its waiter was interrupted).  A KeyboardInterrupt, so
    that no ``except Exception`` on the way takes it for a failure, and the CLI reports it
    as an interrupt (exit 130) if it ever reaches the main thread."""


@dataclass
class Step:
    """What a blocking step gets from whoever waits for it: where to say what it waits for
    (``progress``) and whether to stop (``stop``, set from another thread)."""

    progress: ProgressSink = NO_PROGRESS
    stop: threading.Event = field(default_factory=threading.Event)

    def check(self) -> None:
        """Raise ``Stopped`` once the waiter has asked the step to stop."""
        if self.stop.is_set():
            raise Stopped("stopped")

    def note(self, text: str, total: int | None = None) -> None:
        """Say what the step does or waits for now (``total``: units ``advance`` will count)."""
        log.info("%s", text)
        self.progress.phase(text, total)

    def advance(self, n: int = 1) -> None:
        self.progress.advance(n)

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake up and raise ``Stopped`` as soon as the step is told to stop."""
        if self.stop.wait(seconds):
            raise Stopped("stopped")


async def off_loop(fn: Callable[..., T], *args: Any, progress: ProgressSink = NO_PROGRESS) -> T:
    """``fn(*args, step=...)`` on a thread.  Cancelled, it tells the step to stop, waits up
    to ``STOP_GRACE_S`` for it to clean up, and re-raises; a step that stopped on its own
    (a signal that reached its child process first) is reported as the cancellation it is."""
    step = Step(progress)
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, functools.partial(fn, *args, step=step))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        step.stop.set()
        await asyncio.wait({future}, timeout=STOP_GRACE_S)
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: no "exception was never retrieved" at exit
        raise
    except Stopped:
        raise asyncio.CancelledError() from None


# ---------------------------------------------------------------- a lock across processes


class LockHolder(BaseModel):
    """The side file of a held lock (``<lock>.holder``): who holds it and for what."""

    pid: int
    doing: str
    since: float  # time.time() when it took the lock


def _holder_file(lock: Path) -> Path:
    return lock.with_name(lock.name + ".holder")


def lock_holder(lock: Path) -> LockHolder | None:
    """Who holds ``lock``, from its side file; None when unknown (not held, or held by a
    process that has not written it yet)."""
    try:
        return LockHolder.model_validate_json(_holder_file(lock).read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def _waiting_note(lock: Path, doing: str) -> str:
    holder = lock_holder(lock)
    who = f"process {holder.pid}" if holder is not None else "another process"
    what = holder.doing if holder is not None else doing
    return f"waiting for {who}, which is {what} (lock {lock})"


@contextmanager
def held_lock(lock: Path, doing: str, step: Step, note_after: float = LOCK_NOTE_AFTER_S) -> Iterator[None]:
    """Hold the cross-process file lock ``lock`` for the block; ``doing`` (``building the
    demo index``) is written into its side file with this process's pid, for waiters.  A
    wait longer than ``note_after`` seconds is noted, naming the holder's pid; the waiting
    stops on ``step.check()``."""
    from filelock import FileLock, Timeout

    lock.parent.mkdir(parents=True, exist_ok=True)
    file_lock = FileLock(str(lock))
    started, noted = time.monotonic(), False
    while True:
        step.check()
        try:
            file_lock.acquire(timeout=_POLL_S)
            break
        except Timeout:
            if not noted and time.monotonic() - started >= note_after:
                step.note(_waiting_note(lock, doing))
                noted = True
    try:
        try:
            atomic_write(_holder_file(lock), LockHolder(pid=os.getpid(), doing=doing,
                                                        since=time.time()).model_dump_json())
        except OSError:  # a waiter then says "another process": the lock itself still holds
            log.debug("cannot write the holder of %s", lock, exc_info=True)
        yield
    finally:
        _holder_file(lock).unlink(missing_ok=True)
        file_lock.release()
