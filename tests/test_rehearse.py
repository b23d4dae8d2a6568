"""`simloop rehearse` against our own `simloop serve`.

The slow test uses the real stack on both sides (offline simulator with MiniLM in the
server, bm25_extractive with pyserini and MiniLM in the client), in one process so the
JVM and MiniLM boot once; it "crashes" the client mid-run and resumes.  The fast test
runs the real CLI in a subprocess with scripted plugins.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import EchoAssistant
from simloop.config import RunConfig
from simloop.run.plugins import Context, load_plugin
from simloop.run.recorder import read_manifest, read_transcripts
from simloop.simapi.rehearse import RehearseOptions, rehearse
from simloop.simapi.client import SimApiClient
from simloop.simapi.app import ServeOptions, create_app, running
from simloop.fakes.seams import HashEmbedder

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "cmVoZWFyc2FsLXRva2VuLTQy"


async def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def _answered(state_file: Path) -> int:
    try:
        last = json.loads(state_file.read_text())["last"]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return 0
    return (len(last["history"]) - 1) // 2 if last else 0


@pytest.mark.slow
async def test_rehearse_end_to_end_with_client_crash(tmp_path):
    server_cfg = RunConfig.model_validate({
        "out": str(tmp_path / "out"), "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 3}})
    app = create_app(server_cfg, {"team-x": TOKEN})
    ctx = Context(RunConfig())
    assistant = load_plugin("assistant", "bm25_extractive", {}, ctx)
    opts = RehearseOptions(run_id="e2e", state_dir=tmp_path / "state")
    state_file = opts.state_dir / "e2e.json"
    try:
        async with running(app) as url:
            client = SimApiClient(url, TOKEN)
            crashed = asyncio.create_task(rehearse(client, assistant, opts))
            await _wait_for(lambda: _answered(state_file) >= 2 or crashed.done(), 240, "two answered turns")
            assert not crashed.done(), "the run ended before the crash"
            crashed.cancel()  # the client dies mid-conversation
            await asyncio.gather(crashed, return_exceptions=True)
            await client.aclose()

            client = SimApiClient(url, TOKEN)
            results = await asyncio.wait_for(rehearse(client, assistant, opts), timeout=240)
            await client.aclose()
    finally:
        await ctx.aclose()
    (result,) = results
    assert result.status == "completed" and result.resumed == 1 and result.assistant_errors == 0
    assert json.loads(state_file.read_text())["completed"] is True

    run_dir = server_cfg.out / "serve-e2e"
    transcripts = list(read_transcripts(run_dir))  # every line validates against the schema
    assert len(transcripts) == 3 and len({t.dialogue_id for t in transcripts}) == 3
    for t in transcripts:
        assert t.assistant.name == "remote:team-x" and t.error is None
        assert t.stop.by == "simulator" or t.stop.reason == "max_turns", t.stop
        ptkb_size = len(next(p for p in _personas() if p.id == t.scenario.persona_id).ptkb)
        for turn in t.turns:
            if turn.user.intent in ("farewell", "give_up"):
                assert turn.assistant.response == ""  # the API ignores the reply to a farewell
                continue
            a = turn.assistant
            assert a.response and a.passages and any(p.used for p in a.passages)  # meta.simloop arrived
            assert all(1 <= u.index <= ptkb_size for u in a.ptkb_provenance)
            assert [s.name for s in turn.stages][-4:] == ["ptkb", "rewrite", "retrieve", "generate"]
    assert read_manifest(run_dir).status == "finished"


def _personas():
    from simloop.inputs.personas import load_personas

    return load_personas(ROOT / "personas")


async def test_rehearse_cli_with_scripted_plugins(tmp_path):
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "zoe.toml").write_text(
        'id = "zoe"\nptkb = ["I keep bees."]\n'
        '[[topics]]\nid = "bees"\ntitle = "Bees"\n[[topics.rubric]]\nid = "q1"\nquestion = "How do bees make honey?"\n'
        '[[topics]]\nid = "hives"\ntitle = "Hives"\n[[topics.rubric]]\nid = "q1"\nquestion = "What is a hive?"\n')
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"), "scenarios": {"personas_dir": str(personas)},
                                    "simulator": {"name": "test_server_protocol:QuickSimulator"}})
    app = create_app(cfg, {"team-y": TOKEN}, ServeOptions(), overrides={"embedder": HashEmbedder()})
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    async with running(app) as url:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "simloop", "rehearse", "--api", url, "--token-file", str(token_file),
            "--assistant", "conftest:EchoAssistant", "--run-id", "cli", "--state-dir", str(tmp_path / "state"),
            cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
        assert proc.returncode == 0, err.decode()
        assert out.decode().strip().splitlines()[-1] == "cli"
        assert "cli: completed, 2 sessions, 2 turns" in err.decode()

        bad = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "simloop", "rehearse", "--api", url, "--token", "wrong",
            "--assistant", "conftest:EchoAssistant", "--state-dir", str(tmp_path / "state"),
            cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(bad.communicate(), timeout=120)
        assert bad.returncode == 2 and err.decode().count("\n") == 1 and "rejected the token" in err.decode()
    ts = list(read_transcripts(tmp_path / "out" / "serve-cli"))
    assert [t.scenario.topic_id for t in ts] == ["bees", "hives"]
    assert TOKEN not in (tmp_path / "state" / "cli.json").read_text()  # resume state has no token
    assert ts[0].turns[0].assistant.passages[0].used is True  # EchoAssistant's passage, via meta.simloop
    assert ts[0].turns[0].assistant.ptkb_provenance[0].index == 1


class DropOneReply(httpx.AsyncHTTPTransport):
    """Delivers every request, but loses the server's answer to the ``nth`` /continue:
    the server has moved on, the client does not know it."""

    def __init__(self, nth: int):
        super().__init__()
        self.nth, self.seen = nth, 0

    async def handle_async_request(self, request):
        response = await super().handle_async_request(request)
        if request.url.path.endswith("/continue"):
            self.seen += 1
            if self.seen == self.nth:
                await response.aread()
                raise httpx.ReadError("connection reset (test)")
        return response


async def test_lost_reply_is_recovered_through_session(tmp_path):
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"),
                                    "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 2},
                                    "simulator": {"name": "test_server_protocol:QuickSimulator"}})
    app = create_app(cfg, {"team-z": TOKEN})
    opts = RehearseOptions(run_id="lossy", state_dir=tmp_path / "state")
    async with running(app) as url:
        client = SimApiClient(url, TOKEN, transport=DropOneReply(nth=3))
        (result,) = await asyncio.wait_for(rehearse(client, EchoAssistant(), opts), timeout=60)
        await client.aclose()
    assert result.status == "completed" and result.resumed == 1
    ts = list(read_transcripts(tmp_path / "out" / "serve-lossy"))
    assert len(ts) == 2
    for t in ts:  # every question answered exactly once, in order
        asked = [turn.user.utterance for turn in t.turns if turn.user.intent == "ask"]
        assert len(asked) == len(set(asked))
    assert result.turns == sum(1 for t in ts for turn in t.turns if turn.user.intent == "ask")
