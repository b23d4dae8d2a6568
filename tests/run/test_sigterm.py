"""SIGTERM stops every command as Ctrl-C does (DESIGN §12), not only `run`: exit 130,
"simloop: interrupted", and the command's temp files removed by its own clean-up.  Before,
SIGTERM ended `index build`, `export`, `eval` ... at once (143, nothing said, temp left)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simloop.run.interrupt import sigterm_as_sigint
from tests.helpers.data import ROOT


def test_sigterm_raises_keyboard_interrupt_inside_the_block_only():
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what a fresh `simloop` process has
    try:
        with pytest.raises(KeyboardInterrupt):
            with sigterm_as_sigint():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # interrupted long before
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_handler_the_host_set_is_kept():
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: got.append(sig))
    try:
        with sigterm_as_sigint():
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # bounded: the handler runs at the next bytecode
                if got:
                    break
                time.sleep(0.01)
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def _corpus(path: Path, n: int) -> Path:
    words = ["cello", "shark", "tofu", "porto", "river", "glacier", "orbit", "violin", "harbour", "lichen"]
    with path.open("w") as fh:
        for i in range(n):
            text = " ".join(words[(i * 7 + j * 3) % len(words)] + str((i + j) % 97) for j in range(40))
            fh.write(json.dumps({"id": f"d{i}", "contents": text}) + "\n")
    return path


@pytest.mark.slow
def test_sigterm_to_index_build_exits_130_and_removes_its_scratch_folder(tmp_path):
    corpus = _corpus(tmp_path / "corpus.jsonl", 40_000)  # seconds of Lucene indexing after the scratch appears
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "simloop", "index", "build", "--corpus", str(corpus),
                             "--out", str(out / "idx"), "--threads", "1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # the JVM boots first; bounded in time and in polls
        for _ in range(6000):
            if any(p.name.startswith(".idx.build-") for p in out.iterdir()) or proc.poll() is not None:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"the build ended before the signal: {proc.stderr.read()}"
        assert any(p.name.startswith(".idx.build-") for p in out.iterdir()), "no scratch folder within 120 s"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 130, (proc.returncode, stderr)
    assert stderr.strip() == "simloop: interrupted" and stdout == ""
    assert sorted(p.name for p in out.iterdir()) == []  # no scratch folder, no half index
