"""remote_http against a tiny HTTP server on 127.0.0.1: success, timeout, 500, bad bodies."""

from __future__ import annotations

import asyncio
import json

import pytest

from agents.remote_http import REMOTE_ERROR_RESPONSE, RemoteHTTP
from simloop.config import RunConfig
from simloop.errors import BadInputError, DialogueError
from simloop.run.engine import run_dialogue
from simloop.run.plugins import Context, load_plugin
from simloop.run.session import DialogueSpec
from simloop.schema import DialogueState, PluginRef, Turn, UserTurn
from tests.helpers.data import make_scenario
from tests.helpers.plugins import ScriptedSimulator

GOOD = {"response": "Porto is lovely.", "rewritten_query": "porto vegetarian food",
        "passages": [{"docid": "Porto", "score": 3.5, "used": True, "text": "Porto is a city."},
                     {"docid": "Tofu", "score": 1.0, "used": False, "extra": "ignored"}],
        "ptkb_provenance": [{"index": 2, "score": 0.8}, {"index": 99}, {"index": 1, "score": 0.1, "used": False}],
        "debug": "ignored"}


class TinyServer:
    """Answers POSTs by ``mode``: ok | slow | 500 | notjson | incomplete; records requests."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.connections = 0
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> TinyServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/respond"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:  # keep-alive: one connection may carry many requests
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                lines = head.split("\r\n")
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.requests.append(json.loads(body))
                self.headers.append(headers)
                status, payload = await self._reply()
                writer.write(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _reply(self) -> tuple[str, bytes]:
        if self.mode == "slow":
            await asyncio.sleep(2.0)
        if self.mode == "500":
            return "500 Internal Server Error", b'{"error": "boom"}'
        if self.mode == "notjson":
            return "200 OK", b"<html>hello</html>"
        if self.mode == "incomplete":
            return "200 OK", b'{"passages": []}'
        return "200 OK", json.dumps(GOOD).encode()


@pytest.fixture
async def server():
    async with TinyServer() as s:
        yield s


def state_after_one_turn() -> DialogueState:
    scenario = make_scenario()
    state = DialogueState(dialogue_id="d1", scenario=scenario)
    state.turns.append(Turn(index=1, user=UserTurn(utterance="Hi, I want food tips."),
                            assistant={"response": "Sure, where?"}))
    state.user = UserTurn(utterance="In Porto, please.")
    return state


async def test_success_maps_the_protocol(server, monkeypatch):
    monkeypatch.setenv("REMOTE_TEST_TOKEN", "tok-123")
    agent = RemoteHTTP(None, url=server.url, timeout_s=5, token_env="REMOTE_TEST_TOKEN")
    reply = await agent.respond(state_after_one_turn())
    assert server.requests == [{"dialogue_id": "d1", "turn": 2, "utterance": "In Porto, please.",
                                "history": [{"utterance": "Hi, I want food tips.", "response": "Sure, where?"}],
                                "ptkb": ["I am vegetarian.", "I live in Porto.", "I play the cello."]}]
    assert server.headers[0]["authorization"] == "Bearer tok-123"
    assert reply.response == "Porto is lovely." and reply.rewritten_query == "porto vegetarian food"
    assert [(p.rank, p.docid, p.score, p.used) for p in reply.passages] == [(1, "Porto", 3.5, True),
                                                                           (2, "Tofu", 1.0, False)]
    assert [(u.index, u.statement, u.score, u.used) for u in reply.ptkb_provenance] == \
        [(2, "I live in Porto.", 0.8, True), (1, "I am vegetarian.", 0.1, False)]  # no flag: used
    assert reply.context.strategy == "remote"
    [stage] = reply.stages
    assert stage.name == "remote" and stage.error is None and stage.note == "dropped 1 PTKB index(es) outside 1..3"


@pytest.mark.parametrize("mode,cause", [("slow", "timeout after 0.3s"), ("500", "HTTP 500"),
                                        ("notjson", "bad reply"), ("incomplete", "bad reply: response")])
async def test_failures_raise_a_dialogue_error(server, mode, cause):
    server.mode = mode
    agent = RemoteHTTP(None, url=server.url, timeout_s=0.3)
    with pytest.raises(DialogueError, match=f"remote_http turn 2: {cause}.*POST {server.url}"):
        await agent.respond(state_after_one_turn())


async def test_connection_refused_is_a_dialogue_error():
    agent = RemoteHTTP(None, url="http://127.0.0.1:9/none", timeout_s=2)
    with pytest.raises(DialogueError, match="connection failed"):
        await agent.respond(state_after_one_turn())


@pytest.mark.parametrize("mode,cause", [("slow", "timeout"), ("500", "HTTP 500")])
async def test_on_error_reply_records_the_turn(server, mode, cause):
    server.mode = mode
    reply = await RemoteHTTP(None, url=server.url, timeout_s=0.3, on_error="reply").respond(state_after_one_turn())
    assert reply.response == REMOTE_ERROR_RESPONSE and reply.passages == []
    assert cause in reply.stages[0].error and reply.stages[0].latency_ms > 0


async def test_engine_records_remote_failures(server):
    spec = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="remote_http"),
                        max_turns=5, timeout_s=30)
    agent = RemoteHTTP(None, url=server.url)
    ok = await run_dialogue(make_scenario(), ScriptedSimulator(), agent, spec)
    again = await run_dialogue(make_scenario(dialogue_id="d2"), ScriptedSimulator(), agent, spec)
    await agent.aclose()
    assert server.connections == 1  # one client for the run: every turn of both dialogues on one connection
    assert ok.error is None and again.error is None and ok.stop.reason == "user_satisfied" and len(ok.turns) == 3
    assert all(remote(t).name == "remote" and t.assistant.passages[0].docid == "Porto" for t in ok.turns)
    assert [r["turn"] for r in server.requests] == [1, 2, 3] * 2 and len(server.requests[2]["history"]) == 2

    server.mode = "500"
    failed = await run_dialogue(make_scenario(), ScriptedSimulator(), RemoteHTTP(None, url=server.url), spec)
    assert failed.stop.reason == "error" and failed.turns == []
    assert failed.error.type == "DialogueError" and "HTTP 500" in failed.error.message
    assert failed.error.source == "assistant"

    lenient = await run_dialogue(make_scenario(), ScriptedSimulator(),
                                 RemoteHTTP(None, url=server.url, on_error="reply"), spec)
    assert lenient.error is None and len(lenient.turns) == 3
    assert all("HTTP 500" in remote(t).error for t in lenient.turns)


def remote(turn):
    [stage] = [s for s in turn.stages if s.name == "remote"]
    return stage


def test_registered_and_params_checked():
    ctx = Context(RunConfig())
    assert isinstance(load_plugin("assistant", "remote_http", {"url": "http://127.0.0.1:1/x"}, ctx), RemoteHTTP)
    for bad in ({"url": "ftp://x"}, {"url": "http://x", "on_error": "ignore"}, {"url": "http://x", "timeout_s": 0}, {}):
        with pytest.raises(BadInputError):
            load_plugin("assistant", "remote_http", bad, ctx)
