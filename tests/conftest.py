"""Shared fixtures: scripted plugins (fakes at the protocol seam) and sample inputs."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from simloop.schema import (
    AssistantReply,
    Behaviour,
    Passage,
    Persona,
    PtkbUse,
    RubricQuestion,
    Scenario,
    SimulatorTurn,
    Stage,
    Topic,
)
from simloop.search import prepare_environment

# What `simloop` and the public API do at process start, before any thread exists.
prepare_environment()

ROOT = Path(__file__).resolve().parents[1]


def _ikat_dir() -> Path:
    """``$SIMLOOP_IKAT_DATA`` (as scripts/bench_common.py), else ``shared/data/ikat`` beside
    the checkout or further up (a git worktree sits one level deeper).  A fresh clone elsewhere has none: ``ikat_file``
    then skips the tests that need it instead of failing them."""
    if os.environ.get("SIMLOOP_IKAT_DATA"):
        return Path(os.environ["SIMLOOP_IKAT_DATA"])
    found = (p / "shared" / "data" / "ikat" for p in ROOT.parents)
    return next((c for c in found if c.is_dir()), ROOT.parent / "shared" / "data" / "ikat")


IKAT = _ikat_dir()


def ikat_file(*parts: str) -> Path:
    """A file under the iKAT data folder, or a skip with a one-line reason when it is absent."""
    path = IKAT.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"iKAT data not found: {path} (set SIMLOOP_IKAT_DATA to the ikat folder)")
    return path


def simloop_cli(*args, timeout: float = 300, cwd: Path = ROOT, **kw) -> subprocess.CompletedProcess:
    """``python -m simloop ARGS`` in a subprocess, the real CLI, output captured as text."""
    return subprocess.run([sys.executable, "-m", "simloop", *map(str, args)], cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, **kw)


@contextmanager
def bench_script(name: str):
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


def write_personas(folder: Path, **tomls: str) -> Path:
    """A personas folder holding ``<id>.toml`` for each keyword (the loader wants the file
    stem to equal the persona id)."""
    folder.mkdir(parents=True, exist_ok=True)
    for pid, text in tomls.items():
        (folder / f"{pid}.toml").write_text(text)
    return folder


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick, so parallel workers do not collide)."""
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mock_llm(port: int, *flags: str):
    """``simloop mock-llm`` in a subprocess, ready when ``/stats`` answers."""
    p = subprocess.Popen([sys.executable, "-m", "simloop", "mock-llm", "--port", str(port), *flags], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=2).read()
                break
            except OSError:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("mock-llm did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        p.terminate()
        p.wait(timeout=30)


def make_persona(pid: str = "p1", topics: int = 2, questions: int = 3) -> Persona:
    return Persona(
        id=pid,
        name=pid.upper(),
        ptkb=["I am vegetarian.", "I live in Porto.", "I play the cello."],
        behaviour=Behaviour(),
        topics=[
            Topic(id=f"{pid}-t{i}", title=f"topic {i}",
                  rubric=[RubricQuestion(id=f"q{j}", question=f"question {j} of topic {i}?") for j in range(questions)])
            for i in range(topics)
        ],
    )


def make_scenario(pid: str = "p1", dialogue_id: str = "d1", seed: int = 1) -> Scenario:
    p = make_persona(pid)
    return Scenario(dialogue_id=dialogue_id, persona=p, topic=p.topics[0], behaviour=p.behaviour, seed=seed)


class ScriptedSimulator:
    """Asks the rubric questions in order, grades 4, then ends satisfied with a closing line.

    Every call reports stages as a model-backed simulator would: ``voice`` for what it
    says, ``grade`` for judging the answer just given (so tests can see where each lands).
    """

    def __init__(self, ctx=None, fail_on: str | None = None, delay: float = 0.0, grade: float = 4.0,
                 closing: str | None = "Thanks, that is all. Bye!"):
        self.fail_on, self.delay, self.grade, self.closing = fail_on, delay, grade, closing

    async def open(self, state):
        q = state.scenario.topic.rubric[0]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", stages=[_stage("voice", 1)])

    async def next(self, state):
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail_on and self.fail_on in state.dialogue_id:
            raise RuntimeError(f"simulator broke on {state.dialogue_id}")
        asked = len(state.turns)
        rubric = state.scenario.topic.rubric
        graded = {"grade": self.grade, "grade_stages": [_stage("grade", asked)]}
        if asked >= len(rubric):
            return SimulatorTurn.stop("user_satisfied", "all answered", utterance=self.closing,
                                      stages=[_stage("voice", asked + 1)] if self.closing else [], **graded)
        q = rubric[asked]
        return SimulatorTurn.say(q.question, rubric_id=q.id, intent="ask", stages=[_stage("voice", asked + 1)],
                                 **graded)


def _stage(name: str, turn: int) -> Stage:
    """A simulator stage that says which turn it belongs to (in its prompt token count)."""
    return Stage(name=f"simulator.{name}", model="scripted", prompt_tokens=turn, completion_tokens=1)


class EchoAssistant:
    """Answers with the utterance and one passage; records nothing else."""

    def __init__(self, ctx=None, fail_on: str | None = None):
        self.fail_on = fail_on
        self.seen = 0

    async def respond(self, state):
        self.seen += 1
        if self.fail_on and self.fail_on in state.dialogue_id:
            raise ValueError("assistant exploded")
        return AssistantReply(
            response=f"About {state.user.utterance}",
            passages=[Passage(rank=1, docid="doc-1", score=1.5, used=True)],
            ptkb_provenance=[PtkbUse(index=1, statement=state.ptkb[0], score=0.5)],
        )


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
    tests/test_e2e_demo.py checks its transcripts, tests/test_adversaries.py its share of
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
