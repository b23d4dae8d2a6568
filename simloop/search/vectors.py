"""Passage vectors stored with a Lucene index (``simloop index build --embeddings``).

Re-ranking ~600 retrieved passages per turn with MiniLM costs seconds of CPU; the passages
never change, so their vectors are computed once, when the index is built, and a re-rank
becomes a lookup and a dot product.  Two files inside the index folder (Lucene leaves
files it does not know alone):

- ``minilm-vectors.npy``: float32 (n, 384), L2-normalised rows, memory-mapped when read;
- ``minilm-vectors.json``: ``VectorsMeta`` - model, dim, chars, docids in row order and a
  digest of the exact text each row encodes.

A row is used only when the digest of the text the caller would encode matches, so a
passage whose text differs (another corpus version, another ``chars``) is encoded afresh
instead of being scored with a stale vector.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import DataFileError
from ..files import atomic_open, atomic_write
from ..text import sentences, word_count

__all__ = ["RERANK_CHARS", "VECTORS_FILE", "META_FILE", "VectorsMeta", "PassageVectors", "passage_text",
           "text_digest", "write_vectors", "has_vectors", "SENTENCES_FILE", "SENTENCES_META", "SentencesMeta",
           "SentenceVectors", "write_sentence_vectors", "has_sentence_vectors"]

log = logging.getLogger(__name__)

# Re-ranking reads the head of each passage: MiniLM sees at most 256 word pieces anyway, and
# on a CPU its cost grows with the text (100 passages: ~3 s at 300 chars, ~5 s at 1,200).
RERANK_CHARS = 600
MODEL = "all-MiniLM-L6-v2"
VECTORS_FILE = "minilm-vectors.npy"
META_FILE = "minilm-vectors.json"
SENTENCES_FILE = "minilm-sentences.npy"
SENTENCES_META = "minilm-sentences.json"
# Extractive answers read passages sentence by sentence (parts/generate.py drops fragments
# under 4 words); shorter ones are left to be encoded when asked for.
SENTENCE_MIN_WORDS = 4


class VectorsMeta(BaseModel):
    """``minilm-vectors.json``: what the rows of ``minilm-vectors.npy`` are."""

    model_config = ConfigDict(extra="forbid")

    model: str
    dim: int
    chars: int
    docids: list[str]
    digests: list[str]  # text_digest of the encoded text, row by row


def passage_text(title: str, text: str, chars: int = RERANK_CHARS) -> str:
    """The text a passage is embedded as: its title (unless the text starts with it), then its head."""
    return f"{title}\n{text[:chars]}" if title and not text.startswith(title) else text[:chars]


def text_digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def has_vectors(index_dir: Path) -> bool:
    return (Path(index_dir) / META_FILE).is_file() and (Path(index_dir) / VECTORS_FILE).is_file()


def _corpus_passages(files: Iterable[Path], chars: int) -> tuple[list[str], list[str]]:
    docids, texts = [], []
    for path in files:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    doc = json.loads(line)  # validated before indexing
                    docids.append(str(doc["id"]))
                    texts.append(passage_text(str(doc.get("title") or ""), str(doc.get("contents", "")), chars))
    return docids, texts


def write_vectors(index_dir: Path, files: Sequence[Path], encode: Callable[[list[str]], np.ndarray],
                  chars: int = RERANK_CHARS, chunk: int = 1024) -> int:
    """Embed every passage of the corpus ``files`` with ``encode`` (blocking, normalised rows)
    and store the vectors in ``index_dir``.  The meta file is written last: a folder with
    it has complete vectors.  Returns the number of rows."""
    docids, texts = _corpus_passages(files, chars)
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(np.asarray(encode(texts[start:start + chunk]), dtype=np.float32))
        log.info("embedded %d of %d passages", min(start + chunk, len(texts)), len(texts))
    vectors = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    index_dir = Path(index_dir)
    (index_dir / META_FILE).unlink(missing_ok=True)  # incomplete until the new meta lands
    with atomic_open(index_dir / VECTORS_FILE, "wb") as fh:
        np.save(fh, vectors, allow_pickle=False)
    meta = VectorsMeta(model=MODEL, dim=int(vectors.shape[1]), chars=chars, docids=docids,
                       digests=[text_digest(t) for t in texts])
    atomic_write(index_dir / META_FILE, meta.model_dump_json())
    return len(docids)


class PassageVectors:
    """The stored vectors of one index: ``lookup`` by docid and exact text."""

    def __init__(self, meta: VectorsMeta, vectors: np.ndarray):
        self.meta, self.vectors = meta, vectors
        self.chars = meta.chars
        self._row = {docid: (i, digest) for i, (docid, digest) in enumerate(zip(meta.docids, meta.digests))}

    @classmethod
    def open(cls, index_dir: Path) -> "PassageVectors | None":
        """The vectors stored in ``index_dir``; None when it has none (blocking: reads the meta)."""
        index_dir = Path(index_dir)
        if not has_vectors(index_dir):
            return None
        try:
            meta = VectorsMeta.model_validate_json((index_dir / META_FILE).read_bytes())
            vectors = np.load(index_dir / VECTORS_FILE, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, ValidationError) as exc:
            raise DataFileError(f"{index_dir}: unreadable passage vectors ({exc}); rebuild with --embeddings") from None
        if meta.model != MODEL or vectors.ndim != 2 or vectors.shape != (len(meta.docids), meta.dim) \
                or len(meta.digests) != len(meta.docids):
            log.warning("%s: passage vectors do not match their meta or model; ignoring them", index_dir)
            return None
        return cls(meta, vectors)

    def lookup(self, docid: str, text: str) -> np.ndarray | None:
        """The stored row for ``docid`` when it encodes exactly ``text``, else None."""
        found = self._row.get(docid)
        if found is None or found[1] != text_digest(text):
            return None
        return np.asarray(self.vectors[found[0]], dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row)


def encode_blocking(model: Any) -> Callable[[list[str]], np.ndarray]:
    """``texts -> normalised float32 rows`` over a sentence-transformers model (for index builds).

    An index build embeds tens of thousands of texts (minutes): on a terminal it shows
    sentence-transformers' progress bar on stderr; in a log or a pipe it stays quiet."""
    shown = sys.stderr.isatty()

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=64, show_progress_bar=shown, normalize_embeddings=True,
                                       convert_to_numpy=True), dtype=np.float32)
    return encode


# ---- sentence vectors: the extractive answer embeds the best sentences of the passages it
# read (``parts/generate_focus.py``), about half of the offline demo's MiniLM CPU (issue 16).
# They are stored once, keyed by the digest of the sentence text, so any caller asking for
# exactly that text gets the stored row.


class SentencesMeta(BaseModel):
    """``minilm-sentences.json``: what the rows of ``minilm-sentences.npy`` are."""

    model_config = ConfigDict(extra="forbid")

    model: str
    dim: int
    digests: list[str]  # text_digest of each row's sentence


def has_sentence_vectors(index_dir: Path) -> bool:
    return (Path(index_dir) / SENTENCES_META).is_file() and (Path(index_dir) / SENTENCES_FILE).is_file()


def corpus_sentences(files: Iterable[Path]) -> list[str]:
    """Every distinct sentence (of at least ``SENTENCE_MIN_WORDS`` words) of the passages'
    contents, split as the extractive answer splits a hit's text."""
    seen: dict[str, None] = {}
    for path in files:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    contents = str(json.loads(line).get("contents", ""))
                    seen.update((s, None) for s in sentences(contents) if word_count(s) >= SENTENCE_MIN_WORDS)
    return list(seen)


def write_sentence_vectors(index_dir: Path, files: Sequence[Path], encode: Callable[[list[str]], np.ndarray],
                           chunk: int = 2048) -> int:
    """Embed every sentence of the corpus ``files`` (sorted by length, so each model batch
    pads little) and store them in ``index_dir``; the meta file is written last."""
    texts = sorted(corpus_sentences(files), key=len)
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(np.asarray(encode(texts[start:start + chunk]), dtype=np.float32))
        log.info("embedded %d of %d sentences", min(start + chunk, len(texts)), len(texts))
    vectors = np.concatenate(parts) if parts else np.zeros((0, 384), dtype=np.float32)
    index_dir = Path(index_dir)
    (index_dir / SENTENCES_META).unlink(missing_ok=True)
    with atomic_open(index_dir / SENTENCES_FILE, "wb") as fh:
        np.save(fh, vectors, allow_pickle=False)
    meta = SentencesMeta(model=MODEL, dim=int(vectors.shape[1]), digests=[text_digest(t) for t in texts])
    atomic_write(index_dir / SENTENCES_META, meta.model_dump_json())
    return len(texts)


class SentenceVectors:
    """The stored sentence vectors of one index: ``lookup`` by exact text."""

    def __init__(self, meta: SentencesMeta, vectors: np.ndarray):
        self.vectors = vectors
        self._row = {digest: i for i, digest in enumerate(meta.digests)}

    @classmethod
    def open(cls, index_dir: Path) -> "SentenceVectors | None":
        """The sentence vectors stored in ``index_dir``; None when it has none (blocking)."""
        index_dir = Path(index_dir)
        if not has_sentence_vectors(index_dir):
            return None
        try:
            meta = SentencesMeta.model_validate_json((index_dir / SENTENCES_META).read_bytes())
            vectors = np.load(index_dir / SENTENCES_FILE, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, ValidationError) as exc:
            raise DataFileError(f"{index_dir}: unreadable sentence vectors ({exc}); rebuild with --embeddings") from None
        if meta.model != MODEL or vectors.ndim != 2 or vectors.shape != (len(meta.digests), meta.dim):
            log.warning("%s: sentence vectors do not match their meta or model; ignoring them", index_dir)
            return None
        return cls(meta, vectors)

    def lookup(self, text: str) -> np.ndarray | None:
        row = self._row.get(text_digest(text))
        return None if row is None else np.array(self.vectors[row], dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row)
