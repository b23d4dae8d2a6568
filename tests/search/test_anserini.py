"""simloop's Anserini searcher against pyserini's own LuceneSearcher on the demo index: the
same hits, scores and stored documents, without the import that cost 5-12 s of CPU
(``simloop/search/anserini.py``; issue 16)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simloop.errors import RetrievalError
from simloop.search import boot_jvm, demo_index
from simloop.search.anserini import AnseriniSearcher

pytestmark = pytest.mark.slow

QUERIES = [
    "bowed string instrument cello",
    "São Paulo",  # non-ASCII, found
    "Zürich café crème brûlée",
    "東京 日本",  # CJK: the analyzer's bigrams
    "war history world people city",  # more than k=1000 hits
    "the of and",  # stopwords only: no hits
    "?",
    "",
]


def _hits(hits: list) -> list[tuple[str, float, int, str]]:
    """Everything a hit carries that simloop reads; scores compared exactly."""
    return [(h.docid, h.score, h.lucene_docid, h.lucene_document.get("raw")) for h in hits]


DOCIDS = ["Cello", "São_Paulo", "Dōgen", "no-such-docid", ""]


def test_search_batch_search_and_doc_match_pyserini(demo_cache: Path, monkeypatch: pytest.MonkeyPatch):
    """One test, not one per query: importing pyserini's searcher costs ~10 s of CPU in
    each test process that does it, and xdist would spread parametrized cases over all
    workers.  Each assertion names its query or docid."""
    index = str(demo_index())
    boot_jvm()  # before pyserini's import, as it must be (jvm.py)
    # pyserini's import builds an OpenAI client, which refuses to exist without a key
    # (simloop never imports pyserini's Python package, so only this comparison needs one).
    monkeypatch.setenv("OPENAI_API_KEY", os.environ.get("OPENAI_API_KEY") or "unused-by-this-test")
    from pyserini.search.lucene import LuceneSearcher

    ours, theirs = AnseriniSearcher(index), LuceneSearcher(index)
    try:
        for query in QUERIES:
            for k in (1, 10, 1000):
                assert _hits(ours.search(query, k)) == _hits(theirs.search(query, k)), (query, k)
        counts = [len(ours.search(q, 1000)) for q in QUERIES]  # the queries cover no hits, some and many
        assert 0 in counts and 1000 in counts and any(0 < c < 1000 for c in counts), counts

        qids = [f"q{i}" for i in range(len(QUERIES))]
        mine, pyserini = ours.batch_search(QUERIES, qids, 50, 2), theirs.batch_search(QUERIES, qids, 50, 2)
        assert sorted(mine) == sorted(pyserini) == sorted(qids)
        for qid, query in zip(qids, QUERIES):
            assert _hits(mine[qid]) == _hits(pyserini[qid]), query
        assert _hits(mine["q0"]) == _hits(ours.search(QUERIES[0], 50))  # batched = one at a time

        for docid in DOCIDS:
            doc, theirs_doc = ours.doc(docid), theirs.doc(docid)
            assert (doc is None) == (theirs_doc is None) == (docid in ("no-such-docid", "")), docid
            if doc is not None:
                assert doc.get("raw") == theirs_doc.raw() and f'"id" : "{docid}"' in doc.get("raw"), docid
    finally:
        ours.close()
        theirs.close()


def test_a_bm25_search_process_imports_no_encoder(demo_cache: Path):
    """A fresh process that boots the backend and searches never imports pyserini's
    Python search package, its encoders or what they pull in; so it needs no OpenAI key."""
    index = demo_index()
    code = ("import asyncio, sys\n"
            "from simloop.search import RetrievalConfig, open_retriever, prepare_environment\n"
            "prepare_environment()\n"
            "async def main():\n"
            f"    r = await open_retriever(RetrievalConfig(index={str(index)!r}))\n"
            "    print((await r.search('bowed string instrument cello', k=3))[0].docid)\n"
            "    await r.aclose()\n"
            "asyncio.run(main())\n"
            "print(*[m in sys.modules for m in ('jnius', 'pyserini.search', 'pyserini.encode', 'sklearn', 'torch')])\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Cello", "True", "False", "False", "False", "False"]


def _old_java() -> Path | None:
    """A Java older than 21 on this machine (the jar's classes need 21)."""
    for home in sorted(Path("/usr/lib/jvm").glob("*1[1-7]*")):
        if (home / "bin" / "java").is_file():
            return home
    return None


def test_a_java_too_old_for_the_jar_fails_at_boot_with_the_hint():
    """The JVM starts on Java 17; the first Anserini class does not load.  That happens
    inside ``boot_jvm`` (which loads one), so the error carries the Java version hint."""
    home = _old_java()
    if home is None:
        pytest.skip("no Java older than 21 under /usr/lib/jvm")
    code = ("from simloop.search import boot_jvm, prepare_environment\n"
            "prepare_environment()\n"
            "try:\n    boot_jvm()\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    env = {**os.environ, "JAVA_HOME": str(home)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.startswith(RetrievalError.__name__ + " cannot start the Java search backend"), out.stderr
    assert "UnsupportedClassVersionError" in out.stdout and "needs Java 21+" in out.stdout
