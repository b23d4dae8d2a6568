"""Retrieval: the Retriever protocol and Anserini BM25 with micro-batching.

CONTRACT (kept by every implementation):
    Hit(docid, score, text, title)
    Retriever.search(query, k) -> list[Hit]   async, never blocks the event loop
    Retriever.aclose()

Nothing here starts Java at import: ``jvm.boot_jvm()`` does, once, when a retriever is
opened or an index built.  Corpus validation, index building and the demo index live
in ``corpus.py``; the Java searcher's wrapper (pyserini's, minus its import) in ``anserini.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, IndexMissingError, RetrievalError, SimloopError
from ..files import folder_problem
from ..progress import NO_PROGRESS, ProgressSink
from ..schema import Hit
from ..settings import cache_named, cache_root
from .anserini import AnseriniSearcher, java_error
from .batching import dispatcher, fail, stop, waiting
from .config import RetrievalConfig
from .demo import demo_index, demo_index_path
from .indexing import is_lucene_index
from .jvm import boot_jvm, check_jvm, check_jvm_options
from .steps import off_loop

__all__ = ["Hit", "Retriever", "CountsTerms", "BM25Retriever", "open_retriever", "check_retrieval"]

log = logging.getLogger(__name__)


@runtime_checkable
class Retriever(Protocol):
    """Passage search: ``search`` never blocks the event loop; ``aclose`` releases the backend."""

    async def search(self, query: str, k: int = 10) -> list[Hit]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class CountsTerms(Protocol):
    """A retriever that can say how many documents hold a word (after its own analysis:
    stemming, stop words), for spelling checks against the index's vocabulary."""

    async def doc_freq(self, words: Sequence[str]) -> dict[str, int]: ...


_HOW_TO_BUILD = (
    "build one with `simloop index build --corpus FILE.jsonl --out DIR`, "
    "or leave retrieval.index unset for the demo index"
)

# --------------------------------------------------------------------------- searching


def _to_hit(docid: str, score: float, raw: str | None) -> Hit:
    """``-storeRaw`` keeps the JsonCollection line; other indexes may have no raw text."""
    if not raw:
        return Hit(docid, float(score), "")
    try:
        doc = json.loads(raw)
    except ValueError:
        return Hit(docid, float(score), raw)
    if not isinstance(doc, dict):
        return Hit(docid, float(score), raw)
    return Hit(docid, float(score), str(doc.get("contents", "")), str(doc.get("title", "") or ""))


@dataclass
class _Request:
    query: str
    k: int
    future: asyncio.Future
    queued_at: float


class BM25Retriever:
    """Anserini BM25 over one Lucene index, with micro-batching.

    All Java calls run on one dedicated worker thread (one attached thread keeps pyjnius
    simple).  Concurrent ``search`` calls are coalesced: the first waits up to
    ``batch_window_ms`` (or until ``max_batch`` are queued) and the group goes into one
    ``batch_search``.  Queries arriving while a batch runs form the next batch.
    Used from one event loop at a time.
    """

    def __init__(self, index_dir: Path, cfg: RetrievalConfig | None = None):
        self.index_dir = Path(index_dir)
        if not is_lucene_index(self.index_dir):
            raise IndexMissingError(f"{self.index_dir}: not a Lucene index; {_HOW_TO_BUILD}")
        self.cfg = cfg or RetrievalConfig(index=self.index_dir)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simloop-bm25")
        self._searcher: Any = None  # created on the worker thread
        self._pending: list[_Request] = []
        self._dispatcher: asyncio.Task | None = None
        self._wake: asyncio.Future | None = None
        self._closed = False
        # Counters for tests and benchmarks; written on the worker thread only.
        self.stats = {"single_calls": 0, "batch_calls": 0, "queries": 0, "doc_reads": 0}
        self._docs: dict[int, Hit] = {}  # parsed stored documents by Lucene docid (worker thread only)
        self._reader: Any = None  # Lucene IndexReader for term counts (worker thread only)

    # ---- worker-thread side

    def _open(self) -> Any:
        if self._searcher is None:
            boot_jvm()
            self._searcher = AnseriniSearcher(str(self.index_dir))
        return self._searcher

    def _run(self, queries: list[str], k: int) -> list[list[Hit]]:
        searcher = self._open()
        self.stats["queries"] += len(queries)
        if len(queries) == 1:
            self.stats["single_calls"] += 1
            groups = [searcher.search(queries[0], k)]
        else:
            self.stats["batch_calls"] += 1
            qids = [str(i) for i in range(len(queries))]
            found = searcher.batch_search(queries, qids, k, self.cfg.threads)
            groups = [found.get(q, []) for q in qids]
        return [[self._hit(h) for h in hits] for hits in groups]

    def _hit(self, h: Any) -> Hit:
        # Reading a hit's stored document from Python costs ~60-90 us (a pyjnius proxy for
        # the Document, the "raw" string, json.loads): as much as the Java search of the
        # whole query.  The same passages come back turn after turn, so their parsed text
        # is kept by Lucene docid (fixed while this searcher is open); score and docid are
        # plain fields, read per hit.
        key = h.lucene_docid
        doc = self._docs.get(key)
        if doc is None:
            self.stats["doc_reads"] += 1
            raw = h.lucene_document.get("raw") if h.lucene_document is not None else None
            doc = self._docs[key] = _to_hit(h.docid, 0.0, raw)
            if len(self._docs) > self.cfg.doc_cache:
                del self._docs[next(iter(self._docs))]  # the oldest read: FIFO is enough here
        return Hit(doc.docid, float(h.score), doc.text, doc.title)

    def _doc(self, docid: str) -> Hit | None:
        doc = self._open().doc(docid)
        return None if doc is None else _to_hit(docid, 0.0, doc.get("raw"))

    def _doc_freq(self, words: list[str]) -> dict[str, int]:
        self._open()
        from jnius import autoclass

        utils = autoclass("io.anserini.index.IndexReaderUtils")
        if self._reader is None:
            self._reader = utils.getReader(str(self.index_dir))
        out: dict[str, int] = {}
        for word in words:
            try:
                out[word] = int(utils.getTermCounts(self._reader, word).get("docFreq") or 0)
            except Exception:  # a word the analyser drops whole (a stop word) has no term to count
                out[word] = 0
        return out

    def _shutdown(self) -> None:
        if self._searcher is None:
            return  # never opened: this thread never attached to the JVM
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._searcher.close()
        self._searcher = None
        import jnius

        jnius.detach()  # a native thread must detach before it exits

    async def _call(self, fn: Any, *args: Any) -> Any:
        if self._closed:
            raise RetrievalError("the retriever is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except SimloopError:
            raise
        except Exception as exc:  # JavaException, OSError ...
            raise RetrievalError(f"BM25 search on {self.index_dir} failed: {java_error(exc)}") from exc

    # ---- event-loop side

    async def start(self) -> None:
        """Open the index now (on the worker), so the first search does not pay for it."""
        await self._call(self._open)

    async def search(self, query: str, k: int = 10) -> list[Hit]:
        if self._closed:
            raise RetrievalError("the retriever is closed")
        loop = asyncio.get_running_loop()
        request = _Request(query, k, loop.create_future(), loop.time())
        self._pending.append(request)
        running = self._dispatcher
        self._dispatcher = dispatcher(running, self._dispatch)
        if self._dispatcher is running and len(self._pending) >= self.cfg.max_batch and self._wake is not None \
                and not self._wake.done():
            self._wake.set_result(None)
        return await request.future

    async def _wait_for_company(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = self._pending[0].queued_at + self.cfg.batch_window_ms / 1000
        if len(self._pending) >= self.cfg.max_batch or loop.time() >= deadline:
            return
        self._wake = loop.create_future()
        try:
            await asyncio.wait([self._wake], timeout=deadline - loop.time())
        finally:
            self._wake = None

    async def _dispatch(self) -> None:
        batch: list[_Request] = []
        try:
            while self._pending:
                await self._wait_for_company()
                batch = [r for r in self._pending[: self.cfg.max_batch] if waiting(r)]
                del self._pending[: self.cfg.max_batch]
                if batch:
                    await self._deliver(batch)
                batch = []
        except asyncio.CancelledError:
            fail(batch + self._pending, RetrievalError("the retriever was closed during a search"))
            self._pending.clear()
            raise

    async def _deliver(self, batch: list[_Request]) -> None:
        k = max(r.k for r in batch)
        try:
            results = await self._call(self._run, [r.query for r in batch], k)
        except RetrievalError as exc:
            fail(batch, exc)
            return
        for request, hits in zip(batch, results):
            if not request.future.done():
                request.future.set_result(hits[: request.k])

    async def search_many(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Many queries at once (one ``batch_search``), bypassing the coalescing window."""
        if not queries:
            return []
        return await self._call(self._run, list(queries), k)

    async def doc(self, docid: str) -> Hit | None:
        """The stored document (score 0), or None when the index has no such docid."""
        return await self._call(self._doc, docid)

    async def doc_freq(self, words: Sequence[str]) -> dict[str, int]:
        """How many documents hold each word, as the index analyses it ("Mosquitoes" counts
        "mosquito"); 0 for a word it never saw or drops (a stop word)."""
        return await self._call(self._doc_freq, list(words)) if words else {}

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        stop(self._dispatcher, self._pending, RetrievalError("the retriever is closed"))
        try:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._shutdown)
        finally:
            self._executor.shutdown(wait=False)


def _named_index(named: Path) -> Path:
    index = Path(named).expanduser()
    if not is_lucene_index(index):
        what = "does not exist" if not index.exists() else "is not a Lucene index"
        raise IndexMissingError(f"retrieval index {index} {what}; {_HOW_TO_BUILD}")
    return index


def check_retrieval(cfg: RetrievalConfig, start_java: bool = True) -> None:
    """What opening a retriever for ``cfg`` needs, checked before a run writes anything:
    the index (or the demo index's cache folder), Java starting (``SIMLOOP_JVM_OPTIONS``)
    and Lucene opening the index.  Each failure is one BadInputError line, never a Java
    stack trace.  Java stays up for the run (it would start at warm-up anyway); opening
    the index once more costs a few ms.  A demo index not built yet is built at warm-up.
    ``start_java=False`` (a Ray driver, which never searches: its workers do) checks the
    paths and the options (``java -version``) only."""
    if cfg.index is not None:
        index: Path | None = _named_index(cfg.index)
    else:
        root = cache_root()
        problem = folder_problem(root)
        if problem is not None:
            raise ConfigError(f"{cache_named(root)}: {problem}; the demo index is kept there")
        index = demo_index_path() if is_lucene_index(demo_index_path()) else None
    if not start_java:
        check_jvm_options()
        return
    check_jvm()
    if index is None:
        return
    try:
        AnseriniSearcher(str(index)).close()
    except Exception as exc:  # JavaException: a damaged index, or one of another Lucene version
        raise IndexMissingError(f"{index}: Lucene cannot open this index ({java_error(exc)}); "
                                f"rebuild it with `simloop index build`") from None


async def open_retriever(cfg: RetrievalConfig | None = None, progress: ProgressSink = NO_PROGRESS) -> BM25Retriever:
    """A started BM25 retriever for ``cfg.index`` (None = the cached demo index, built on
    first use: ``progress`` hears what that waits for; cancelled, the build stops cleanly)."""
    cfg = cfg or RetrievalConfig()
    if cfg.index is None:
        index = await off_loop(lambda step: demo_index(step=step), progress=progress)
    else:
        index = _named_index(cfg.index)
    await asyncio.to_thread(boot_jvm)  # ~1 s of Java start: keep the loop responsive
    retriever = BM25Retriever(index, cfg)
    await retriever.start()
    return retriever
