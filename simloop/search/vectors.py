"""The texts of a corpus that the assistants embed, and filling the vector cache with them
up front (``simloop index build --embeddings``).

Re-ranking embeds the head of each retrieved passage (``passage_text``); the extractive
answer embeds the best sentences of the passages it read (``corpus_sentences`` splits them
the same way).  A run embeds them when it first needs them and keeps them in the vector
cache (``vectorcache.py``) for every later run; ``fill`` embeds all of them at once instead,
for users who would rather pay up front (the demo corpus: 10,033 passages and 36,953
sentences, 10-25 minutes of CPU on 2 cores).  ``fill`` skips what the cache has, so an
interrupted fill goes on where it stopped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..text import sentences, word_count
from .steps import Step
from .vectorcache import VectorCache

__all__ = ["RERANK_CHARS", "SENTENCE_MIN_WORDS", "passage_text", "corpus_passages", "corpus_sentences",
           "encode_blocking", "fill"]

log = logging.getLogger(__name__)

# Re-ranking reads the head of each passage: MiniLM sees at most 256 word pieces anyway, and
# on a CPU its cost grows with the text (100 passages: ~3 s at 300 chars, ~5 s at 1,200).
RERANK_CHARS = 600
# Extractive answers read passages sentence by sentence (parts/generate.py drops fragments
# under 4 words); shorter ones are left to be encoded when asked for.
SENTENCE_MIN_WORDS = 4


def passage_text(title: str, text: str, chars: int = RERANK_CHARS) -> str:
    """The text a passage is embedded as: its title (unless the text starts with it), then its head."""
    return f"{title}\n{text[:chars]}" if title and not text.startswith(title) else text[:chars]


def _documents(files: Iterable[Path]) -> Iterable[dict[str, Any]]:
    for path in files:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)  # validated before indexing


def corpus_passages(files: Iterable[Path], chars: int = RERANK_CHARS) -> list[str]:
    """Every passage of the corpus ``files`` as re-ranking embeds it (distinct texts, in order)."""
    return _passages(_documents(files), chars)


def corpus_sentences(files: Iterable[Path]) -> list[str]:
    """Every distinct sentence (of at least ``SENTENCE_MIN_WORDS`` words) of the passages'
    contents, split as the extractive answer splits a hit's text."""
    return _sentences(_documents(files))


def _passages(docs: Iterable[dict[str, Any]], chars: int = RERANK_CHARS) -> list[str]:
    texts = (passage_text(str(d.get("title") or ""), str(d.get("contents", "")), chars) for d in docs)
    return list(dict.fromkeys(texts))


def _sentences(docs: Iterable[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for doc in docs:
        contents = str(doc.get("contents", ""))
        seen.update((s, None) for s in sentences(contents) if word_count(s) >= SENTENCE_MIN_WORDS)
    return list(seen)


def encode_blocking(model: Any) -> Callable[[list[str]], np.ndarray]:
    """``texts -> normalised float32 rows`` over a sentence model (``search/minilm.py``)."""

    def encode(texts: list[str]) -> np.ndarray:
        return np.asarray(model.encode(texts, batch_size=64, normalize_embeddings=True,
                                       convert_to_numpy=True), dtype=np.float32)
    return encode


def _fill_texts(texts: Sequence[str], what: str, encode: Callable[[list[str]], np.ndarray], cache: VectorCache,
                step: Step, chunk: int) -> int:
    """Encode the ``texts`` the cache lacks, ``chunk`` at a time, shortest first (a chunk of
    similar lengths pads little, and a small one lets the progress move and a stop land
    within seconds); returns how many were encoded."""
    order = sorted(texts, key=len)
    step.note(f"embedding {what}", len(order))
    encoded = 0
    for start in range(0, len(order), chunk):
        step.check()
        part = order[start:start + chunk]
        missing = [t for t, vec in zip(part, cache.lookup(part)) if vec is None]
        if missing:
            cache.store(missing, encode(missing))
            encoded += len(missing)
        step.advance(len(part))
    log.info("%s: %d of %d encoded now, the rest were in the vector cache", what, encoded, len(order))
    return encoded


def fill(files: Sequence[Path], encode: Callable[[list[str]], np.ndarray], cache: VectorCache, step: Step,
         chunk: int = 128) -> tuple[int, int]:
    """Put every passage and every sentence of the corpus ``files`` into ``cache``; returns
    (passages, sentences) in the corpus."""
    docs = list(_documents(files))  # read once for both
    passages, said = _passages(docs), _sentences(docs)
    _fill_texts(passages, "passages", encode, cache, step, chunk)
    _fill_texts(said, "sentences", encode, cache, step, chunk)
    return len(passages), len(said)
