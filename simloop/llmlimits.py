"""Per-endpoint request limits: an evenly spaced request throttle and a tokens-per-minute budget.

Both belong to an endpoint (base URL), not to a role: every role calling the same server
shares them, because that is where the server counts.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from asyncio_throttle import Throttler

__all__ = ["Endpoint", "TokenWindow"]


class TokenWindow:
    """Tokens-per-minute budget over a sliding 60 s window.

    A request is admitted on its estimate (prompt chars / 4) and its entry is corrected to
    the real usage afterwards, so estimation errors do not accumulate.  A request larger
    than the whole budget is admitted alone rather than blocking forever.
    """

    def __init__(self, tpm: int, window_s: float = 60.0):
        self.tpm, self.window_s = tpm, window_s
        self._log: deque[list[float]] = deque()  # [admitted_at, tokens]
        self._lock = asyncio.Lock()  # FIFO: one waiter computes, the rest queue behind it

    async def acquire(self, estimate: int) -> list[float]:
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._log and now - self._log[0][0] >= self.window_s:
                    self._log.popleft()
                used = sum(entry[1] for entry in self._log)
                if not self._log or used + estimate <= self.tpm:
                    break
                await asyncio.sleep(self._log[0][0] + self.window_s - now + 0.005)
            entry = [now, float(estimate)]
            self._log.append(entry)
            return entry


class Endpoint:
    """One base URL: its request throttle and token budget, shared by every role using it."""

    def __init__(self, url: str, rpm: float | None, tpm: int | None):
        self.url = url
        # asyncio-throttle admits ``rate_limit`` acquisitions per ``period``.  Throttler(rpm, 60)
        # would let a whole minute's budget out in one burst at start-up, which trips servers
        # that enforce the limit over shorter windows; rate_limit=1, period=60/rpm spaces
        # requests evenly instead.  Its acquire() polls every retry_interval, so the lock in
        # front lets only the head of the queue poll: 1,000 waiting dialogues cost one timer.
        self._throttler = (
            Throttler(rate_limit=1, period=60.0 / rpm, retry_interval=min(0.01, 6.0 / rpm)) if rpm else None
        )
        self._gate = asyncio.Lock()
        self._tokens = TokenWindow(tpm) if tpm else None

    async def admit(self, estimate: int) -> list[float] | None:
        entry = await self._tokens.acquire(estimate) if self._tokens else None
        if self._throttler is not None:
            async with self._gate:
                await self._throttler.acquire()
        return entry

    @staticmethod
    def reconcile(entry: list[float] | None, actual_tokens: int) -> None:
        if entry is not None:
            entry[1] = float(actual_tokens)
