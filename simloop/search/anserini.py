"""Anserini's BM25 searcher called through pyjnius, without pyserini's Python package.

pyserini's ``LuceneSearcher`` is a thin wrapper over the Java class
``io.anserini.search.SimpleSearcher`` in the Anserini jar pyserini ships.  Importing it
costs far more than the search: ``pyserini.search.lucene`` imports its impact searcher,
which imports ``pyserini.encode`` (torch, transformers, scikit-learn, pandas, openai):
5-12 s of CPU in a process whose JVM starts in 0.2 s, none of it used by BM25, paid by
every ``simloop run`` with BM25 and every test process that searches.  (Measured: a fresh
process that boots Java, opens the demo index and runs one query took 11.8-13.2 s of CPU
through pyserini's searcher, 2.5-2.9 s through this one; load 2.5-2.9 on 2 cores.)  This
class makes the same Java calls on the same jar and index (see pyserini 1.6.0's
``search/lucene/_searcher.py``), so docids, scores and stored documents are identical;
``tests/test_anserini.py`` checks them against ``LuceneSearcher`` itself.

What it leaves out: pyserini's second index reader (opened for prebuilt-index checks
only), query generators, field boosts, RM3/Rocchio and the duplicate filtering that is
off by default.  The scoring stays Anserini's default, BM25 with k1=0.9, b=0.4 (what
pyserini's ``set_bm25`` defaults to as well).

Call ``jvm.boot_jvm()`` first: the JVM must be running with the jar on its classpath.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["AnseriniSearcher", "SEARCHER_CLASS", "java_error"]

# The Java class pyserini's LuceneSearcher wraps; jvm.boot_jvm loads it to check the Java version.
SEARCHER_CLASS = "io.anserini.search.SimpleSearcher"


def java_error(exc: BaseException) -> str:
    """One line for an exception out of Java: its class and message, without the stack
    trace pyjnius puts in ``str()`` (a dozen lines no user needs on stderr)."""
    inner = getattr(exc, "innermessage", None)
    classname = getattr(exc, "classname", None)
    if classname:
        return f"{classname.rpartition('.')[2]}: {' '.join(str(inner or '').split())}".rstrip(": ")
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class AnseriniSearcher:
    """``search``, ``batch_search``, ``doc`` and ``close`` of pyserini's ``LuceneSearcher``;
    hits are Anserini's ``ScoredDoc`` objects (``docid``, ``score``, ``lucene_docid``,
    ``lucene_document``), documents Lucene's ``Document`` (``get("raw")``)."""

    def __init__(self, index_dir: str):
        from jnius import autoclass

        self._array_list = autoclass("java.util.ArrayList")
        self.object = autoclass(SEARCHER_CLASS)(str(index_dir))

    def search(self, q: str, k: int = 10) -> list[Any]:
        return list(self.object.search(q, int(k)))

    def batch_search(self, queries: Sequence[str], qids: Sequence[str], k: int = 10,
                     threads: int = 1) -> dict[str, list[Any]]:
        """Hits by qid; Anserini runs the queries on ``threads`` Java threads."""
        results = self.object.batch_search(self._strings(queries), self._strings(qids), int(k), int(threads))
        return {entry.getKey(): list(entry.getValue()) for entry in results.entrySet().toArray()}

    def doc(self, docid: str) -> Any | None:
        """The stored Lucene document of an external docid, or None."""
        return self.object.doc(docid)

    def close(self) -> None:
        self.object.close()

    def _strings(self, values: Sequence[str]) -> Any:
        # SimpleSearcher.batch_search takes java.util.List<String>: pyjnius converts each
        # str on ``add``, as pyserini's own batch_search does.
        strings = self._array_list()
        for value in values:
            strings.add(value)
        return strings
