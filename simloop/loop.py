"""The event loop that every simloop entry point runs its coroutines on.

uvloop (libuv under asyncio's API) when it is installed, asyncio's own loop otherwise or
when ``SIMLOOP_EVENT_LOOP=asyncio`` asks for it (to compare, or for a library that needs
asyncio's loop).  At 1,000 dialogues in flight the client is bound by the loop's CPU:
uvloop's C transports and connection setup took 5-10% off the CPU per LLM call at
concurrency 500, and 10-15% where every dialogue also opens its connection (paired runs;
README, Performance).  ``scripts/bench`` runs on this loop and records it.

Code that runs on a loop it did not start (tests, a notebook, ``simloop.arun``) keeps
whatever loop its host chose: nothing here is global.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from importlib.util import find_spec
from typing import Any, TypeVar

from .settings import event_loop

__all__ = ["loop_name", "loop_factory", "run", "running_loop_name"]

T = TypeVar("T")


def loop_name(wanted: str | None = None) -> str:
    """The loop a run gets: ``wanted``, else ``$SIMLOOP_EVENT_LOOP``, else uvloop; asyncio
    where uvloop is not installed (Windows has none)."""
    name = event_loop(wanted)
    if name == "uvloop" and find_spec("uvloop") is None:
        return "asyncio"
    return name


def loop_factory(wanted: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """For ``asyncio.Runner(loop_factory=...)``: None is asyncio's default loop."""
    if loop_name(wanted) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def run(main: Coroutine[Any, Any, T], *, loop: str | None = None) -> T:
    """``asyncio.run(main)`` on the loop :func:`loop_name` picks."""
    try:
        factory = loop_factory(loop)
    except BaseException:
        main.close()  # never awaited: no "coroutine was never awaited" warning on bad input
        raise
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main)
    except RuntimeError as exc:
        # Ctrl-C while the runner closes the loop (a second one, after a run's stop gave the
        # signals back) leaves it "running", and closing it then raises this over the
        # KeyboardInterrupt: report the interrupt, as anywhere else, not a traceback.
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise


def running_loop_name() -> str:
    """The loop this thread runs on (``uvloop`` or ``asyncio``); outside a loop, the one
    :func:`run` would start (the CLI writes ``run.json`` before its loop starts)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return loop_name()
    return "uvloop" if type(loop).__module__.split(".")[0] == "uvloop" else "asyncio"
