"""Usage per role and model: calls, requests, tokens, retries, errors, cost (DESIGN §7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import Stage

__all__ = ["RoleUsage", "Tally", "merge_usage", "sum_stages"]


@dataclass
class RoleUsage:
    """What one role's calls cost, counted as stages come in."""

    model: str
    calls: int = 0  # chat()/structured() attempts, cached or not
    cached: int = 0
    requests: int = 0  # HTTP requests sent, retries included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    errors: int = 0
    cost_usd: float | None = None

    def add(self, stage: Stage) -> None:
        self.calls += 1
        self.cached += stage.cached
        self.errors += stage.error is not None
        self.retries += stage.retries
        if not stage.cached:  # a hit costs nothing and was already counted when it was fetched
            self.prompt_tokens += stage.prompt_tokens
            self.completion_tokens += stage.completion_tokens
            if stage.cost_usd is not None:
                self.cost_usd = (self.cost_usd or 0.0) + stage.cost_usd

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "model"}
        out["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        return out


def merge_usage(rows: Sequence[RoleUsage], model: str) -> RoleUsage:
    """The sum of several roles' usage (by model, or in total)."""
    total = RoleUsage(model)
    for row in rows:
        for name in ("calls", "cached", "requests", "prompt_tokens", "completion_tokens", "retries", "errors"):
            setattr(total, name, getattr(total, name) + getattr(row, name))
        if row.cost_usd is not None:
            total.cost_usd = (total.cost_usd or 0.0) + row.cost_usd
    return total


@dataclass
class Tally:
    """What one call's attempts sent and were billed: every attempt's usage counts, the
    attempts whose answer was rejected (empty, unusable) included; an error status bills nothing."""

    sent: int = 0
    prompt: int = 0
    completion: int = 0

    @property
    def retries(self) -> int:
        return max(0, self.sent - 1)


def _requests(s: Stage) -> int:
    return 0 if s.cached else 1 + s.retries


def sum_stages(a: Stage, b: Stage) -> Stage:
    """A structured call's answer and its repair as one stage.  The repair is one more
    request, so it counts as a retry: a stage stands for 1 + retries requests (none if cached)."""
    requests = _requests(a) + _requests(b)
    cost = None if a.cost_usd is None and b.cost_usd is None else (a.cost_usd or 0.0) + (b.cost_usd or 0.0)
    return a.model_copy(update={
        "prompt_tokens": a.prompt_tokens + b.prompt_tokens,
        "completion_tokens": a.completion_tokens + b.completion_tokens,
        "latency_ms": round(a.latency_ms + b.latency_ms, 3), "retries": max(0, requests - 1),
        "cached": a.cached and b.cached, "cost_usd": cost, "error": b.error or a.error})
