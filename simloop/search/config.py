"""The ``[retrieval]`` section of a run config (kept apart so ``simloop.config`` imports no
search machinery)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RetrievalConfig"]


class RetrievalConfig(BaseModel):
    """``[retrieval]`` in a run config."""

    model_config = ConfigDict(extra="forbid")

    index: Path | None = Field(None, description="Lucene index dir; None = the demo Wikipedia index (built once, cached)")
    k: int = Field(10, ge=1, le=1000)
    max_batch: int = Field(64, ge=1, description="most queries coalesced into one batch_search")
    batch_window_ms: float = Field(2.0, ge=0, description="how long the first query waits for company")
    threads: int = Field(2, ge=1)
