"""Per-endpoint request limits: an evenly spaced request throttle and a tokens-per-minute budget.

Both belong to an endpoint (base URL), not to a role: every role calling the same server
shares them, because that is where the server counts.  When several processes call the
same server (the Ray backend), a ``Permit`` replaces the local request throttle: an async
callable ``permit(url, rpm)`` that returns when one request may start, from a token
source shared by all of them.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

from asyncio_throttle import Throttler

__all__ = ["Endpoint", "Permit", "RequestPacer", "TokenWindow"]

# (endpoint url, requests per minute) -> returns when one request to that endpoint may start.
Permit = Callable[[str, float], Awaitable[None]]


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


# The server counts arrivals, we count admissions: 1 % headroom absorbs the difference in
# the time between them (loop lag, network) - 600 ms over a minute, 10 ms over a second.
_HEADROOM = 1.01


def _budget_plan(rpm: float) -> tuple[int, float]:
    """(slots, period): ``slots`` requests per ``period`` s, at most ``rpm`` in any 60 s.

    About one second's worth of slots; among those sizes, the one whose whole number of
    periods per minute loses least of ``rpm`` (exact whenever some size divides it).
    """
    if rpm < 2:  # one slot; a whole number per minute when there is one
        return 1, _HEADROOM * 60.0 / (int(rpm) if rpm >= 1 else rpm)
    top = max(2, int(rpm // 60))
    slots = max(range(max(1, top // 2), top + 1), key=lambda b: (b * int(rpm // b), b))
    return slots, _HEADROOM * 60.0 / int(rpm // slots)


class RequestPacer:
    """Requests per minute on asyncio-throttle: evenly spaced, and ~99 % of the rate in practice.

    One ``Throttler(1, 60/rpm)`` (one request per interval) never bursts, but it stamps
    each request when its acquire() wakes, after polling and loop lag, and never gives
    that time back: at 1,200 rpm it reached 0.94 of the rate (scripts/bench).  So two:
    ``budget`` allows ``slots`` requests per ``period`` (about one second), where a late
    request delays only its own slot, so lateness costs lateness / 1 s instead of
    lateness / 50 ms; ``spacing`` keeps requests at least 0.9 interval apart, so the
    budget never goes out as a burst (at most ~1.1x the rate while catching up).
    A sliding log admits at most ``slots`` per ``period`` and a minute is a whole number
    of periods (plus headroom), so no 60 s window holds more than ``rpm`` requests
    (Throttler(rpm, 60) would hold that limit too, but let a minute's budget out at once).
    """

    def __init__(self, rpm: float):
        slots, period = _budget_plan(rpm)
        gap = 0.9 * 60.0 / rpm
        self.budget = Throttler(rate_limit=slots, period=period, retry_interval=min(0.01, period / 100))
        self.spacing = Throttler(rate_limit=1, period=gap, retry_interval=min(0.01, gap / 10))

    async def acquire(self) -> None:
        await self.spacing.acquire()
        await self.budget.acquire()  # last: its stamps, closest to the send, carry the hard limit


class Endpoint:
    """One base URL: its request throttle and token budget, shared by every role using it."""

    def __init__(self, url: str, rpm: float | None, tpm: int | None, permit: Permit | None = None):
        self.url = url
        self.rpm = rpm
        # A shared permit source already spaces requests across processes; a local throttle
        # on top would only add latency, so it takes the throttle's place.
        self._permit = permit if rpm else None
        # The pacer's throttlers poll every retry_interval, so the lock in front lets only the
        # head of the queue poll: 1,000 waiting dialogues cost one timer.
        self._throttler = RequestPacer(rpm) if rpm and self._permit is None else None
        self._gate = asyncio.Lock()
        self._tokens = TokenWindow(tpm) if tpm else None

    async def admit(self, estimate: int) -> list[float] | None:
        entry = await self._tokens.acquire(estimate) if self._tokens else None
        if self._permit is not None and self.rpm:
            await self._permit(self.url, self.rpm)
        elif self._throttler is not None:
            async with self._gate:
                await self._throttler.acquire()
        return entry

    @staticmethod
    def reconcile(entry: list[float] | None, actual_tokens: int) -> None:
        if entry is not None:
            entry[1] = float(actual_tokens)
