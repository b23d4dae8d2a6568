"""Progress of the long commands (index build --embeddings, eval --judge, rehearse): the
counting seam (simloop/progress.py) advances; a pipe sees exactly what it saw before."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import numpy as np

from simloop.evaluate.judge import judge_calls, judge_transcripts
from simloop.search.vectors import PassageVectors, write_vectors
from tests.helpers.cli import simloop_cli
from tests.helpers.data import DOCS, ROOT, write_jsonl
from tests.helpers.models import CountingModel, ScriptedJudge
from tests.helpers.runs import read_json, transcript, turn, write_run


class Tally:
    """A ProgressSink that remembers what it heard."""

    def __init__(self):
        self.phases: list[tuple[str, int | None]] = []
        self.steps: list[int] = []

    def phase(self, label: str, total: int | None = None) -> None:
        self.phases.append((label, total))

    def advance(self, n: int = 1) -> None:
        self.steps.append(n)


def test_passage_embedding_counts_every_passage_and_keeps_row_order(tmp_path: Path):
    docs = [{"id": f"d{i}", "contents": "word " * (7 - i)} for i in range(7)]  # lengths differ
    corpus = write_jsonl(tmp_path / "c.jsonl", docs)
    model, tally = CountingModel(), Tally()
    assert write_vectors(tmp_path, [corpus], model.encode, chunk=3, progress=tally) == 7
    assert tally.phases == [("embedding passages", 7)] and tally.steps == [3, 3, 1]
    # encoded shortest first, stored in corpus order: each docid's row is its own text's vector
    assert [len(b[0]) for b in model.batches] == sorted(len(b[0]) for b in model.batches)
    stored = PassageVectors.open(tmp_path)
    for d in docs:
        assert np.allclose(stored.lookup(d["id"], d["contents"]), CountingModel().encode([d["contents"]])[0])


async def test_the_judge_counts_each_call_answered():
    runs = [transcript([turn(1, rubric_id="q1"), turn(2, rubric_id="q1"), turn(3, rubric_id="q2")], persona="p1"),
            transcript([turn(1), turn(2)], persona="p2"), transcript([], persona="p3")]
    chat, tally = ScriptedJudge(), Tally()
    await judge_transcripts(runs, chat, concurrency=2, progress=tally)
    assert tally.phases == [("judge calls", 6)] and judge_calls(runs) == 6
    assert sum(tally.steps) == len(chat.calls) == 6


def test_eval_without_judge_prints_no_bar_when_piped(tmp_path: Path):
    run = write_run(tmp_path / "run", [transcript([turn(1)], persona="p1")])
    p = simloop_cli("eval", run)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert read_json(run / "summary.json")["stats"]["dialogues"] == 1


def _on_a_terminal(*args: str) -> str:
    """stderr of ``simloop ARGS`` on a pseudo-terminal (as a user sees it); stdout piped."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "simloop", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=slave, env=env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.wait(300)
    os.close(master)
    assert proc.returncode == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace")


def test_index_build_shows_its_phases_on_a_terminal_and_nothing_when_piped(tmp_path: Path):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    shown = _on_a_terminal("index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "tty"), "--embeddings")
    for label in ("indexing (BM25)", "preparing: MiniLM", "embedding passages", "embedding sentences"):
        assert label in shown
    assert f"{len(DOCS)}/{len(DOCS)}" in shown  # the passages counted to the end
    p = simloop_cli("index", "build", "--corpus", corpus, "--out", tmp_path / "piped", "--embeddings")
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout == f"indexed {len(DOCS)} documents into {tmp_path / 'piped'} with their MiniLM vectors\n"
    assert json.loads((tmp_path / "piped" / "minilm-vectors.json").read_text())["docids"] == [d["id"] for d in DOCS]
