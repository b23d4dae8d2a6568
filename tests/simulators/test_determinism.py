"""The same seed gives the same dialogues in two separate processes (issue 11): nothing in the
voice, the paraphraser, the grader or the policy may depend on ``hash()`` or on set order,
which Python salts per process (``PYTHONHASHSEED``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import simloop
from simloop.inputs.personas import load_personas
from tests.helpers.data import ROOT

# Every shipped persona x topic, twice, through the rubric policy and the template voice (the
# grades a seeded mix of passes and failures, the embedder the hashing fake at its seam: this
# checks the voice and paraphrase code, which the end-to-end test below covers only in part).
VOICE_SCRIPT = """
import asyncio, hashlib
from tests.helpers.dialogues import shipped_dialogues
lines = asyncio.run(shipped_dialogues())
print(len(lines), hashlib.sha256(repr(lines).encode()).hexdigest())
"""

DIALOGUES = 3


def _start(out: Path, hashseed: str) -> subprocess.Popen:
    # The first topic of the first demo personas, offline simulator and bm25_extractive (the demo).
    topics = [a for p in load_personas(ROOT / "personas") for a in ("--topic", p.topics[0].id)]
    cmd = [sys.executable, "-m", "simloop", "run", "--limit", str(DIALOGUES), "--concurrency", str(DIALOGUES),
           "--out", str(out), "--run-id", "r", "--no-progress", *topics]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": hashseed},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _said(proc: subprocess.Popen, out: Path) -> list[tuple[str, list[str], str | None, str]]:
    _, err = proc.communicate(timeout=570)
    assert proc.returncode == 0, err[-2000:]
    return sorted((t.dialogue_id, [turn.user.utterance for turn in t.turns], t.stop.utterance, t.stop.reason)
                  for t in simloop.read_transcripts(out / "r"))


def test_the_voice_says_the_same_whatever_the_hash_seed():
    out = [subprocess.run([sys.executable, "-c", VOICE_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert all(p.returncode == 0 for p in out), out[0].stderr[-2000:] + out[1].stderr[-2000:]
    (n1, digest1), (n2, digest2) = (p.stdout.split() for p in out)
    assert int(n1) > 400 and (n1, digest1) == (n2, digest2)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_same_seed_same_transcript_text_whatever_the_hash_seed(tmp_path):
    # Both processes at once: the comparison, not the speed, is the point.
    a, b = _start(tmp_path / "a", "1"), _start(tmp_path / "b", "2")
    one, two = _said(a, tmp_path / "a"), _said(b, tmp_path / "b")
    assert len(one) == DIALOGUES and all(turns for _, turns, _, _ in one)
    assert one == two
