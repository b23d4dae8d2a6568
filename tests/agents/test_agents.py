"""Every reference agent end to end: the real mock LLM over HTTP, the real BM25 demo index,
MiniLM, MPNet, the offline simulator and the engine's own turn loop."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from simloop.config import PluginSpec, RunConfig, ScenarioSelection
from simloop.fakes.mockllm import MockLLM
from simloop.inputs.personas import load_personas
from simloop.llm.config import LLMConfig, LLMRole
from simloop.run import read_manifest, read_transcripts
from simloop.run.engine import run_dialogue
from simloop.run.plugins import Context, load_plugin
from simloop.run.runner import execute, prepare_run
from simloop.run.session import DialogueSpec
from simloop.schema import PluginRef, Scenario, Transcript
from simloop.simulators.offline import OfflineSimulator
from tests.helpers.data import ROOT

pytestmark = pytest.mark.slow
MODELS = {"mock-model", "mock-second"}

# Small retrieval depths: MiniLM re-ranking dominates a turn on a shared 2-core box.
AGENTS = {
    "genaius": {}, "genaius-summary": {"memory": "summary"},
    "nii_rtg": {"k": 10, "k_per_query": 10, "rerank_depth": 20},
    "nii_gtr": {"k": 10, "k_per_query": 10, "rerank_depth": 20, "queries": 3},
    "iiuot": {"candidates": 20, "k": 10}, "acms": {"candidates": 15},
}
STRATEGY = {"genaius": "full", "genaius-summary": "summary", "nii_rtg": "full", "nii_gtr": "full",
            "iiuot": "window", "acms": "adaptive"}


def llm_stages_expected(name: str, turn) -> list[str]:
    """The LLM calls a turn makes, in order: the documented composition of each agent."""
    if name.startswith("genaius"):
        summary = ["summary"] if name.endswith("summary") and turn.index > 1 else []
        return [*summary, "ptkb.classify", "rewrite", "generate"]
    if name == "nii_rtg":
        groups = max(1, min(3, sum(u.used for u in turn.assistant.ptkb_provenance)))
        return ["rewrite", "ptkb.classify", *(f"queries.{i}" for i in range(1, groups + 1)), "suggest", "generate"]
    if name == "nii_gtr":
        return [f"m{i}.{s}" for i in (1, 2) for s in ("draft", "ptkb", "queries")] + ["generate"]
    if name == "iiuot":
        reranked = any(s.name == "ptkb.rerank" and s.model for s in turn.stages)
        return ["rewrite.1", "rewrite.2", *(["ptkb.rerank"] if reranked else []), "generate"]
    return ["generate"]  # acms


@pytest.fixture(scope="module")
def mock_url():
    """One mock server for the module, on its own thread and loop (tests get fresh loops)."""
    ready, box = threading.Event(), {}

    async def serve() -> None:
        async with MockLLM(seed=7) as mock:
            box.update(url=mock.url, loop=asyncio.get_running_loop(), stop=asyncio.Event())
            ready.set()
            await box["stop"].wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield box["url"]
    box["loop"].call_soon_threadsafe(box["stop"].set)
    thread.join(10)


def requests_seen(url: str) -> int:
    return httpx.get(url.removesuffix("/v1") + "/stats").json()["requests"]


def config(url: str, **kw) -> RunConfig:
    role = LLMRole(base_url=url, model="mock-model", max_attempts=2, backoff_base_s=0.0, backoff_cap_s=0.0)
    llm = LLMConfig(default=role, roles={"assistant.second": {"model": "mock-second"}})
    return RunConfig(llm=llm, **kw)


def scenario(persona_id: str = "maya") -> Scenario:
    persona = next(p for p in load_personas(ROOT / "personas") if p.id == persona_id)
    topic = persona.topics[0]
    return Scenario(dialogue_id=f"{persona.id}-{topic.id}", persona=persona, topic=topic,
                    behaviour=persona.behaviour, seed=5)


@pytest.mark.parametrize("label", list(AGENTS))
async def test_agent_end_to_end(mock_url, label):
    name = label.split("-")[0]
    ctx = Context(config(mock_url))
    agent = load_plugin("assistant", name, AGENTS[label], ctx)
    spec = DialogueSpec(run_id="r", simulator=PluginRef(name="offline"), assistant=PluginRef(name=name),
                        max_turns=2, timeout_s=600)
    before = requests_seen(mock_url)
    try:
        t = await run_dialogue(scenario(), OfflineSimulator(ctx), agent, spec)
        retriever = await ctx.retriever()
        assert t.error is None, t.error
        assert Transcript.model_validate_json(t.model_dump_json()) == t
        assert 1 <= len(t.turns) <= 2
        ptkb = scenario().persona.ptkb
        for turn in t.turns:
            a = turn.assistant
            assert a.response.strip() and a.passages and any(p.used for p in a.passages)
            assert [p.rank for p in a.passages] == list(range(1, len(a.passages) + 1))
            assert len({p.docid for p in a.passages}) == len(a.passages)
            for p in a.passages:
                assert await retriever.doc(p.docid) is not None, p.docid  # provenance exists in the index
            assert all(ptkb[u.index - 1] == u.statement for u in a.ptkb_provenance)
            # provenance is a ranking of the whole PTKB (DESIGN §4) with the used statements first
            assert sorted(u.index for u in a.ptkb_provenance) == list(range(1, len(ptkb) + 1))
            flags = [u.used for u in a.ptkb_provenance]
            assert flags == sorted(flags, reverse=True)
            assert a.context.strategy == STRATEGY[label]
            assert (a.context.tokens > 0) == (turn.index > 1)  # the memory holds the earlier turns, none before
            mine = [s for s in turn.stages if not s.name.startswith("simulator.")]
            assert [s.name for s in mine if s.model] == llm_stages_expected(label, turn)
            assert all(s.model in MODELS and s.prompt_tokens > 0 and s.latency_ms > 0 for s in mine if s.model)
            assert all(s.error is None for s in mine)
            if name == "nii_gtr":  # both models of the ensemble answered
                assert {s.model for s in mine if s.model and s.name.startswith("m2.")} == {"mock-second"}
                assert {s.model for s in mine if s.model and s.name.startswith("m1.")} == {"mock-model"}
        assert t.turns[-1].assistant.context.tokens > 0  # the second turn has history to carry
        assert requests_seen(mock_url) - before == t.usage.calls  # no LLM call goes unrecorded
    finally:
        await ctx.aclose()


async def test_runner_with_params_from_config(mock_url, tmp_path):
    cfg = config(mock_url, out=tmp_path, max_turns=2, progress=False,
                 assistant=PluginSpec(name="genaius", params={"memory": "summary"}),
                 scenarios=ScenarioSelection(personas_dir=ROOT / "personas", limit=1))
    prep = prepare_run(cfg)
    stats = await execute(prep)
    [t] = list(read_transcripts(prep.run_dir))
    # The effective params, defaults included (DESIGN §3): a run can be rebuilt from its record.
    effective = {"memory": "summary", "k": 20, "max_words": 220, "summary_words": 150}
    assert stats.dialogues == 1 and t.error is None and t.assistant.params == effective
    assert read_manifest(prep.run_dir).assistant.params == effective
    assert read_manifest(prep.run_dir).config["assistant"]["params"] == {"memory": "summary"}  # as given
    assert [turn.assistant.context.strategy for turn in t.turns] == ["summary"] * len(t.turns)
