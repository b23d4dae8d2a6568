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

ROOT = Path(__file__).resolve().parents[1]


def _said(out: Path, hashseed: str) -> list[tuple[str, list[str], str | None, str]]:
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    # The first topic of every demo persona: every voice form, fact and closing line gets a chance.
    topics = [a for p in load_personas(ROOT / "personas") for a in ("--topic", p.topics[0].id)]
    cmd = [sys.executable, "-m", "simloop", "run", "--limit", "6", "--concurrency", "6", "--out", str(out),
           "--run-id", "r", "--no-progress", *topics]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return sorted((t.dialogue_id, [turn.user.utterance for turn in t.turns], t.stop.utterance, t.stop.reason)
                  for t in simloop.read_transcripts(out / "r"))


@pytest.mark.slow
def test_same_seed_same_transcript_text_whatever_the_hash_seed(tmp_path):
    one, two = _said(tmp_path / "a", "1"), _said(tmp_path / "b", "2")
    assert len(one) == 6 and all(turns for _, turns, _, _ in one)
    assert one == two
