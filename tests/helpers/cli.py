"""The real CLI and its servers in subprocesses, and the scripts' modules in-process."""

from __future__ import annotations

import importlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.helpers.data import ROOT


def simloop_cli(*args: Any, timeout: float = 300, cwd: Path = ROOT, **kw: Any) -> subprocess.CompletedProcess:
    """``python -m simloop ARGS`` in a subprocess, the real CLI, output captured as text."""
    return subprocess.run([sys.executable, "-m", "simloop", *map(str, args)], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, **kw)


def one_line_exit_2(p: subprocess.CompletedProcess, *needles: str) -> str:
    """Bad input as DESIGN §12 wants it: exit 2, one line on stderr naming ``needles``, no traceback."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick, so parallel workers do not collide)."""
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mock_llm(port: int, *flags: str) -> Iterator[str]:
    """``simloop mock-llm`` in a subprocess, ready when ``/stats`` answers."""
    p = subprocess.Popen([sys.executable, "-m", "simloop", "mock-llm", "--port", str(port), *flags], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=2).read()
                break
            except OSError as err:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("mock-llm did not start") from err
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        p.terminate()
        p.wait(timeout=30)


@contextmanager
def bench_script(name: str) -> Iterator[ModuleType]:
    """A module of ``scripts/`` (a bench's own definitions) for one test.  Bench modules put
    the checkout and ``scripts/`` first on ``sys.path`` when imported: the path is restored,
    and every module first imported from ``scripts/`` is forgotten, afterwards."""
    saved, before = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path[:] = saved
        for mod in set(sys.modules) - before:
            if str(ROOT / "scripts") in str(getattr(sys.modules[mod], "__file__", "") or ""):
                sys.modules.pop(mod, None)
