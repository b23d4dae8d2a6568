"""Search (DESIGN §8): BM25 over Anserini (pyserini's jar), the JVM it runs on, corpora and indexes, embeddings.

Nothing here imports pyserini, jnius or torch at import time; ``boot_jvm`` and the
embedder load them on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the submodule that defines it.  Loaded on first use (PEP 562), so that what only
# needs ``RetrievalConfig`` (every CLI start, through simloop.config) does not pay for numpy,
# the BM25 client and the embedder: about 0.2 s of each command's start.
_EXPORTS = {
    **dict.fromkeys(["BM25Retriever", "Hit", "Retriever", "open_retriever"], "bm25"),
    "RetrievalConfig": "config",
    **dict.fromkeys(["build_index", "demo_index", "demo_index_ready", "is_lucene_index", "validate_corpus",
                     "write_wiki_corpus"], "corpus"),
    **dict.fromkeys(["Embedder", "MiniLMEmbedder", "cosine", "open_embedder"], "embeddings"),
    **dict.fromkeys(["boot_jvm", "prepare_environment"], "jvm"),
}

__all__ = [
    "Hit", "Retriever", "BM25Retriever", "RetrievalConfig", "open_retriever",
    "build_index", "demo_index", "demo_index_ready", "is_lucene_index", "validate_corpus", "write_wiki_corpus",
    "Embedder", "MiniLMEmbedder", "cosine", "open_embedder",
    "boot_jvm", "prepare_environment",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
