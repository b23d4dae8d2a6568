"""Search (DESIGN §8): BM25 over Anserini (pyserini's jar), the JVM it runs on, corpora and indexes, embeddings.

Nothing here imports pyserini, jnius or torch at import time; ``boot_jvm`` and the
embedder load them on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .bm25 import BM25Retriever, Hit, Retriever, check_retrieval, open_retriever
    from .config import RetrievalConfig
    from .corpus import (
        build_index,
        demo_index,
        demo_index_path,
        demo_index_ready,
        is_lucene_index,
        validate_corpus,
        write_wiki_corpus,
    )
    from .embeddings import Embedder, MiniLMEmbedder, cosine, encode_fixed, encode_passages, load_mpnet, open_embedder
    from .jvm import boot_jvm, prepare_environment
    from .mpnet_files import check_available
    from .vectors import RERANK_CHARS, passage_text
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "bm25": ("BM25Retriever", "Hit", "Retriever", "check_retrieval", "open_retriever",),
        "config": ("RetrievalConfig",),
        "corpus": (
            "build_index", "demo_index", "demo_index_path", "demo_index_ready", "is_lucene_index", "validate_corpus",
            "write_wiki_corpus",
        ),
        "embeddings": (
            "Embedder", "MiniLMEmbedder", "cosine", "encode_fixed", "encode_passages", "load_mpnet", "open_embedder",
        ),
        "jvm": ("boot_jvm", "prepare_environment",),
        "mpnet_files": ("check_available",),
        "vectors": ("RERANK_CHARS", "passage_text",),
    })

__all__ = [
    "BM25Retriever", "Embedder", "Hit", "MiniLMEmbedder", "RERANK_CHARS", "RetrievalConfig", "Retriever", "boot_jvm",
    "build_index", "check_available", "check_retrieval", "cosine", "demo_index", "demo_index_path",
    "demo_index_ready", "encode_fixed", "encode_passages", "is_lucene_index", "load_mpnet", "open_embedder",
    "open_retriever", "passage_text", "prepare_environment", "validate_corpus", "write_wiki_corpus",
]
