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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import DataFileError
from ..files import atomic_open, atomic_write
from ..progress import NO_PROGRESS, ProgressSink
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
    return _has(index_dir, VECTORS_FILE, META_FILE)


# ---- one way to store and open a matrix of rows with its meta (passages and sentences alike)


def _has(index_dir: Path, rows_file: str, meta_file: str) -> bool:
    return (Path(index_dir) / meta_file).is_file() and (Path(index_dir) / rows_file).is_file()


def _encode_all(texts: list[str], encode: Callable[[list[str]], np.ndarray], chunk: int, what: str,
                progress: ProgressSink = NO_PROGRESS) -> np.ndarray:
    """Rows for ``texts`` in their order, encoded ``chunk`` at a time, shortest first: a chunk
    of similar lengths pads little, and a small chunk lets ``progress`` move (it counts texts)."""
    progress.phase(f"embedding {what}", len(texts))
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = None
    for start in range(0, len(texts), chunk):
        rows = order[start:start + chunk]
        vectors = np.asarray(encode([texts[i] for i in rows]), dtype=np.float32)
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
        out[rows] = vectors
        progress.advance(len(rows))
        log.info("embedded %d of %d %s", min(start + chunk, len(texts)), len(texts), what)
    return out if out is not None else np.zeros((0, 384), dtype=np.float32)


def _store(index_dir: Path, rows_file: str, meta_file: str, vectors: np.ndarray, meta: BaseModel) -> None:
    """The rows, then the meta: a folder with the meta file has complete rows."""
    index_dir = Path(index_dir)
    (index_dir / meta_file).unlink(missing_ok=True)  # incomplete until the new meta lands
    with atomic_open(index_dir / rows_file, "wb") as fh:
        np.save(fh, vectors, allow_pickle=False)
    atomic_write(index_dir / meta_file, meta.model_dump_json())


def _open(index_dir: Path, rows_file: str, meta_file: str, meta_type: Any, rows: Callable[[Any], int],
          what: str) -> tuple[Any, np.ndarray] | None:
    """(meta, memory-mapped rows); None when absent or made for another model or shape
    (blocking: reads the meta)."""
    index_dir = Path(index_dir)
    if not _has(index_dir, rows_file, meta_file):
        return None
    try:
        meta = meta_type.model_validate_json((index_dir / meta_file).read_bytes())
        vectors = np.load(index_dir / rows_file, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, ValidationError) as exc:
        raise DataFileError(f"{index_dir}: unreadable {what} ({exc}); rebuild with --embeddings") from None
    if meta.model != MODEL or vectors.ndim != 2 or vectors.shape != (rows(meta), meta.dim):
        log.warning("%s: %s do not match their meta or model; ignoring them", index_dir, what)
        return None
    return meta, vectors


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
                  chars: int = RERANK_CHARS, chunk: int = 256, progress: ProgressSink = NO_PROGRESS) -> int:
    """Embed every passage of the corpus ``files`` with ``encode`` (blocking, normalised rows)
    and store the vectors in ``index_dir``.  The meta file is written last: a folder with
    it has complete vectors.  Returns the number of rows."""
    docids, texts = _corpus_passages(files, chars)
    vectors = _encode_all(texts, encode, chunk, "passages", progress)
    meta = VectorsMeta(model=MODEL, dim=int(vectors.shape[1]), chars=chars, docids=docids,
                       digests=[text_digest(t) for t in texts])
    _store(index_dir, VECTORS_FILE, META_FILE, vectors, meta)
    return len(docids)


class PassageVectors:
    """The stored vectors of one index: ``lookup`` by docid and exact text."""

    def __init__(self, meta: VectorsMeta, vectors: np.ndarray):
        self.meta, self.vectors = meta, vectors
        self.chars = meta.chars
        self._row = {docid: (i, digest) for i, (docid, digest) in enumerate(zip(meta.docids, meta.digests))}

    @classmethod
    def open(cls, index_dir: Path) -> PassageVectors | None:
        """The vectors stored in ``index_dir``; None when it has none (blocking: reads the meta)."""
        # A meta whose docids and digests disagree in length matches no shape (-1): ignored too.
        found = _open(index_dir, VECTORS_FILE, META_FILE, VectorsMeta,
                      lambda m: len(m.docids) if len(m.digests) == len(m.docids) else -1, "passage vectors")
        return None if found is None else cls(*found)

    def lookup(self, docid: str, text: str) -> np.ndarray | None:
        """The stored row for ``docid`` when it encodes exactly ``text``, else None."""
        found = self._row.get(docid)
        if found is None or found[1] != text_digest(text):
            return None
        return np.asarray(self.vectors[found[0]], dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row)


def encode_blocking(model: Any) -> Callable[[list[str]], np.ndarray]:
    """``texts -> normalised float32 rows`` over MiniLM (``search/minilm.py``; for index builds,
    whose progress ``_encode_all`` reports, chunk by chunk)."""

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=64, normalize_embeddings=True,
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
    return _has(index_dir, SENTENCES_FILE, SENTENCES_META)


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
                           chunk: int = 256, progress: ProgressSink = NO_PROGRESS) -> int:
    """Embed every sentence of the corpus ``files`` (sorted by length, so each model batch
    pads little) and store them in ``index_dir``; the meta file is written last."""
    texts = sorted(corpus_sentences(files), key=len)
    vectors = _encode_all(texts, encode, chunk, "sentences", progress)
    meta = SentencesMeta(model=MODEL, dim=int(vectors.shape[1]), digests=[text_digest(t) for t in texts])
    _store(index_dir, SENTENCES_FILE, SENTENCES_META, vectors, meta)
    return len(texts)


class SentenceVectors:
    """The stored sentence vectors of one index: ``lookup`` by exact text."""

    def __init__(self, meta: SentencesMeta, vectors: np.ndarray):
        self.vectors = vectors
        self._row = {digest: i for i, digest in enumerate(meta.digests)}

    @classmethod
    def open(cls, index_dir: Path) -> SentenceVectors | None:
        """The sentence vectors stored in ``index_dir``; None when it has none (blocking)."""
        found = _open(index_dir, SENTENCES_FILE, SENTENCES_META, SentencesMeta, lambda m: len(m.digests),
                      "sentence vectors")
        return None if found is None else cls(*found)

    def lookup(self, text: str) -> np.ndarray | None:
        row = self._row.get(text_digest(text))
        return None if row is None else np.array(self.vectors[row], dtype=np.float32)

    def __len__(self) -> int:
        return len(self._row)
