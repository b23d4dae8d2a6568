"""``simloop llm-server`` in a subprocess: the real local model for the tests that need one.

Skips (with the reason) where the extra ``simloop[local-llm]`` is not installed."""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from tests.helpers.data import ROOT

READY_S = 240  # the model loads in seconds; a loaded 2-core machine takes longer


def needs_local_llm() -> None:
    """Skip unless llama-cpp-python's server and the SmolLM2 package are installed."""
    from simloop.llm import INSTALL_HINT, LOCAL_MODELS, model_file, server_missing

    missing = server_missing()
    if missing:
        pytest.skip(f"no local model server: {missing}")
    try:
        model_file(LOCAL_MODELS["smollm2"])
    except Exception as exc:
        pytest.skip(f"no SmolLM2 ({exc}); {INSTALL_HINT}")


@dataclass
class Launched:
    proc: subprocess.Popen[str]
    url: str
    stderr: IO[str]

    def server_pid(self) -> int | None:
        """The llama-cpp-python process: the launcher's only child."""
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return int(kids[0]) if kids else None

    def errors(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()


def read_first_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The first line of ``proc``'s stdout, or '' if it ends or ``timeout_s`` passes first."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return proc.stdout.readline().strip()


@contextmanager
def llm_server(*flags: str) -> Iterator[Launched]:
    """``python -m simloop llm-server FLAGS``, once its base URL is on stdout; stopped with
    SIGTERM afterwards (by its pid) if the test has not stopped it."""
    needs_local_llm()
    err = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "simloop", "llm-server", *flags], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    try:
        url = read_first_line(proc, READY_S)
        if not url:
            err.seek(0)
            raise AssertionError(f"llm-server printed no URL (exit {proc.poll()}): {err.read()[-2000:]}")
        yield Launched(proc, url, err)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        err.close()
