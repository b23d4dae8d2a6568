"""Shared fixtures: a scenario, the demo index's cache, the demo run, a real MiniLM.  Plain
helpers (paths, the CLI in subprocesses, fakes, hand-built runs) live in ``tests/helpers/``."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from simloop.schema import Scenario
from simloop.search import prepare_environment
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT, make_scenario

# What `simloop` and the public API do at process start, before any thread exists.
prepare_environment()


@pytest.fixture
def scenario() -> Scenario:
    return make_scenario()


def _session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test session's temporary folder, the same for every pytest-xdist worker (each
    worker's own basetemp sits below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory: pytest.TempPathFactory):
    """A per-session cache dir so tests never touch ~/.cache/simloop; the first module to
    ask builds the demo index there and the others reuse it.  Under pytest-xdist each worker
    has its own basetemp below the session's: the workers share the session's folder, and
    the file lock in ``demo_index`` lets the first one build while the others wait."""
    cache = _session_dir(tmp_path_factory) / "simloop-cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIMLOOP_CACHE", str(cache))
        # Embedding all 10,033 demo passages takes minutes of CPU: the suite's demo index goes
        # without stored vectors (tiny_index in test_retrieval.py checks them end to end).
        mp.setenv("SIMLOOP_DEMO_VECTORS", "0")
        yield cache


@dataclass(frozen=True)
class DemoRun:
    """What a ``simloop run`` subprocess left: its exit code and output, and its run folder."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo (offline simulator, bm25_extractive, the demo index, MiniLM and MPNet) through
    the real CLI on the first topic of the first six demo personas, once per session:
    tests/cli/test_e2e_demo.py checks its transcripts, tests/fakes/test_adversaries.py its share of
    satisfied users (the control of the adversaries).  One run instead of two saves a JVM boot
    and six dialogues (~30 s of CPU).  Under pytest-xdist the first worker to ask runs it under
    a file lock in the session's folder; another one waits for it and reads what it left."""
    from filelock import FileLock

    from simloop.inputs.personas import load_personas

    shared = _session_dir(tmp_path_factory) / "demo-run"
    result = shared / "result.json"
    with FileLock(str(shared) + ".lock"):
        if not result.exists():
            topics = [a for p in load_personas(ROOT / "personas") for a in ("--topic", p.topics[0].id)]
            p = simloop_cli("run", "--limit", 6, "--concurrency", 16, "--out", shared, "--run-id", "demo",
                            "--no-progress", *topics, timeout=600)
            result.write_text(json.dumps({"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}))
    got = json.loads(result.read_text())
    return DemoRun(got["returncode"], got["stdout"], got["stderr"], shared / "demo")


@pytest.fixture
async def minilm():
    """A real MiniLM embedder for one test, closed afterwards (its thread shut down)."""
    from simloop.search.embeddings import open_embedder

    embedder = await open_embedder()
    try:
        yield embedder
    finally:
        await embedder.aclose()
