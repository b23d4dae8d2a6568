"""Timing a pipeline stage the same way in every agent (DESIGN §4 ``stages[]``)."""

from __future__ import annotations

import time
from typing import Any

from ..schema import Stage

__all__ = ["timed_stage", "stage_note"]


class timed_stage:
    """Measure a stage and record it as a ``Stage``.

        async with timed_stage("retrieve", stages):   # or a plain ``with``
            hits = await retriever.search(query)

    On exit ``.stage`` holds the record (appended to ``into`` when given).  A failing
    stage is recorded too, with ``error`` set, and the exception propagates.  Extra
    keyword fields (``model``, ``prompt_tokens`` ...) go into the Stage; they can also be
    set on ``.fields`` inside the block once known.
    """

    def __init__(self, name: str, into: list[Stage] | None = None, **fields: Any):
        self.name = name
        self.into = into
        self.fields: dict[str, Any] = dict(fields)
        self.stage: Stage | None = None
        self._start = 0.0

    def __enter__(self) -> timed_stage:
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:  # never swallows
        elapsed = (time.perf_counter() - self._start) * 1000
        error = f"{type(exc).__name__}: {exc}"[:300] if exc is not None else None
        self.stage = Stage(name=self.name, latency_ms=round(elapsed, 3), error=error, **self.fields)
        if self.into is not None:
            self.into.append(self.stage)

    async def __aenter__(self) -> timed_stage:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)


def stage_note(stage: Stage, note: str) -> Stage:
    """The stage with a ``note`` field appended (extra fields are welcome in transcripts):
    what a part did about a model's or a server's answer, e.g. dropping unknown ids."""
    previous = getattr(stage, "note", None)
    return Stage(**{**stage.model_dump(), "note": f"{previous}; {note}" if previous else note})
