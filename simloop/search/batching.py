"""What the two micro-batchers (BM25 searches, MiniLM encodes) share: requests queued with
a future, one dispatcher task per event loop, and failing what can no longer be answered."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

__all__ = ["Request", "waiting", "fail", "dispatcher", "stop"]


class Request(Protocol):
    future: asyncio.Future


def waiting(request: Request) -> bool:
    """Still worth answering: not cancelled, and from the loop running now (a request
    left behind by an earlier, closed loop can never be delivered)."""
    future = request.future
    return not future.done() and future.get_loop() is asyncio.get_running_loop()


def fail(requests: Sequence[Request], exc: Exception) -> None:
    for request in requests:
        if waiting(request):
            request.future.set_exception(exc)


def dispatcher(task: asyncio.Task | None, run: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task:
    """``task`` when it still dispatches on the running loop, else a new one running ``run()``
    (the one before ended, or belonged to a loop that is gone)."""
    loop = asyncio.get_running_loop()
    if task is None or task.done() or task.get_loop() is not loop:
        task = loop.create_task(run())
    return task


def stop(task: asyncio.Task | None, requests: list, exc: Exception) -> None:
    """Cancel the dispatcher and fail every request still queued (on close)."""
    if task is not None and not task.done():
        task.cancel()
    fail(requests, exc)
    requests.clear()
