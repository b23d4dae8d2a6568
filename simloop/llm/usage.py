"""Usage per role and model: calls, requests, tokens, retries, errors, cost (DESIGN §7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..schema import Stage

__all__ = ["RoleUsage", "merge_usage"]


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
