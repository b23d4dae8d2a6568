"""Shared fixtures: scripted plugins (fakes at the protocol seam) and sample inputs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from simloop.schema import (
    AssistantReply, Behaviour, Passage, Persona, PtkbUse, RubricQuestion, Scenario,
    SimulatorTurn, Stage, Topic,
)
from simloop.search import prepare_environment

# What `simloop` and the public API do at process start, before any thread exists.
prepare_environment()

ROOT = Path(__file__).resolve().parents[1]
# ../shared next to the checkout; a git worktree one level deeper finds it further up.
SHARED = next((p / "shared" for p in ROOT.parents if (p / "shared" / "data").is_dir()), ROOT.parent / "shared")
IKAT = SHARED / "data" / "ikat"


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


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory: pytest.TempPathFactory):
    """A per-session cache dir so tests never touch ~/.cache/simloop; the first module to
    ask builds the demo index there and the others reuse it."""
    cache = tmp_path_factory.getbasetemp() / "simloop-cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIMLOOP_CACHE", str(cache))
        # Embedding all 10,033 demo passages takes minutes of CPU: the suite's demo index goes
        # without stored vectors (tiny_index in test_retrieval.py checks them end to end).
        mp.setenv("SIMLOOP_DEMO_VECTORS", "0")
        yield cache


@pytest.fixture
async def minilm():
    """A real MiniLM embedder for one test, closed afterwards (its thread shut down)."""
    from simloop.search.embeddings import open_embedder

    embedder = await open_embedder()
    try:
        yield embedder
    finally:
        await embedder.aclose()
