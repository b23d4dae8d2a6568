"""`simloop serve` against a client written only from SIMULATION_API.md §1–§3.

The client side (``SimApi`` of tests/helpers/simapi.py and the loops here that use it) is plain
httpx and JSON: no simloop import, so it checks the protocol, not our own models.  The server side
is the real app with the real offline simulator (a hashing embedder instead of MiniLM) or a
deterministic test simulator.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager

import httpx

from simloop.config import RunConfig
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.run import read_manifest, read_transcripts
from simloop.simapi.app import ServeOptions, create_app, running
from simloop.simapi.runs import ServeLimits
from tests.helpers.cli import free_port
from tests.helpers.data import ROOT
from tests.helpers.plugins import QuickSimulator
from tests.helpers.simapi import TOKEN_A, TOKEN_B, TOKENS, SimApi, make_cfg


@asynccontextmanager
async def serve(cfg: RunConfig, limits: ServeLimits | None = None):
    fakes = {"embedder": HashEmbedder(), "retriever": MemoryRetriever([])}
    app = create_app(cfg, TOKENS, ServeOptions(limits=limits or ServeLimits()), overrides=fakes)
    async with running(app) as url:
        yield url


# ----------------------------------------------------------------------------- the doc-only client


def answer(utt: dict) -> dict:
    """A system turn: a response, a ranked citation dict and the first PTKB statement (2025 and 2026 fields)."""
    ptkb = utt.get("user_meta", {}).get("ptkb", [])[:1]
    return {"citations": {"clueweb22-en0000-01-00001:3": 14.5, "clueweb22-en0000-02-00002:0": 9.25},
            "ptkb_provenance": ptkb, "meta": {"ptkb_provenance": ptkb}}


async def play(api: SimApi, run_id: str, utt: dict, max_calls: int = 200,
               stop_after: int | None = None) -> tuple[dict, int]:
    """Answer until the run ends (or ``stop_after`` calls); bounded by ``max_calls``."""
    for calls in range(max_calls):
        if utt["last_response_of_run"] or (stop_after is not None and calls >= stop_after):
            return utt, calls
        said = f"About your question: {utt['utterance']} Marathons are 42 km."
        text = "" if utt["last_response_of_session"] else said
        r = await api.cont(run_id, text, **answer(utt))
        assert r.status_code == 200, r.text
        utt = r.json()
    raise AssertionError("run did not end within the call budget")


# ----------------------------------------------------------------------------- tests


async def test_whole_run_with_client_crash_and_resume(tmp_path):
    cfg = make_cfg(tmp_path)
    async with serve(cfg) as url:
        api = SimApi(url, TOKEN_A)
        assert (await api.http.get("/auth/verify")).json() == {"team_id": "team-a"}
        r = await api.start("r1", track_persona=True)
        assert r.status_code == 200, r.text
        first = r.json()
        assert set(first) >= {"timestamp", "run_id", "topic_id", "user_id", "utterance", "history",
                              "last_response_of_session", "last_response_of_run", "user_meta"}
        assert first["history"] == [{"role": "user", "content": first["utterance"]}]
        assert (first["topic_id"], first["user_id"]) == ("ana-run", "ana")
        assert first["user_meta"]["ptkb"][0] == "I live in Lisbon."

        seen, _ = await play(api, "r1", first, stop_after=3)
        await api.close()  # the client "crashes"; a new one knows only the run id
        api = SimApi(url, TOKEN_A)
        r = await api.get("session", "r1")
        assert r.status_code == 200
        resumed = r.json()
        assert resumed["utterance"] == seen["utterance"] and resumed["history"] == seen["history"]
        assert not resumed["last_response_of_session"] and not resumed["last_response_of_run"]

        last, _ = await play(api, "r1", resumed)
        assert last["last_response_of_session"] and last["last_response_of_run"]
        status = (await api.get("status", "r1")).json()
        assert status["status"] in ("complete", "completed")
        assert status["open_topics"] == [] and status["done_topics"] == ["ana-run", "ben-food", "ben-city"]
        assert {"user_id": "ben", "topic_id": "ben-city"} in status["done_user_topic_pairs"]
        r = await api.cont("r1", "")
        assert r.status_code in (400, 428)  # "No more open topics"

        dump = await api.get("dump", "r1")
        assert dump.headers["content-type"].startswith("application/x-ndjson")
        records = [json.loads(line) for line in dump.text.splitlines() if line.strip()]
        await api.close()

    by_topic: dict[str, list[dict]] = {}
    for rec in records:
        meta = rec["metadata"]
        assert meta["type"] == "interactive" and meta["run_id"] == "r1" and meta["team_id"] == "team-a"
        assert meta["track_persona"] is True and rec["responses"][0]["rank"] == 1
        topic, _, number = meta["topic_id"].rpartition("_")
        by_topic.setdefault(topic, []).append(rec)
        assert int(number) == len(by_topic[topic])  # numbered from 1 per topic
    assert list(by_topic) == ["ana-run", "ben-food", "ben-city"]
    for recs in by_topic.values():
        assert recs[-1]["responses"][0]["text"] is None  # the closing line: no answer
        answered = recs[0]["responses"][0]
        assert recs[0]["references"] == answered["citations"] == {
            "clueweb22-en0000-01-00001:3": 14.5, "clueweb22-en0000-02-00002:0": 9.25}
        assert answered["ptkb_provenance"] == ["I live in Lisbon."]
        assert answered["user_rubrik"] == "What is a marathon and how long is it?"
        assert isinstance(answered["user_rubrik_score"], (int, float))

    run_dir = cfg.out / "serve-r1"
    transcripts = list(read_transcripts(run_dir))
    assert [t.dialogue_id.split("--")[1] for t in transcripts] == ["ana-run", "ben-food", "ben-city"]
    for t in transcripts:
        assert t.assistant.name == "remote:team-a" and t.simulator.name == "offline"
        assert t.stop.by == "simulator" and t.stop.utterance  # the closing line ends it, it is not a turn
        assert t.stop.utterance == by_topic[t.scenario.topic_id][-1]["responses"][0]["user_utterance"]
        assert all(x.assistant.response for x in t.turns) and all(x.user.grade is not None for x in t.turns)
        assert len(t.turns) == len(by_topic[t.scenario.topic_id]) - 1
        turn = t.turns[0]
        assert [p.docid for p in turn.assistant.passages] == ["clueweb22-en0000-01-00001:3",
                                                              "clueweb22-en0000-02-00002:0"]
        assert [(u.index, u.statement) for u in turn.assistant.ptkb_provenance] == [(1, "I live in Lisbon.")]
        assert turn.user.grade is not None and turn.latency_ms > 0
    assert read_manifest(run_dir).status == "finished"


async def test_every_error_code(tmp_path):
    cfg = make_cfg(tmp_path, simulator="tests.helpers.plugins:QuickSimulator")
    async with serve(cfg, ServeLimits(run_budget=2, debug_budget=1, max_response_tokens=20)) as url:
        a, b = SimApi(url, TOKEN_A), SimApi(url, TOKEN_B)
        anon, wrong = SimApi(url, None), SimApi(url, "bm90LWEtdG9rZW4=")
        assert (await anon.http.get("/auth/verify")).status_code == 401
        assert (await wrong.http.get("/auth/verify")).status_code == 401
        assert (await wrong.start("x")).status_code == 401
        basic = await a.http.get("/auth/verify", headers={"Authorization": f"Basic {TOKEN_A}"})
        assert basic.status_code == 401

        assert (await a.start("")).status_code == 400
        assert (await a.start("r", description="")).status_code == 400
        assert (await a.start("r", team_id="team-b")).status_code == 403
        assert (await a.start("r")).status_code == 200
        assert (await a.start("r")).status_code == 412
        assert (await b.start("r")).status_code == 412  # run ids are global
        assert (await a.cont("nope", "hi")).status_code == 428
        assert (await a.get("session", "nope")).status_code == 428
        assert (await a.get("status", "nope")).status_code == 404
        assert (await a.get("dump", "nope")).status_code == 404
        assert (await b.get("status", "r")).status_code == 404  # another team's run
        assert (await b.cont("r", "hi")).status_code == 403
        assert (await b.get("session", "r")).status_code == 403
        long = " ".join(["word"] * 21)
        r = await a.cont("r", long)
        assert r.status_code == 422 and "too long" in r.text
        assert (await a.start("r2")).status_code == 200
        assert (await a.start("r3")).status_code == 403  # run budget of 2 used
        budget = (await a.http.get("/budget/check")).json()["remaining"]
        assert budget["run"] == {"remaining": 0, "unit": "runs"}
        utt, _ = await play(a, "r", (await a.get("session", "r")).json(), stop_after=3)
        assert utt["topic_id"] == "ben-food"  # runs already started go on past the budget

        d = SimApi(url, TOKEN_A, api="debug")
        utt = (await d.start("d1")).json()
        assert (await d.start("d2")).status_code == 403  # the one debug session is in use
        for _ in range(10):  # finish the one debug session the budget allows
            if utt["last_response_of_session"]:
                break
            utt = (await d.cont("d1", "an answer")).json()
        assert utt["last_response_of_session"]
        r = await d.cont("d1", "")  # would open a second session
        assert r.status_code == 403
        assert (await a.http.get("/budget/check")).json()["remaining"]["debug"]["remaining"] == 0
        for c in (a, b, anon, wrong, d):
            await c.close()
    # Tokens are never written: not in the state file, run.json or transcripts.
    for path in cfg.out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert TOKEN_A.encode() not in data and TOKEN_B.encode() not in data, path


async def test_debug_api_reuses_finished_ids(tmp_path):
    cfg = make_cfg(tmp_path, simulator="tests.helpers.plugins:QuickSimulator")
    async with serve(cfg) as url:
        d = SimApi(url, TOKEN_A, api="debug")
        for _ in range(2):
            first = (await d.start("dbg")).json()
            assert (await d.start("dbg")).status_code == 412  # still active
            last, _ = await play(d, "dbg", first)
            assert last["last_response_of_run"]
            assert (await d.get("status", "dbg")).json()["status"] == "complete"
            assert len((await d.get("dump", "dbg")).text.splitlines()) == 9  # 3 topics x (2 answers + farewell)
        assert (await d.http.get("/budget/check")).json()["remaining"]["debug"]["remaining"] == 94
        assert (await SimApi(url, TOKEN_A).get("status", "dbg")).status_code == 404  # not a /run run
        await d.close()
    assert sorted(p.name for p in cfg.out.iterdir() if p.is_dir()) == ["serve-debug-dbg", "serve-debug-dbg-2"]


async def test_2025_and_2026_fields(tmp_path):
    cfg = make_cfg(tmp_path, simulator="tests.helpers.plugins:QuickSimulator")
    async with serve(cfg) as url:
        api = SimApi(url, TOKEN_A)
        assert (await api.start("v", extra={"track_persona": True})).status_code == 200
        # 2025: top-level ptkb_provenance and a citation list; 2026: meta.ptkb_provenance.
        r = await api.cont("v", "first", citations=["clueweb22-a:1", "clueweb22-b:2"],
                           ptkb_provenance=["I am vegetarian."])
        assert r.status_code == 200
        r = await api.cont("v", "second", citations={"clueweb22-c:0": 2.0},
                           meta={"ptkb_provenance": ["I run three times a week.", "I like new things."]})
        assert r.status_code == 200
        bad = await api.cont("v", "x", meta={"ptkb_provenance": "not a list"})
        assert bad.status_code == 422
        records = [json.loads(x) for x in (await api.get("dump", "v")).text.splitlines()]
        await api.close()
    assert records[0]["metadata"]["track_persona"] is True
    assert records[0]["responses"][0]["ptkb_provenance"] == ["I am vegetarian."]
    assert records[0]["references"] == ["clueweb22-a:1", "clueweb22-b:2"]
    assert records[1]["responses"][0]["ptkb_provenance"] == ["I run three times a week.", "I like new things."]
    t = next(iter(read_transcripts(cfg.out / "serve-v")))
    assert [(u.index, u.statement) for u in t.turns[1].assistant.ptkb_provenance] == [
        (3, "I run three times a week."), (0, "I like new things.")]  # 0: not in the PTKB
    assert [p.docid for p in t.turns[0].assistant.passages] == ["clueweb22-a:1", "clueweb22-b:2"]


async def test_restart_continues_the_run(tmp_path):
    cfg = make_cfg(tmp_path)
    async with serve(cfg) as url:
        api = SimApi(url, TOKEN_A)
        utt, _ = await play(api, "keep", (await api.start("keep")).json(), stop_after=4)
        await api.close()
    assert read_manifest(cfg.out / "serve-keep").status == "interrupted"

    async with serve(cfg) as url:  # a new process would see the same: state is on disk
        api = SimApi(url, TOKEN_A)
        assert (await api.get("status", "keep")).json()["status"] == "inactive"
        resumed = (await api.get("session", "keep")).json()
        assert resumed["utterance"] == utt["utterance"] and resumed["history"] == utt["history"]
        assert (await api.get("status", "keep")).json()["status"] == "active"
        last, _ = await play(api, "keep", resumed)
        assert last["last_response_of_run"]
        await api.close()

    async with serve(cfg) as url:
        api = SimApi(url, TOKEN_A)
        assert (await api.get("status", "keep")).json()["status"] in ("complete", "completed")
        assert (await api.cont("keep", "")).status_code == 428  # completed before this start
        await api.close()
    ts = list(read_transcripts(cfg.out / "serve-keep"))
    assert len(ts) == 3 and len({t.dialogue_id for t in ts}) == 3
    assert read_manifest(cfg.out / "serve-keep").status == "finished"


BLOCKED, RELEASE = threading.Event(), threading.Event()


class BlockingSimulator(QuickSimulator):
    """Blocks its thread in ``next`` until the test releases it (a simulator doing blocking work)."""

    async def next(self, state):
        BLOCKED.set()
        if not RELEASE.wait(timeout=60):  # a server that ran it on its own loop never answers the test
            raise RuntimeError("the test never released the simulator: the server stalled")
        return await super().next(state)


async def test_blocking_simulator_does_not_stall_the_server(tmp_path):
    BLOCKED.clear()
    RELEASE.clear()
    cfg = make_cfg(tmp_path, simulator="tests.simapi.test_server_protocol:BlockingSimulator")
    async with serve(cfg) as url:
        api = SimApi(url, TOKEN_A)
        await api.start("slow")
        pending = asyncio.create_task(api.cont("slow", "an answer"))
        assert await asyncio.to_thread(BLOCKED.wait, 60)  # the simulator now blocks its thread
        assert (await api.http.get("/auth/verify")).status_code == 200  # ... and the server still answers
        assert not pending.done()
        RELEASE.set()
        assert (await pending).status_code == 200
        await api.close()


# ----------------------------------------------------------------------------- a real process


def test_serve_process_never_logs_tokens(tmp_path):
    make_cfg(tmp_path)  # writes the personas
    port = free_port()
    log = tmp_path / "serve.log"
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"# teams\nteam-a={TOKEN_A}\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIMLOOP_SERVE_TOKENS": f"team-b={TOKEN_B}"}
    cmd = [sys.executable, "-m", "simloop", "serve", "--port", str(port), "--tokens-file", str(tokens),
           "--personas", str(tmp_path / "personas"), "--out", str(tmp_path / "out"),
           "--simulator", "tests.helpers.plugins:QuickSimulator"]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):  # bounded wait for the port (20 s)
            try:
                if httpx.get(f"{base}/auth/verify", timeout=1).status_code == 401:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        h = {"Authorization": f"Bearer {TOKEN_A}"}
        utt = httpx.post(f"{base}/run/start", json={"run_id": "p", "description": "d"}, headers=h).json()
        for _ in range(20):
            if utt["last_response_of_run"]:
                break
            utt = httpx.post(f"{base}/run/continue", json={"run_id": "p", "response": "ok"}, headers=h).json()
        assert utt["last_response_of_run"]
        verified = httpx.get(f"{base}/auth/verify", headers={"Authorization": f"Bearer {TOKEN_B}"}).json()
        assert verified["team_id"] == "team-b"
        assert httpx.get(f"{base}/auth/verify", headers={"Authorization": "Bearer wrong-token"}).status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    text = log.read_text()
    assert "POST /run/continue" in text  # the access log is on ...
    assert TOKEN_A not in text and TOKEN_B not in text and "wrong-token" not in text  # ... without headers
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert TOKEN_A.encode() not in path.read_bytes() and TOKEN_B.encode() not in path.read_bytes()
    assert len(list(read_transcripts(tmp_path / "out" / "serve-p"))) == 3
