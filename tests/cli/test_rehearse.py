"""`simloop rehearse` (the engine with the ``simapi`` simulator) against our own `simloop serve`.

The slow test uses the real stack on both sides (offline simulator with MiniLM in the
server, bm25_extractive with pyserini, MiniLM and MPNet in the client), in one process so
the JVM and the models boot once; it "crashes" the client mid-run and resumes.  The fast tests
run the real CLI in a subprocess with scripted plugins, and lose a reply on the wire.
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

from simloop.config import RunConfig
from simloop.fakes.seams import HashEmbedder
from simloop.parts.generate import NO_ANSWER, NOTHING_NEW
from simloop.run import read_manifest, read_transcripts
from simloop.run.runner import execute, prepare_run
from simloop.simapi.app import ServeOptions, create_app, running
from simloop.text import truncate_wordpunct as truncate_tokens
from tests.helpers.data import ROOT

TOKEN = "cmVoZWFyc2FsLXRva2VuLTQy"
SECRETS = {"REHEARSE_TOKEN": TOKEN}


def client_cfg(tmp: Path, url: str, run_id: str, assistant: str = "tests.helpers.plugins:EchoAssistant") -> RunConfig:
    return RunConfig.model_validate({
        "out": str(tmp / "client"), "run_id": run_id, "max_turns": 1000,
        "simulator": {"name": "simapi", "params": {"api": url, "run_id": run_id, "token_env": "REHEARSE_TOKEN"}},
        "assistant": {"name": assistant}})


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
    state_file = tmp_path / "client" / ".rehearse" / "e2e.json"
    async with running(app) as url:
        cfg = client_cfg(tmp_path, url, "e2e", assistant="bm25_extractive")
        prep = prepare_run(cfg, secrets=SECRETS)
        crashed = asyncio.create_task(execute(prep))
        await _wait_for(lambda: _answered(state_file) >= 2 or crashed.done(), 240, "two answered turns")
        assert not crashed.done(), "the run ended before the crash"
        crashed.cancel()  # the client dies mid-conversation
        await asyncio.gather(crashed, return_exceptions=True)
        assert read_manifest(prep.run_dir).status == "interrupted"

        prep = prepare_run(cfg, resume=prep.run_dir, secrets=SECRETS)
        await asyncio.wait_for(execute(prep), timeout=240)
    (result,) = prep.simulator.results()
    assert result.status == "completed" and result.resumed == 1 and result.abandoned == 0
    assert json.loads(state_file.read_text())["completed"] is True

    served = list(read_transcripts(server_cfg.out / "serve-e2e"))  # every line validates against the schema
    assert len(served) == 3 and len({t.dialogue_id for t in served}) == 3
    for t in served:
        assert t.assistant.name == "remote:team-x" and t.error is None
        assert t.stop.by == "simulator" or t.stop.reason == "max_turns", t.stop
        ptkb_size = len(next(p for p in _personas() if p.id == t.scenario.persona_id).ptkb)
        for turn in t.turns:  # every turn is answered (the closing line is not a turn)
            a = turn.assistant
            # meta.simloop arrived: cited passages, unless the answer is the honest no-answer line
            honest = a.response in (NO_ANSWER, NOTHING_NEW)  # nothing found, or nothing new
            assert a.response and a.passages and (any(p.used for p in a.passages) or honest)
            assert all(1 <= u.index <= ptkb_size for u in a.ptkb_provenance)
            assert [s.name for s in turn.stages][-6:-1] == ["ptkb", "spelling", "rewrite", "retrieve", "generate"]
    assert read_manifest(server_cfg.out / "serve-e2e").status == "finished"

    # The client's own run directory: the same three dialogues, the one cut by the crash whole.
    mine = {(t.scenario.persona_id, t.scenario.topic_id): t for t in read_transcripts(prep.run_dir)}
    assert read_manifest(prep.run_dir).status == "finished" and len(mine) == 3
    for t in served:
        local = mine[(t.scenario.persona_id, t.scenario.topic_id)]
        assert [x.user.utterance for x in local.turns] == [x.user.utterance for x in t.turns]
        for x, y in zip(local.turns, t.turns):  # the server got the response cut to its 250 tokens
            cut = truncate_tokens(x.assistant.response, 250)
            assert y.assistant.response == cut
            assert (cut != x.assistant.response) == ("cut to 250 tokens" in str(x.stages[-1].model_dump()))
        assert local.stop.utterance == t.stop.utterance
        assert all(x.assistant.passages for x in local.turns)  # provenance kept across the crash


def _personas():
    from simloop.inputs.personas import load_personas

    return load_personas(ROOT / "personas")


def _write_personas(tmp_path: Path) -> Path:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "zoe.toml").write_text(
        'id = "zoe"\nptkb = ["I keep bees."]\n'
        '[[topics]]\nid = "bees"\ntitle = "Bees"\n[[topics.rubric]]\nid = "q1"\nquestion = "How do bees make honey?"\n'
        '[[topics]]\nid = "hives"\ntitle = "Hives"\n[[topics.rubric]]\nid = "q1"\nquestion = "What is a hive?"\n')
    return personas


async def _cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "simloop", "rehearse", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    return proc.returncode, out.decode(), err.decode()


async def test_rehearse_cli_with_scripted_plugins(tmp_path):
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"),
                                    "scenarios": {"personas_dir": str(_write_personas(tmp_path))},
                                    "simulator": {"name": "tests.helpers.plugins:QuickSimulator"}})
    fake = HashEmbedder()
    app = create_app(cfg, {"team-y": TOKEN}, ServeOptions(), overrides={"embedder": fake, "embedder:mpnet": fake})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEAM_TOKEN": TOKEN}
    common = ["--assistant", "tests.helpers.plugins:EchoAssistant", "--out", str(tmp_path / "client")]
    async with running(app) as url:
        code, out, err = await _cli("--api", url, "--token-env", "TEAM_TOKEN", "--run-id", "cli", *common, env=env)
        assert code == 0, err
        assert out.strip().splitlines()[-1] == str(tmp_path / "client" / "cli")  # the run directory, last
        assert "cli: completed, 2 sessions, 2 turns" in err

        code, _, err = await _cli("--api", url, "--token", "wrong", "--run-id", "bad", *common, env=env)
        assert code == 2 and err.count("\n") == 1 and "rejected the token" in err
        assert not (tmp_path / "client" / "bad").exists()  # bad input: nothing written

        code, _, err = await _cli("--api", url, "--token-env", "NOT_SET_ANYWHERE", *common, env=env)
        assert code == 2 and "NOT_SET_ANYWHERE" in err and err.count("\n") == 1
    ts = list(read_transcripts(tmp_path / "out" / "serve-cli"))
    assert [t.scenario.topic_id for t in ts] == ["bees", "hives"]
    assert ts[0].turns[0].assistant.passages[0].used is True  # EchoAssistant's passage, via meta.simloop
    assert ts[0].turns[0].assistant.ptkb_provenance[0].index == 1
    mine = list(read_transcripts(tmp_path / "client" / "cli"))
    assert [(t.scenario.topic_id, len(t.turns), t.stop.utterance) for t in mine] == [
        ("bees", 1, "Thanks, that is all. Bye!"), ("hives", 1, "Thanks, that is all. Bye!")]
    assert read_manifest(tmp_path / "client" / "cli").simulator.params["token_env"] == "TEAM_TOKEN"
    for path in [*(tmp_path / "client").rglob("*"), *(tmp_path / "out").rglob("*")]:
        if path.is_file():  # the token is in no run directory and no state file
            assert TOKEN.encode() not in path.read_bytes(), path


async def test_rehearse_limit_counts_only_new_sessions_on_resume(tmp_path):
    # `--limit 1` twice: the second invocation starts on the session the first one recorded
    # and ended; it must add one new session (hives), not count the old one and stop.
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"),
                                    "scenarios": {"personas_dir": str(_write_personas(tmp_path))},
                                    "simulator": {"name": "tests.helpers.plugins:QuickSimulator"}})
    fake = HashEmbedder()
    app = create_app(cfg, {"team-l": TOKEN}, ServeOptions(), overrides={"embedder": fake, "embedder:mpnet": fake})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TEAM_TOKEN": TOKEN}
    args = ["--token-env", "TEAM_TOKEN", "--run-id", "lim", "--limit", "1",
            "--assistant", "tests.helpers.plugins:EchoAssistant", "--out", str(tmp_path / "client")]
    async with running(app) as url:
        code, _, err = await _cli("--api", url, *args, env=env)
        assert code == 0, err
        assert "lim: incomplete, 1 sessions" in err
        assert [t.scenario.topic_id for t in read_transcripts(tmp_path / "client" / "lim")] == ["bees"]
        code, _, err = await _cli("--api", url, *args, env=env)
        assert code == 0, err
        assert ", 1 sessions," in err and "resumed" in err, err
    mine = [t.scenario.topic_id for t in read_transcripts(tmp_path / "client" / "lim")]
    served = [t.scenario.topic_id for t in read_transcripts(tmp_path / "out" / "serve-lim")]
    assert mine == served == ["bees", "hives"]


async def test_rehearse_records_why_a_simloop_server_ended_each_session(tmp_path):
    # bees: one question, the user is satisfied; hives: three questions, but the server's
    # max_turns is 2.  The team's side used to call both "user_satisfied".
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "zoe.toml").write_text(
        'id = "zoe"\nptkb = ["I keep bees."]\n'
        '[[topics]]\nid = "bees"\ntitle = "Bees"\n[[topics.rubric]]\nid = "q1"\nquestion = "How do bees make honey?"\n'
        '[[topics]]\nid = "hives"\ntitle = "Hives"\n' + "".join(
            f'[[topics.rubric]]\nid = "q{i}"\nquestion = "Hive question {i}?"\n' for i in (1, 2, 3)))
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"), "max_turns": 2,
                                    "scenarios": {"personas_dir": str(personas)},
                                    "simulator": {"name": "tests.helpers.plugins:QuickSimulator"}})
    fake = HashEmbedder()
    app = create_app(cfg, {"team-s": TOKEN}, ServeOptions(), overrides={"embedder": fake, "embedder:mpnet": fake})
    async with running(app) as url:
        prep = prepare_run(client_cfg(tmp_path, url, "why"), secrets=SECRETS)
        await asyncio.wait_for(execute(prep), timeout=60)
    served = {t.scenario.topic_id: t.stop for t in read_transcripts(tmp_path / "out" / "serve-why")}
    mine = {t.scenario.topic_id: t.stop for t in read_transcripts(prep.run_dir)}
    assert {k: v.reason for k, v in served.items()} == {"bees": "user_satisfied", "hives": "max_turns"}
    assert {k: v.reason for k, v in mine.items()} == {"bees": "user_satisfied", "hives": "max_turns"}
    assert "reached max_turns=2" in mine["hives"].detail and "Sim.API server" in mine["hives"].detail
    assert mine["bees"].utterance == served["bees"].utterance == "Thanks, that is all. Bye!"


def test_server_stop_is_read_only_when_a_simloop_server_sends_a_known_reason():
    from simloop.simapi.protocol import UserUtterance, stop_meta

    base = dict(timestamp="t", run_id="r", topic_id="1", user_id="u", utterance="Bye.", history=[],
                last_response_of_session=True)
    told = UserUtterance(**base, user_meta={"ptkb": [], **stop_meta("max_turns", "reached max_turns=2")})
    assert told.server_stop() == ("max_turns", "reached max_turns=2")
    assert UserUtterance(**base, user_meta={"ptkb": []}).server_stop() is None  # the official server
    assert UserUtterance(**base).server_stop() is None
    assert UserUtterance(**base, user_meta=stop_meta("bored", "")).server_stop() is None  # not a reason we know
    assert UserUtterance(**base, user_meta={"simloop": "x"}).server_stop() is None


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


@pytest.mark.parametrize("nth", [3, 4])  # inside a session; the call that opens the next topic
async def test_lost_reply_is_recovered_through_session(tmp_path, nth):
    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"),
                                    "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 2},
                                    "simulator": {"name": "tests.helpers.plugins:QuickSimulator"}})
    app = create_app(cfg, {"team-z": TOKEN})
    async with running(app) as url:
        prep = prepare_run(client_cfg(tmp_path, url, "lossy"), secrets=SECRETS,
                           overrides={"simapi.transport": DropOneReply(nth=nth)})
        await asyncio.wait_for(execute(prep), timeout=60)
    (result,) = prep.simulator.results()
    assert result.status == "completed" and result.resumed == 1
    ts = list(read_transcripts(tmp_path / "out" / "serve-lossy"))
    assert len(ts) == 2
    for t in ts:  # every question answered exactly once, in order
        asked = [turn.user.utterance for turn in t.turns]
        assert len(asked) == len(set(asked))
    assert result.turns == sum(len(t.turns) for t in ts)
    mine = list(read_transcripts(prep.run_dir))
    assert [len(t.turns) for t in mine] == [len(t.turns) for t in ts] and all(t.error is None for t in mine)


def test_sync_turns_keeps_provenance_of_a_reply_the_server_got_cut():
    from simloop.schema import AssistantTurn, Stage, Turn, UserTurn
    from simloop.simulators.simapi import sync_turns

    long = " ".join(f"w{i}" for i in range(300))
    mine = [Turn(index=1, user=UserTurn(utterance="q1"), assistant=AssistantTurn(response=long),
                 stages=[Stage(name="generate")])]
    cut = truncate_tokens(long, 250)
    history = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": cut}]
    kept, intact = sync_turns(mine, history)  # compared as sent: the cut reply does not match
    assert not intact and kept[0].stages == [] and kept[0].assistant.response == cut
    kept, intact = sync_turns(mine, history, lambda r: truncate_tokens(r, 250))
    assert intact and kept[0].stages[0].name == "generate" and kept[0].assistant.response == long


async def test_session_reply_of_an_ended_session_says_why_it_ended(tmp_path):
    # A team that crashes after the closing line arrived but before it recorded the dialogue
    # resumes through /session, whose reply clears the flags; it carried no reason, and the
    # team recorded "user_satisfied" where the server recorded "max_turns" or "user_gave_up".
    from simloop.simapi.protocol import UserUtterance
    from tests.helpers.simapi import SimApi

    cfg = RunConfig.model_validate({"out": str(tmp_path / "out"),
                                    "scenarios": {"personas_dir": str(_write_personas(tmp_path))},
                                    "simulator": {"name": "tests.helpers.plugins:QuickSimulator"}})
    fake = HashEmbedder()
    app = create_app(cfg, {"team-s": TOKEN}, ServeOptions(), overrides={"embedder": fake, "embedder:mpnet": fake})
    async with running(app) as url:
        api = SimApi(url, TOKEN)
        try:
            first = (await api.start("ended")).json()
            closing = (await api.cont("ended", "Bees make honey from nectar.")).json()
            again = (await api.get("session", "ended")).json()
        finally:
            await api.close()
    assert not first["last_response_of_session"] and closing["last_response_of_session"]
    assert again["utterance"] == closing["utterance"] and not again["last_response_of_session"]
    assert UserUtterance(**again).server_stop() == UserUtterance(**closing).server_stop()
    assert UserUtterance(**closing).server_stop() == ("user_satisfied", "all answered")
