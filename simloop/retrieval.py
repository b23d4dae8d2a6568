"""Retrieval: the Retriever protocol, pyserini BM25 and index building (DESIGN §8).

CONTRACT (kept by every implementation):
    Hit(docid, score, text, title)
    Retriever.search(query, k) -> list[Hit]   async, never blocks the event loop
    Retriever.aclose()
IMPLEMENTATION: to be completed (BM25Retriever, open_retriever, build_index, demo_index).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True, slots=True)
class Hit:
    docid: str
    score: float
    text: str
    title: str = ""


@runtime_checkable
class Retriever(Protocol):
    async def search(self, query: str, k: int = 10) -> list[Hit]: ...

    async def aclose(self) -> None: ...


class RetrievalConfig(BaseModel):
    """``[retrieval]`` in a run config."""

    model_config = ConfigDict(extra="forbid")

    index: Path | None = Field(None, description="Lucene index dir; None = the demo Wikipedia index (built once, cached)")
    k: int = Field(10, ge=1, le=1000)
    max_batch: int = Field(64, ge=1, description="most queries coalesced into one batch_search")
    batch_window_ms: float = Field(2.0, ge=0, description="how long the first query waits for company")
    threads: int = Field(2, ge=1)
