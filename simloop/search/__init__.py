"""Search: BM25 over Anserini (pyserini's jar), the JVM it runs on, corpora and indexes, embeddings
and their persistent vector cache.

Nothing here imports pyserini, jnius or torch at import time; ``boot_jvm`` and the
embedder load them on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .bm25 import BM25Retriever, CountsTerms, Hit, Retriever, check_retrieval, open_retriever
    from .config import RetrievalConfig
    from .corpus import validate_corpus, write_wiki_corpus
    from .demo import demo_index, demo_index_path, demo_index_ready
    from .embeddings import Embedder, MiniLMEmbedder, cosine, encode_fixed, encode_passages, open_embedder
    from .encoders import english_words, load_mpnet, vector_cache
    from .indexing import build_index, is_lucene_index
    from .jvm import boot_jvm, prepare_environment
    from .mpnet_files import check_available
    from .steps import NOTE_AFTER_S
    from .vectorcache import VectorCache
    from .vectors import RERANK_CHARS, passage_text
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "bm25": ("BM25Retriever", "CountsTerms", "Hit", "Retriever", "check_retrieval", "open_retriever",),
        "config": ("RetrievalConfig",),
        "corpus": ("validate_corpus", "write_wiki_corpus",),
        "demo": ("demo_index", "demo_index_path", "demo_index_ready",),
        "embeddings": ("Embedder", "MiniLMEmbedder", "cosine", "encode_fixed", "encode_passages", "open_embedder",),
        "encoders": ("english_words", "load_mpnet", "vector_cache",),
        "indexing": ("build_index", "is_lucene_index",),
        "jvm": ("boot_jvm", "prepare_environment",),
        "mpnet_files": ("check_available",),
        "vectorcache": ("VectorCache",),
        "vectors": ("RERANK_CHARS", "passage_text",),
        "steps": ("NOTE_AFTER_S",),
    })

__all__ = [
    "BM25Retriever", "CountsTerms", "Embedder", "Hit", "MiniLMEmbedder", "NOTE_AFTER_S", "RERANK_CHARS",
    "RetrievalConfig", "Retriever", "VectorCache", "boot_jvm", "build_index", "check_available", "check_retrieval",
    "cosine", "demo_index", "demo_index_path", "demo_index_ready", "encode_fixed", "encode_passages", "english_words",
    "is_lucene_index", "load_mpnet", "open_embedder", "open_retriever", "passage_text", "prepare_environment",
    "validate_corpus", "vector_cache", "write_wiki_corpus",
]
