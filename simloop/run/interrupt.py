"""Stopping a run on SIGINT or SIGTERM (DESIGN §12).

The first signal cancels the run's work (one task: warm-up, then the dialogues); the
engine drops the dialogues in flight without a line, so resume re-runs them, and the run
is closed as ``interrupted``.  A second signal exits at once: the hooks registered with
``at_hard_exit`` put the terminal back, then ``os._exit(130)``.

The handlers are asyncio's (``loop.add_signal_handler``): they run on the event loop
between two steps, never as a KeyboardInterrupt in the middle of a write or of a C call
on some thread.  Python only allows them on the main thread; elsewhere (a run started
from a worker thread) signals keep whatever handling the host has.  The handlers that
were there before (asyncio.Runner's, a notebook kernel's) are put back afterwards.

Blocking work (a JVM boot, a search) runs on threads that cannot be cancelled; a
process that has been interrupted therefore leaves with ``exit_now`` once its run is
closed, instead of waiting for those threads at interpreter exit.

Every other command (``export``, ``eval``, ``index build`` ...) stops on SIGTERM as on
SIGINT: ``sigterm_as_sigint`` makes SIGTERM raise KeyboardInterrupt in the main thread for
the whole command, so the same ``finally`` blocks remove temp files and the CLI exits 130.
The handlers above, and ``serve``'s and ``mock-llm``'s, take over on top of it while they
are installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

__all__ = ["Interrupt", "until_signalled", "at_hard_exit", "exit_now", "sigterm_as_sigint", "STOP_SIGNALS",
           "INTERRUPTED"]

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
INTERRUPTED = 130  # the shell's code for "ended by SIGINT"; used for SIGTERM too (DESIGN §12)

T = TypeVar("T")
_HARD_EXIT_HOOKS: list[Callable[[], None]] = []


def at_hard_exit(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` (restore the terminal) before a second signal ends the process;
    returns a function that unregisters it."""
    _HARD_EXIT_HOOKS.append(hook)
    return lambda: _HARD_EXIT_HOOKS.remove(hook) if hook in _HARD_EXIT_HOOKS else None


def exit_now(code: int = INTERRUPTED, message: str | None = None) -> None:
    """Flush what was printed and end the process without joining threads (a search or a
    JVM boot still running on one would otherwise keep it alive)."""
    for hook in list(_HARD_EXIT_HOOKS):
        try:
            hook()
        except Exception:  # a terminal that cannot be restored must not stop the exit
            pass
    if message:
        print(message, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


@contextmanager
def sigterm_as_sigint() -> Iterator[None]:
    """While the block runs, SIGTERM raises KeyboardInterrupt in the main thread, as SIGINT
    does (``signal.default_int_handler``).  Only over the default action (which ends the
    process at once, skipping every clean-up): a handler the host set stays, and so does
    an ignored SIGTERM.  The previous handling is put back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Interrupt:
    """While installed, the first SIGINT/SIGTERM cancels ``task`` (after ``on_first``
    with the signal's name); a second exits the process at once."""

    def __init__(self, task: asyncio.Task, on_first: Callable[[str], None] | None = None):
        self.task = task
        self.on_first = on_first
        self.signal: str | None = None  # the name of the first signal received
        self._previous: dict[int, object] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def received(self) -> bool:
        return self.signal is not None

    def install(self) -> bool:
        """Take SIGINT and SIGTERM over; False where Python does not allow it."""
        if threading.current_thread() is not threading.main_thread():
            return False
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # Windows, or no main thread
                continue
            self._previous[sig] = previous
        self._loop = loop
        return bool(self._previous)

    def remove(self) -> None:
        loop, self._loop = self._loop, None
        for sig, previous in self._previous.items():
            if loop is not None and not loop.is_closed():
                loop.remove_signal_handler(sig)
            try:
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                pass
        self._previous.clear()

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self.signal is not None:
            exit_now(INTERRUPTED, f"simloop: {name} again: exiting now")
        self.signal = name
        log.info("%s: stopping the run", name)
        if self._loop is not None:
            # The loop's default executor may be booting the JVM or loading a model, which
            # no one can cancel; asyncio.run would wait for it at teardown.  A fresh one
            # lets teardown go on; the old thread ends on its own or with the process.
            self._loop.set_default_executor(ThreadPoolExecutor(thread_name_prefix="simloop-after-stop"))
        if self.on_first is not None:
            try:
                self.on_first(name)
            except Exception:  # a progress display that fails must not keep the run going
                log.exception("interrupt hook failed")
        self.task.cancel()

    def __enter__(self) -> Interrupt:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


async def until_signalled(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` as a task that the first SIGINT/SIGTERM cancels (a second exits at
    once).  A signal's cancellation that ``coro`` did not absorb comes out as
    KeyboardInterrupt, which callers already treat as "interrupted"."""
    task = asyncio.ensure_future(coro)
    interrupt = Interrupt(task)
    with interrupt:
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if interrupt.received and not (current is not None and current.cancelling()):
                raise KeyboardInterrupt from None
            raise
