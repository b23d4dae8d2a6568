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


# The longest tests and their seconds in one full run under xdist (4 workers, 2 cores, load ~9;
# ./scripts/test --durations=40).  Only the order matters: they start first, longest first.
# test_demo_dialogues_validate is not here: it reads the run test_bm25_extractive_... makes
# (conftest ``demo_run``), and started beside it it would only wait for that run.
LONGEST = {
    "test_llm_run_interrupted_in_the_middle_of_llm_calls": 319,
    "test_offline_run_interrupted_during_boot_load_and_retrieval": 272,
    "test_soak_every_dialogue_recorded_then_retried_to_completion": 172,
    "test_sigkill_then_resume_records_each_dialogue_once": 161,
    "test_bm25_extractive_still_satisfies_most_users": 149,  # makes the shared demo_run
    "test_same_seed_same_transcript_text_whatever_the_hash_seed": 122,
    "test_interactive_run_on_converted_personas": 89,
    "test_no_adversary_satisfies_the_offline_user": 81,
    "test_a_run_with_k_retrieves_that_many_passages": 79,
    "test_minilm_separates_ikat_gold_responses_from_shuffled_ones": 76,
    "test_agent_provenance_scores_as_the_bench": 73,  # both encoders, each with its own setup
    "test_agent_end_to_end": 73,
    "test_every_dialogue_failing_exits_1_with_the_commonest_error_and_the_retry_command": 60,
    "test_corrupt_lines_outage_and_retry_errors_end_to_end": 41,
    "test_rehearse_end_to_end_with_client_crash": 40,
    "test_arun_read_and_evaluate_inside_a_running_event_loop": 39,
    "test_behaviour_flag_range_is_drawn_recorded_and_binds": 38,
    "test_the_rate_limit_is_shared_by_all_workers": 29,
    "test_ray_run_records_the_same_dialogues_as_local_and_resumes": 28,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest tests first (``LONGEST``), each followed by a quick one, then the other
    end-to-end ones (``slow``: JVM, MiniLM, MPNet, subprocess runs), then the rest.  Under pytest-xdist
    (scripts/test: ``--dist load --maxschedchunk 1``) a worker takes the next test when it is
    free, so the long ones run side by side from the start instead of one of them starting
    late and keeping a worker busy alone at the end."""
    items.sort(key=lambda item: (-LONGEST.get(item.originalname, 0), item.get_closest_marker("slow") is None))
    # xdist starts each worker with two tests, neighbours in this order, and queues one more
    # behind the running one: a quick test after each long one keeps two long ones from
    # landing on one worker (where they would run one after the other).
    # With few tests selected there are fewer quick ones than long ones: pair what there is
    # (taking ``n`` from the end would take long ones again, and run them twice).
    n = sum(item.originalname in LONGEST for item in items)
    k = min(n, len(items) - n)
    longest, middle, quick = items[:n], items[n:len(items) - k], items[len(items) - k:]
    items[:] = [x for pair in zip(longest, reversed(quick)) for x in pair] + longest[k:] + middle
