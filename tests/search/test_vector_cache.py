"""The persistent vector cache (issue 35): what an encoder computed is found by later
embedders and runs; damaged entries and files are ignored, never fatal; several processes
write at once; the file stays within its bound; ``fill`` embeds a corpus up front and goes
on where an interrupted fill stopped."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simloop.search.embeddings import MiniLMEmbedder, encode_passages, open_embedder
from simloop.search.encoders import vector_cache
from simloop.search.steps import Step, Stopped
from simloop.search.vectorcache import VectorCache
from simloop.search.vectors import corpus_passages, corpus_sentences, fill
from tests.helpers.cli import simloop_cli
from tests.helpers.data import DOCS as SMALL
from tests.helpers.data import ROOT, write_jsonl
from tests.helpers.models import CountingModel

ID = "test-encoder/v1"


def _cache(tmp_path: Path, encoder_id: str = ID, max_mb: int = 1024) -> VectorCache:
    return VectorCache(tmp_path / "vectors.sqlite", encoder_id, 384, max_mb)


def test_a_stored_vector_is_found_by_its_exact_text_and_encoder(tmp_path: Path):
    cache = _cache(tmp_path)
    vecs = CountingModel().encode(["alpha", "beta"])
    cache.store(["alpha", "beta"], vecs)
    found = cache.lookup(["beta", "alpha ", "alpha", "gamma"])  # "alpha " is another text
    np.testing.assert_array_equal(found[0], vecs[1])
    np.testing.assert_array_equal(found[2], vecs[0])
    assert found[1] is None and found[3] is None
    assert not found[0].flags.writeable  # shared rows: nobody may edit them
    cache.close()
    other = _cache(tmp_path, encoder_id="other-encoder/v1")  # another model's vectors are not these
    assert other.lookup(["alpha"]) == [None]
    other.close()


async def test_a_second_embedder_finds_what_the_first_encoded(tmp_path: Path):
    first_model, second_model = CountingModel(), CountingModel()
    first = MiniLMEmbedder(first_model, vectors=_cache(tmp_path))
    a = await first.encode(["What is gout?", "Porto lies on the Douro."])
    await encode_passages(first, ["Cello\nThe cello is a bowed string instrument."])
    await first.aclose()
    second = MiniLMEmbedder(second_model, vectors=_cache(tmp_path))
    b = await second.encode(["Porto lies on the Douro.", "What is gout?", "A new question?"])
    c = await encode_passages(second, ["Cello\nThe cello is a bowed string instrument."])
    await second.aclose()
    assert second_model.batches == [["A new question?"]]  # only the text nobody had encoded
    assert second.stats["stored_hits"] == 3 and second.stats["texts"] == 1
    np.testing.assert_array_equal(b[:2], a[::-1])
    np.testing.assert_array_equal(c, first_model.encode(["Cello\nThe cello is a bowed string instrument."]))


def _rows(path: Path) -> list[tuple[bytes, int, bytes]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT key, crc, vec FROM vectors ORDER BY id").fetchall()


@pytest.mark.parametrize("damage", ["crc", "short"])
async def test_a_damaged_entry_is_ignored_and_replaced(tmp_path: Path, damage: str):
    path = tmp_path / "vectors.sqlite"
    first = MiniLMEmbedder(CountingModel(), vectors=_cache(tmp_path))
    good = await first.encode(["kept", "damaged"])
    await first.aclose()
    with sqlite3.connect(path) as conn:  # as a bit flip or a cut write would leave it
        key = [k for k, _, vec in _rows(path) if np.array_equal(np.frombuffer(vec, np.float32), good[1])][0]
        change = "crc = crc + 1" if damage == "crc" else "vec = substr(vec, 1, 100)"
        conn.execute(f"UPDATE vectors SET {change} WHERE key = ?", (key,))
    model = CountingModel()
    again = MiniLMEmbedder(model, vectors=_cache(tmp_path))
    vecs = await again.encode(["kept", "damaged"])
    await again.aclose()
    assert model.batches == [["damaged"]]  # the damaged one encoded again, never used
    np.testing.assert_array_equal(vecs, good)
    assert all(len(vec) == 384 * 4 for _, _, vec in _rows(path))  # and stored whole again


async def test_a_broken_cache_file_is_logged_and_the_embedder_goes_on(tmp_path: Path, caplog):
    path = tmp_path / "vectors.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    model = CountingModel()
    embedder = MiniLMEmbedder(model, vectors=_cache(tmp_path))
    vecs = await embedder.encode(["still works"])
    await embedder.encode(["still works, twice"])
    await embedder.aclose()
    np.testing.assert_array_equal(vecs, CountingModel().encode(["still works"]))
    warnings = [r.getMessage() for r in caplog.records if "vector cache" in r.getMessage()]
    assert len(warnings) == 1 and "going on without it" in warnings[0] and str(path) in warnings[0]


_WRITER = """
import sys, numpy as np
from simloop.search.vectorcache import VectorCache
path, me = sys.argv[1], int(sys.argv[2])
cache = VectorCache(path, "test-encoder/v1", 384)
texts = [f"text {i}" for i in range(me * 150, me * 150 + 300)]  # half shared with the next writer
def vec(t):
    v = np.random.default_rng(int(t.split()[1])).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)
for start in range(0, len(texts), 10):
    part = texts[start:start + 10]
    cache.store(part, np.stack([vec(t) for t in part]))
    assert all(v is not None for v in cache.lookup(part)), "a row this writer stored is missing"
cache.close()
print("ok")
"""


def test_concurrent_writers_leave_every_entry_whole(tmp_path: Path):
    path = tmp_path / "vectors.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(i)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    cache = _cache(tmp_path)
    texts = [f"text {i}" for i in range(750)]
    found = cache.lookup(texts)
    cache.close()
    assert all(v is not None for v in found) and cache.stats["ignored"] == 0
    for text, vec in zip(texts, found):
        expected = np.random.default_rng(int(text.split()[1])).standard_normal(384).astype(np.float32)
        np.testing.assert_allclose(vec, expected / np.linalg.norm(expected), rtol=0, atol=0)
    assert len(_rows(path)) == 750  # a text stored by two writers is one row


def test_encoders_that_open_a_new_cache_file_at_once_all_keep_it(tmp_path: Path):
    # A run opens the MiniLM and the PTKB encoders' caches on one new file from two threads;
    # SQLite refuses the switch to WAL mode at once (no busy wait) to all but one of them.
    import threading

    for trial in range(100):
        path = tmp_path / f"v{trial}.sqlite"
        caches = [VectorCache(path, f"encoder-{i}/v1", 4) for i in range(4)]
        start = threading.Barrier(len(caches))

        def first_use(cache: VectorCache, start: threading.Barrier = start) -> None:
            start.wait()
            cache.lookup(["a"])
            cache.store(["a"], np.ones((1, 4), dtype=np.float32))

        threads = [threading.Thread(target=first_use, args=(c,)) for c in caches]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [c.stats["stored"] for c in caches] == [1] * len(caches), f"trial {trial}"
        assert all(c.lookup(["a"])[0] is not None for c in caches)
        for c in caches:
            c.close()
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_cache_drops_its_oldest_vectors_past_its_bound(tmp_path: Path):
    cache = _cache(tmp_path, max_mb=1)
    model = CountingModel()
    texts = [f"sentence number {i}" for i in range(2000)]  # ~3 MB of float32 rows
    for start in range(0, len(texts), 100):
        cache.store(texts[start:start + 100], model.encode(texts[start:start + 100]))
    cache.close()  # a cache that stored something trims when it closes
    again = _cache(tmp_path, max_mb=1)
    assert again.size_bytes() <= 1024 * 1024
    found = again.lookup(texts)
    again.close()
    kept = [i for i, v in enumerate(found) if v is not None]
    assert kept and kept == list(range(kept[0], len(texts)))  # the newest are kept, the oldest went first


DOCS = [{"id": f"d{i}", "title": f"Doc {i}", "contents": f"Doc {i}. The doc number {i} tells a story. It has "
         f"{i} sentences of {i} words each."} for i in range(12)]


class _StopAfter:
    """A progress sink that stops its step after ``n`` advances (as a signal would, mid-fill)."""

    def __init__(self, n: int):
        self.n, self.step = n, Step()
        self.step.progress = self

    def phase(self, label: str, total: int | None = None) -> None:
        pass

    def advance(self, n: int = 1) -> None:
        self.n -= 1
        if self.n <= 0:
            self.step.stop.set()


def test_fill_embeds_a_corpus_up_front_and_goes_on_after_a_stop(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    texts = corpus_passages([corpus]) + corpus_sentences([corpus])
    stopper = _StopAfter(2)
    with pytest.raises(Stopped):
        fill([corpus], CountingModel().encode, _cache(tmp_path), stopper.step, chunk=4)
    partial = _cache(tmp_path)
    assert sum(v is not None for v in partial.lookup(texts)) == 8  # two whole chunks, nothing torn
    partial.close()
    model = CountingModel()
    assert fill([corpus], model.encode, _cache(tmp_path), Step(), chunk=4) == (12, len(texts) - 12)
    assert sum(len(b) for b in model.batches) == len(texts) - 8  # only what the first fill had not done
    done = _cache(tmp_path)
    assert all(v is not None for v in done.lookup(texts))
    done.close()


@pytest.mark.slow
async def test_index_build_with_embeddings_fills_the_cache_that_runs_read(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", SMALL)
    env = {**os.environ, "SIMLOOP_CACHE": str(tmp_path / "cache")}
    p = simloop_cli("index", "build", "--corpus", corpus, "--out", tmp_path / "idx", "--embeddings", env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert p.stdout == (f"indexed {len(SMALL)} documents into {tmp_path / 'idx'}; the MiniLM vectors of its passages "
                        f"and sentences are in {tmp_path / 'cache' / 'vectors.sqlite'}\n")
    texts = corpus_passages([corpus]) + corpus_sentences([corpus])
    model = CountingModel()
    run_side = MiniLMEmbedder(model, vectors=vector_cache("minilm", tmp_path / "cache"))  # as a run's
    stored = await run_side.encode(texts)
    await run_side.aclose()
    assert model.batches == [] and run_side.stats["stored_hits"] == len(set(texts))
    fresh = await open_embedder()  # the real MiniLM, no cache: the stored rows are its vectors
    try:
        vecs = await fresh.encode(texts)
    finally:
        await fresh.aclose()
    assert float((stored * vecs).sum(axis=1).min()) > 0.9999


def _answers(run_dir: Path) -> dict[str, list]:
    """What a transcript says, without ids, times and latencies: per dialogue, each turn's
    utterance, grade, response, passages and PTKB ranking, and how it ended."""
    out = {}
    for line in (run_dir / "dialogues.jsonl").read_text().splitlines():
        t = json.loads(line)
        turns = [(x["user"]["utterance"], x["user"]["grade"], x["assistant"]["response"],
                  x["assistant"]["rewritten_query"], [(p["docid"], p["used"]) for p in x["assistant"]["passages"]],
                  [(p["statement"], p["score"], p["used"]) for p in x["assistant"]["ptkb_provenance"]])
                 for x in t["turns"]]
        out[t["scenario"]["persona_id"] + "/" + t["scenario"]["topic_id"]] = [turns, t["stop"]]
    return out


@pytest.mark.slow
def test_a_run_gives_the_same_transcripts_with_an_empty_or_a_full_vector_cache(tmp_path: Path):
    from tests.helpers.signals import cache_sharing

    cache = cache_sharing(tmp_path / "cache", "index", "corpus", "models")  # the demo index; no vectors
    env = {**os.environ, "SIMLOOP_CACHE": str(cache)}
    args = ["run", "--limit", 6, "--concurrency", 4, "--seed", 11, "--out", tmp_path / "runs", "--no-progress"]
    empty = simloop_cli(*args, "--run-id", "empty", env=env, timeout=600)
    assert empty.returncode == 0, empty.stderr
    rows = len(_rows(cache / "vectors.sqlite"))
    full = simloop_cli(*args, "--run-id", "full", env=env, timeout=600)
    assert full.returncode == 0, full.stderr
    assert len(_rows(cache / "vectors.sqlite")) == rows > 0  # the second run found every vector it needed
    a, b = _answers(tmp_path / "runs" / "empty"), _answers(tmp_path / "runs" / "full")
    assert len(a) == 6 and a == b
