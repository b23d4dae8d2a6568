"""Interrupting real runs with real signals (issue 14, DESIGN §12).

The index is the suite's cached demo index (``SIMLOOP_CACHE``, set by scripts/test).
Each trial starts ``simloop run`` in a subprocess (the real demo index, MiniLM, MPNet, the JVM,
an empty vector cache, so that dialogues embed what they retrieve;
for the LLM trials a real ``simloop mock-llm --latency-ms 500`` over HTTP, and genaius over
an in-memory index, since those trials are about HTTP calls, not the JVM) and sends
SIGINT or SIGTERM at a seeded random moment within a phase: while the JVM boots, while
the embedder loads, while dialogues search, in the middle of LLM calls.  Every trial must
end with exit code 130 within 10 s, the run marked ``interrupted`` and the resume command
printed, no dialogue recorded as an error, no duplicate line, and no ``hs_err_pid*.log``.

To keep the suite short the trials of one kind are chained on one run directory: the
first trial starts the run, each next one resumes it and is interrupted in turn, and a
last resume, left alone, must complete the run with every dialogue exactly once.  The
trial table is printed (``-s``) for the closing note of the issue.  The preparation steps
(corpus, index build, embedding up front, model unpack, another process's lock) are
tests/run/test_interrupt_prepare.py's; the machinery is tests/helpers/signals.py.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from simloop.config import RunConfig
from simloop.run import read_manifest, read_transcripts
from simloop.run.runner import execute, prepare_run
from tests.helpers.data import ROOT
from tests.helpers.signals import EXIT_DEADLINE_S, cache_sharing, chain, leftovers, table

SEED = 14


# ----------------------------------------------------------------------------- in process
class SlowEcho:
    """The scripted assistant, slow enough that dialogues are in flight when the signal
    comes; it declares an embedder (a fake at the Context seam) to be warmed up."""

    needs = ("embedder",)

    def __init__(self, ctx):
        self.ctx = ctx

    async def respond(self, state):
        from tests.helpers.plugins import EchoAssistant

        await self.ctx.embedder()
        await asyncio.sleep(0.05)
        return await EchoAssistant().respond(state)


class CountingEmbedder:
    def __init__(self):
        self.opened = 0


def _prepared(tmp_path: Path, limit: int = 8):
    cfg = RunConfig.model_validate({
        "out": str(tmp_path), "run_id": "s", "concurrency": 2,
        "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": limit},
        "simulator": {"name": "tests.helpers.plugins:ScriptedSimulator", "params": {"delay": 0.05}},
        "assistant": {"name": "tests.run.test_interrupt:SlowEcho"},
    })
    return prepare_run(cfg, overrides={"embedder": CountingEmbedder()})  # no MiniLM in unit tests


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_stops_the_run_and_records_nothing_in_flight(tmp_path, sig):
    prep = _prepared(tmp_path)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kinds: list[str] = []

    def on_event(ev):
        kinds.append(ev.kind)
        if ev.kind == "ended" and kinds.count("ended") == 2:
            os.kill(os.getpid(), sig)  # handled on the loop, between two steps

    stats = await execute(prep, events=on_event)
    assert stats.interrupted
    assert kinds.index("ready") < kinds.index("started")  # warm-up before the first dialogue
    assert kinds[kinds.index("stopping") + 1:].count("ended") == 0  # nothing recorded after the signal
    ts = list(read_transcripts(prep.run_dir))
    assert len(ts) == kinds.count("ended") == 2 and all(t.error is None for t in ts)
    assert kinds.count("started") > 2  # others were in flight and were dropped
    manifest = read_manifest(prep.run_dir)
    assert manifest.status == "interrupted" and manifest.counts["recorded"] == 2
    assert {s: signal.getsignal(s) for s in before} == before  # the host's handlers are back


async def test_warm_up_opens_what_plugins_need_before_the_first_dialogue(tmp_path):
    from simloop.run.runner import warm_up

    prep = _prepared(tmp_path, limit=1)
    opened = []
    prep.ctx._cache.clear()

    async def fake_embedder():  # the Context seam: what ``ctx.embedder()`` would load
        opened.append("embedder")
        return CountingEmbedder()

    prep.ctx.embedder = fake_embedder
    events = []
    assert await warm_up(prep, events.append) == ["embedder"]
    assert opened == ["embedder"]
    assert [(e.kind, e.detail) for e in events] == [("preparing", "embedder (MiniLM)")]
    prep.recorder.close()


_STUBBORN = """
import asyncio, sys
from simloop.run.interrupt import Interrupt, at_hard_exit

async def stubborn():  # work that does not stop when cancelled (a stuck close, say)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            print("cancelled", flush=True)

async def main():
    task = asyncio.create_task(stubborn())
    at_hard_exit(lambda: print("terminal restored", flush=True))
    with Interrupt(task):
        print("ready", flush=True)
        await task

asyncio.run(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_exits_at_once_even_when_the_work_does_not_stop(tmp_path, sig):
    with subprocess.Popen([sys.executable, "-c", _STUBBORN], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(sig)
        assert p.stdout.readline().strip() == "cancelled"  # the first signal only cancels
        p.send_signal(sig)
        out, err = p.communicate(timeout=EXIT_DEADLINE_S)
    assert p.returncode == 130
    assert "terminal restored" in out and f"{sig.name} again: exiting now" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- subprocesses
# Each chain is several runs, each booting Java and loading MiniLM and MPNet: allow for a loaded machine.
@pytest.mark.timeout(900)
@pytest.mark.slow
def test_offline_run_interrupted_during_boot_load_and_retrieval(tmp_path):
    rng = random.Random(SEED)
    total = 6
    start = ["run", "--personas", str(ROOT / "personas"), "--limit", str(total), "--concurrency", "2",
             "--max-turns", "2", "--out", str(tmp_path / "runs"),
             "--run-id", "r", "--no-progress"]
    # Each signal in each phase; a trial after the JVM boot costs a whole boot (~13 s of CPU),
    # so the retrieval phase has one per signal (SIGTERM once a line is on disk).
    plan = [("jvm boot", signal.SIGINT), ("jvm boot", signal.SIGTERM), ("embedder load", signal.SIGINT),
            ("retrieval", signal.SIGINT), ("retrieval, after a line", signal.SIGTERM)]
    # Its own vector cache, empty: the dialogues embed what they retrieve as they go (issue 35),
    # so the signals land in the middle of that too.
    cache = cache_sharing(tmp_path / "cache", "index", "corpus", "models")
    trials = chain(tmp_path, start, plan, total, rng, env={"SIMLOOP_CACHE": str(cache)},
                   after_stop=lambda trial: _nothing_left(cache))
    print("\n" + table("offline simulator + bm25_extractive, empty vector cache", trials))


@pytest.fixture
def slow_llm(tmp_path):
    cmd = [sys.executable, "-m", "simloop", "mock-llm", "--port", "0", "--latency-ms", "500"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=tmp_path) as proc:
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("mock-llm listening on "), line
            yield line.rsplit(" ", 1)[1]
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_llm_run_interrupted_in_the_middle_of_llm_calls(tmp_path, slow_llm):
    # genaius over an in-memory index (tests/helpers/interrupt_plugins.py): no JVM to boot in each run;
    # a signal while the JVM boots is the offline chain's (both signals, the real stack), so
    # this chain no longer starts with one.
    rng = random.Random(SEED + 1)
    total = 8
    start = ["run", "--personas", str(ROOT / "personas"), "--simulator", "llm",
             "--assistant", "tests.helpers.interrupt_plugins:GenAIusInMemory", "--base-url", slow_llm,
             "--model", "mock-model",
             "--limit", str(total), "--concurrency", "4", "--max-turns", "3", "--out", str(tmp_path / "runs"),
             "--run-id", "r", "--no-progress"]
    plan = [("llm calls", signal.SIGINT), ("llm calls", signal.SIGTERM), ("llm calls, after a line", signal.SIGINT),
            ("llm calls, 2x SIGINT", signal.SIGINT)]
    trials = chain(tmp_path, start, plan, total, rng)
    print("\n" + table("llm simulator + genaius (in-memory index), mock-llm --latency-ms 500", trials))


def _nothing_left(cache: Path) -> None:
    """The vector cache a stopped run leaves is whole: every entry readable (no torn row)."""
    assert leftovers(cache) == []
    vectors = cache / "vectors.sqlite"
    if vectors.exists():
        with sqlite3.connect(vectors) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("SELECT count(*) FROM vectors WHERE length(vec) NOT IN (1536, 3072)").fetchone()[0] == 0
