"""Search (DESIGN §8): BM25 over Anserini (pyserini's jar), the JVM it runs on, corpora and indexes, embeddings.

Nothing here imports pyserini, jnius or torch at import time; ``boot_jvm`` and the
embedder load them on first use.
"""

from __future__ import annotations

from .bm25 import BM25Retriever, Hit, Retriever, open_retriever
from .config import RetrievalConfig
from .corpus import build_index, demo_index, demo_index_ready, is_lucene_index, validate_corpus, write_wiki_corpus
from .embeddings import Embedder, MiniLMEmbedder, cosine, open_embedder
from .jvm import boot_jvm, prepare_environment

__all__ = [
    "Hit", "Retriever", "BM25Retriever", "RetrievalConfig", "open_retriever",
    "build_index", "demo_index", "demo_index_ready", "is_lucene_index", "validate_corpus", "write_wiki_corpus",
    "Embedder", "MiniLMEmbedder", "cosine", "open_embedder",
    "boot_jvm", "prepare_environment",
]
