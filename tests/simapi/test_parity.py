"""Parity (DESIGN §2): one scripted simulator and one assistant, through the engine and
through the Sim.API server over real HTTP on 127.0.0.1, give the same transcripts field
by field, timestamps and latencies aside.

The server's participant is `simloop rehearse` in-process (the engine with the ``simapi``
simulator), so the client's own run directory is checked against the engine's too, for
what a Sim.API client can know (no rubric ids, grades or simulator stages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simloop.config import RunConfig
from simloop.fakes.seams import HashEmbedder
from simloop.run import read_manifest, read_transcripts
from simloop.run.runner import execute, prepare_run
from simloop.schema import AssistantReply, ContextInfo, Stage
from simloop.simapi.app import create_app, running
from tests.helpers.plugins import EchoAssistant
from tests.helpers.simapi import write_persona_topics

TOKEN = "cGFyaXR5LXRva2VuLTc3"
FAKES = {"embedder": HashEmbedder()}


class StagedAssistant(EchoAssistant):
    """Echo, with everything a real pipeline records: a rewrite, a context, two stages."""

    async def respond(self, state):
        reply = await super().respond(state)
        n = len(state.turns) + 1
        return AssistantReply(
            **reply.model_dump(exclude={"stages", "rewritten_query", "context"}),
            rewritten_query=f"query {n}", context=ContextInfo(strategy="full", tokens=10 * n),
            stages=[Stage(name="retrieve", latency_ms=1.5),
                    Stage(name="generate", model="m", prompt_tokens=100 + n, completion_tokens=20, cost_usd=0.001)])


def _cfg(tmp: Path, out: str, simulator: str, **kw: Any) -> RunConfig:
    personas = write_persona_topics(tmp / "personas", {"ana": ["ana-run"], "ben": ["ben-food", "ben-city"]})
    return RunConfig.model_validate({"out": str(tmp / out), "scenarios": {"personas_dir": str(personas)},
                                     "simulator": {"name": simulator},
                                     "assistant": {"name": "tests.simapi.test_parity:StagedAssistant"},
                                     "max_turns": 12, **kw})


def _comparable(transcript, keep_assistant: bool = False) -> dict[str, Any]:
    """The transcript without what differs by nature: ids, timestamps, latencies, who answered."""
    data = transcript.model_dump(mode="json")
    for key in ("run_id", "started_at", "ended_at", *(() if keep_assistant else ("assistant",))):
        data.pop(key)
    for turn in data["turns"]:
        turn.pop("latency_ms")
        for stage in turn["stages"]:
            stage.pop("latency_ms")
    return data


async def _engine(cfg: RunConfig) -> list:
    prep = prepare_run(cfg, overrides=dict(FAKES))
    await execute(prep)
    return list(read_transcripts(prep.run_dir))


async def _rehearse(tmp: Path, url: str, run_id: str) -> tuple[list, Any]:
    cfg = RunConfig.model_validate({
        "out": str(tmp / "client"), "run_id": run_id, "max_turns": 1000,
        "simulator": {"name": "simapi", "params": {"api": url, "run_id": run_id, "token_env": "PARITY_TOKEN"}},
        "assistant": {"name": "tests.simapi.test_parity:StagedAssistant"}})
    prep = prepare_run(cfg, secrets={"PARITY_TOKEN": TOKEN})
    await execute(prep)
    return list(read_transcripts(prep.run_dir)), prep


@pytest.mark.parametrize("simulator", ["tests.helpers.plugins:ScriptedSimulator", "offline"])
async def test_engine_and_server_record_the_same_dialogues(tmp_path, simulator):
    engine = await _engine(_cfg(tmp_path, "engine", simulator))
    server_cfg = _cfg(tmp_path, "server", simulator)
    async with running(create_app(server_cfg, {"team": TOKEN}, overrides=dict(FAKES))) as url:
        client, prep = await _rehearse(tmp_path, url, "par")
    served = list(read_transcripts(server_cfg.out / "serve-par"))

    assert len(engine) == len(served) == 3 and sum(len(t.turns) for t in engine) >= 6
    by_id = {t.dialogue_id: t for t in served}
    for mine in engine:
        theirs = by_id[mine.dialogue_id]
        assert _comparable(mine) == _comparable(theirs), mine.dialogue_id
        assert theirs.assistant.name == "remote:team" and mine.stop.utterance
    assert read_manifest(server_cfg.out / "serve-par").simulator == engine[0].simulator  # effective params

    # The client's run: the same conversations, seen from the assistant's side.
    assert [r.status for r in prep.simulator.results()] == ["completed"]
    assert [t.scenario.topic_id for t in client] == ["ana-run", "ben-food", "ben-city"]
    for mine, seen in zip(engine, client):
        assert seen.stop.utterance == mine.stop.utterance and seen.error is None
        assert [x.user.utterance for x in seen.turns] == [x.user.utterance for x in mine.turns]
        for a, b in zip(mine.turns, seen.turns):
            assert _side(a) == _side(b)
            assert [s.name for s in b.stages] == ["retrieve", "generate", "simapi.continue"]  # the server's time


def _side(turn) -> dict[str, Any]:
    return turn.assistant.model_dump(mode="json")
