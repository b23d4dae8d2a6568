"""The ``[retrieval]`` section of a run config (kept apart so ``simloop.config`` imports no
search machinery)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RetrievalConfig"]


class RetrievalConfig(BaseModel):
    """``[retrieval]`` in a run config."""

    model_config = ConfigDict(extra="forbid")

    index: Path | None = Field(None, description="Lucene index dir; None = the demo Wikipedia index "
                               "(built once, cached)")
    # None: each assistant's own depth (bm25_extractive 10, the LLM agents 20).  Set, it is
    # honoured by every assistant with a ``k`` parameter and rejected by the others
    # (``simloop.run.plugins.load_plugin``), never ignored (DESIGN §6).
    k: int | None = Field(None, ge=1, le=1000, description="passages retrieved per turn; None = the assistant's own")
    max_batch: int = Field(64, ge=1, description="most queries coalesced into one batch_search")
    batch_window_ms: float = Field(2.0, ge=0, description="how long the first query waits for company")
    threads: int = Field(2, ge=1)
    doc_cache: int = Field(8192, ge=0, description="parsed passages kept by the retriever (0: read every hit)")
