"""A scripted ChatModel: the model seam (``Context.chat``), not its internals.

It answers from a list of replies, a function of the messages, or (given neither) a canned
numbered sentence, and returns the real ``ChatResult`` and ``Stage`` objects, so parts run
in tests exactly as they run against a model.  An ``Exception`` in the script is raised
with a ``.stage``, as the real model raises its errors.

Tests read what it was asked (``calls``, ``prompt``).  Benchmarks give it a latency, and a
``CpuMeter`` that it charges with its own CPU so that an engine figure can leave it out;
they turn ``record`` off, as a run keeps no requests.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..llm import ChatResult
from ..schema import Stage
from ..text import count_tokens

__all__ = ["CpuMeter", "ScriptedChat"]

Reply = str | Exception
Messages = Sequence[dict[str, Any]]


class CpuMeter:
    """Main-thread CPU seconds spent inside fakes, and how many calls they answered."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0


class ScriptedChat:
    """``chat`` and ``structured`` as ``ChatModel`` has them, answered from a script.

    ``replies``: a list taken in order (running out is an ``AssertionError``), or a function
    of the messages; ``None`` answers "Scripted ROLE reply number N: ..." forever.
    ``usage``: fixed (prompt, completion) tokens; ``None`` counts them in the messages and
    the reply.  Every call suspends once, for ``latency_s`` plus up to ``jitter_s`` seconds
    (drawn from ``seed``), as a real call always yields to the event loop.
    """

    def __init__(self, replies: Sequence[Reply] | Callable[[list[dict[str, Any]]], Reply] | None = None, *,
                 model: str = "scripted", role: str | None = None, usage: tuple[int, int] | None = None,
                 latency_s: float = 0.0, jitter_s: float = 0.0, seed: int = 0, meter: CpuMeter | None = None,
                 record: bool = True):
        self.replies = replies if replies is None or callable(replies) else list(replies)
        self.model, self.role, self.usage = model, role, usage
        self.latency_s, self.jitter_s, self.meter, self.record = latency_s, jitter_s, meter, record
        self.calls: list[dict[str, Any]] = []
        self._rng = random.Random(seed)
        self._n = 0

    def _next(self, messages: list[dict[str, Any]]) -> Reply:
        if self.replies is None:
            return f"Scripted {self.role or 'chat'} reply number {self._n}: the answer is in the second passage."
        if callable(self.replies):
            return self.replies(messages)
        if not self.replies:
            raise AssertionError("the scripted model ran out of replies")
        return self.replies.pop(0)

    async def _answer(self, messages: Messages, stage: str, **kw: Any) -> tuple[str, Stage]:
        delay = self.latency_s + (self._rng.uniform(0, self.jitter_s) if self.jitter_s else 0.0)
        await asyncio.sleep(delay)
        t0 = time.thread_time()
        try:
            self._n += 1
            copied = [dict(m) for m in messages]
            if self.record:
                self.calls.append({"messages": copied, "stage": stage, **kw})
            reply = self._next(copied)
            if isinstance(reply, Exception):
                reply.stage = Stage(name=stage, model=self.model, role=self.role,  # type: ignore[attr-defined]
                                    error=f"{type(reply).__name__}: {reply}")
                raise reply
            prompt, completion = self.usage or (count_tokens(" ".join(str(m["content"]) for m in copied)),
                                                count_tokens(reply))
            return reply, Stage(name=stage, model=self.model, prompt_tokens=prompt, completion_tokens=completion,
                                latency_ms=round(delay * 1000, 3), role=self.role)
        finally:
            if self.meter is not None:
                self.meter.seconds += time.thread_time() - t0
                self.meter.calls += 1

    async def chat(self, messages: Messages, *, stage: str, **kw: Any) -> ChatResult:
        text, st = await self._answer(messages, stage, **kw)
        return ChatResult(text, [text], st)

    async def structured(self, messages: Messages, schema: type[Any], *, stage: str, **kw: Any) -> tuple[Any, Stage]:
        text, st = await self._answer(messages, stage, schema=schema.__name__, **kw)
        return schema.model_validate_json(text), st

    def prompt(self, i: int = -1) -> str:
        """All message contents of call ``i``, joined."""
        return "\n".join(str(m["content"]) for m in self.calls[i]["messages"])
