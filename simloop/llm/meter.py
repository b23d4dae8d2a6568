"""What one step of a dialogue billed, even when the step fails (DESIGN §7, §2).

A plugin hands the session its stages only when it returns: a step that raises or is cut
by the dialogue timeout takes the stages of the calls it had finished (and of the call
that failed) with it, though the server billed them.  ``ChatModel`` therefore also files
every stage it makes (answered, failed, cancelled after a request went out, cached) on the
meter of the step it runs in, and the session files that meter's stages when the step
fails.  A context variable, not a parameter: plugins and parts between the session and
the client need not pass it along, and tasks a step starts (``asyncio.gather``) inherit it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..schema import Stage

__all__ = ["metered", "bill"]

_current: ContextVar[list[Stage] | None] = ContextVar("simloop_llm_meter", default=None)


@contextmanager
def metered() -> Iterator[list[Stage]]:
    """Collect, in the yielded list, every stage billed inside the block."""
    stages: list[Stage] = []
    token = _current.set(stages)
    try:
        yield stages
    finally:
        _current.reset(token)


def bill(stage: Stage) -> None:
    """File ``stage`` on the current step's meter (a no-op outside any)."""
    stages = _current.get()
    if stages is not None:
        stages.append(stage)
