"""Every preparation step stops on a signal (issue 35, DESIGN §12): writing the demo corpus,
building an index (Anserini in a child JVM), embedding a corpus up front, unpacking MPNet,
and waiting for another process's lock.  Each trial is a real command in a subprocess, sent
SIGINT or SIGTERM at a seeded moment inside the step; it must exit 130 (within 10 s: the
subprocess timeout, a hang guard), print no traceback, leave no scratch folder, temp file,
half-built index, half-unpacked model, torn cache entry or indexer process behind, and the
next command must do the step from the start and finish.

The first runs use a cache of their own (nothing shared with the suite's: they build and
unpack), removed at the end (the unpacked model takes ~900 MB)."""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simloop.search import demo_index_path, is_lucene_index
from simloop.search.steps import lock_holder
from simloop.search.vectors import corpus_passages, corpus_sentences
from tests.helpers.data import ROOT, write_jsonl
from tests.helpers.signals import Proc, Trial, cache_sharing, chain, leftovers, table

SEED = 35
WIKI_DOCS = 10033


def _whole(cache: Path) -> None:
    """What a stopped first run may leave in its cache: complete things only."""
    assert leftovers(cache) == []
    for index in (cache / "index").glob("wiki-*"):
        assert is_lucene_index(index), f"{index}: a folder that is not a whole index"
    for corpus in (cache / "corpus").glob("*.jsonl"):
        lines = corpus.read_text().splitlines()
        assert len(lines) == WIKI_DOCS and json.loads(lines[-1])["id"]
    model = cache / "models" / "all-mpnet-base-v2"
    assert not model.exists() or (model / ".verified").is_file(), "a half-unpacked model"


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_a_first_run_stops_while_it_builds_the_demo_index_or_unpacks_mpnet(tmp_path: Path):
    rng = random.Random(SEED)
    cache = tmp_path / "cache"
    cache.mkdir()
    start = ["run", "--personas", str(ROOT / "personas"), "--limit", "2", "--max-turns", "2",
             "--out", str(tmp_path / "runs"), "--run-id", "r", "--no-progress"]
    plan = [("demo index build", signal.SIGTERM), ("demo index build", signal.SIGINT),
            ("model unpack", signal.SIGINT), ("model unpack", signal.SIGTERM)]
    try:
        trials = chain(tmp_path, start, plan, 2, rng, env={"SIMLOOP_CACHE": str(cache)},
                       after_stop=lambda trial: _whole(cache))
    finally:
        shutil.rmtree(cache / "models", ignore_errors=True)
    print("\n" + table("first run: demo index build and MPNet unpack", trials))


_HOLDER = """
import sys, time
from pathlib import Path
from simloop.search.steps import Step, held_lock
with held_lock(Path(sys.argv[1]), "building the demo index", Step()):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_a_run_waiting_for_another_process_names_it_stops_and_later_builds(tmp_path: Path):
    cache = cache_sharing(tmp_path / "cache", "corpus", "models")  # its own index folder: none built yet
    lock = demo_index_path(cache).parent / f".{demo_index_path(cache).name}.lock"
    env = {"SIMLOOP_CACHE": str(cache)}
    start = ["run", "--personas", str(ROOT / "personas"), "--limit", "1", "--max-turns", "1",
             "--out", str(tmp_path / "runs"), "--no-progress"]
    with subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], cwd=ROOT, stdout=subprocess.PIPE,
                          text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == "held"
            proc = Proc(start, tmp_path, "waiting", env)
            proc.wait_for(f"simloop: waiting for process {holder.pid}, which is building the demo index (lock {lock})")
            time.sleep(random.Random(SEED).uniform(0.0, 1.0))
            code = proc.stop(signal.SIGINT)
            assert code == 130 and "Traceback" not in proc.stderr(), proc.stderr()
            assert holder.poll() is None and lock_holder(lock).pid == holder.pid  # the holder's lock untouched
        finally:
            holder.kill()  # as a crash would: the lock goes with the process, its side file stays
    assert leftovers(cache) == []
    after = Proc(start, tmp_path, "after", env)  # the lock is free: this one builds the index
    assert after.p.wait(timeout=600) == 0, after.stderr()[-3000:]
    assert "building the demo index" in after.stderr() and "waiting for" not in after.stderr()
    assert is_lucene_index(demo_index_path(cache))


def _rows(vectors: Path) -> int:
    """Rows in a vector cache another process is writing (0 before it has any)."""
    try:
        with sqlite3.connect(f"file:{vectors}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    except sqlite3.Error:
        return 0


def _stopped(proc: Proc, sig: signal.Signals, moment: str, trials: list[Trial]) -> None:
    trial = Trial(moment, sig.name)
    t0 = time.monotonic()
    trial.exit_code = proc.stop(sig)
    trial.exit_s = time.monotonic() - t0
    trials.append(trial)
    assert trial.exit_code == 130 and proc.stderr().strip() == "simloop: interrupted", (trial, proc.stderr())


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_corpus_write_index_build_and_embedding_stop_on_a_signal(tmp_path: Path):
    rng, trials = random.Random(SEED + 1), []
    env = {"SIMLOOP_CACHE": str(cache_sharing(tmp_path / "cache"))}  # an empty vector cache
    # The corpus: signalled while its temp file is written (a few tenths of a second).
    wiki = tmp_path / "wiki" / "wiki.jsonl"
    proc = Proc(["corpus", "wiki", "--out", str(wiki)], tmp_path, "corpus", env)
    proc.wait_until(lambda: any(wiki.parent.glob(".wiki.jsonl.*.tmp")), "the corpus's temp file")
    _stopped(proc, signal.SIGINT, "corpus write", trials)
    assert list(wiki.parent.iterdir()) == []  # neither the file nor its temp
    assert Proc(["corpus", "wiki", "--out", str(wiki)], tmp_path, "corpus2", env).p.wait(120) == 0
    assert len(wiki.read_text().splitlines()) == WIKI_DOCS
    # The Lucene build: signalled while the indexer child runs.
    out = tmp_path / "indexes"
    proc = Proc(["index", "build", "--corpus", str(wiki), "--out", str(out / "wiki")], tmp_path, "build", env)
    proc.wait_until(lambda: out.is_dir() and any(out.glob(".wiki.build-*/input")), "the build's scratch folder")
    time.sleep(rng.uniform(0.5, 2.0))  # the child JVM starting or indexing
    _stopped(proc, signal.SIGTERM, "index build", trials)
    assert list(out.iterdir()) == [] and leftovers(out) == []  # no scratch, no half index, no indexer left
    # Embedding up front: signalled while the vector cache fills.
    words = ["cello", "shark", "tofu", "porto", "river", "glacier", "orbit", "violin", "harbour", "lichen"]
    docs = [{"id": f"d{i}", "contents": " ".join(" ".join([w.title() for w in words[(i + j) % 10:][:1]] +
                                                          [f"{w}{i}" for w in words[j:j + 6]]) + "."
                                                 for j in range(4))} for i in range(250)]
    corpus = write_jsonl(tmp_path / "docs.jsonl", docs)
    texts = set(corpus_passages([corpus]) + corpus_sentences([corpus]))
    vectors = Path(env["SIMLOOP_CACHE"]) / "vectors.sqlite"
    build = ["index", "build", "--corpus", str(corpus), "--out", str(out / "docs"), "--embeddings"]
    proc = Proc(build, tmp_path, "embed", env)
    proc.wait_until(lambda: _rows(vectors) > 0, "the first vectors in the cache")
    time.sleep(rng.uniform(0.0, 1.0))
    _stopped(proc, signal.SIGINT, "embedding (index build --embeddings)", trials)
    done_before = _rows(vectors)
    assert is_lucene_index(out / "docs") and leftovers(tmp_path / "cache") == []  # the index was whole before
    with sqlite3.connect(vectors) as conn:  # every entry whole
        assert conn.execute("SELECT count(*) FROM vectors WHERE length(vec) != 1536").fetchone()[0] == 0
    again = Proc(build, tmp_path, "embed2", env)
    assert again.p.wait(timeout=600) == 0, again.stderr()[-3000:]
    assert 0 < done_before < _rows(vectors) == len(texts)  # went on from where it stopped, to every text
    print("\n" + table("index commands", trials))
