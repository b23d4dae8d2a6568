"""simloop's own HTTP/1.1 connections for plain-http endpoints (llm/wire.py), over real sockets.

A raw asyncio server on 127.0.0.1 answers with exactly the bytes a test gives it, so framing a
real server may use (chunked with extensions and trailers, a body that ends with the
connection, a 100 Continue first, bytes dribbled one at a time) and the ways a connection can
end (closed by the server between requests, cut mid-answer, silent) are all exercised; the
last tests go through openai and ``ChatModel`` to the error a run records."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx2
import pytest

from simloop.errors import LLMConnectionError, LLMTimeoutError
from simloop.llm import LLMConfig, LLMPool
from simloop.llm.wire import WireTransport

pytestmark = pytest.mark.timeout(60)

BODY = json.dumps({"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "Porto it is."},
                                "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}).encode()


def plain(body: bytes = BODY, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


class RawServer:
    """Answers each request with ``answer(n)`` (n counts requests from 0); ``dribble`` sends
    one byte at a time; ``close_after`` closes the connection after that answer."""

    def __init__(self, answer, dribble: bool = False, close_after: bool = False):
        self.answer, self.dribble, self.close_after = answer, dribble, close_after
        self.requests: list[bytes] = []
        self.connections = self.hung_up = 0
        self.open_now = self.most_open = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answer(len(self.requests) - 1)
                if answer is None:  # say nothing until the client hangs up
                    await reader.read()
                    self.hung_up += 1
                    break
                for piece in ([answer[i:i + 1] for i in range(len(answer))] if self.dribble else [answer]):
                    writer.write(piece)
                    await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.open_now -= 1
            writer.close()


async def get(transport: WireTransport, url: str, method: str = "POST", timeout: float = 5.0) -> httpx2.Response:
    request = httpx2.Request(method, url + "/v1/chat/completions", content=b'{"q": 1}',
                             extensions={"timeout": {"connect": timeout, "read": timeout, "write": timeout,
                                                     "pool": timeout}})
    return await transport.handle_async_request(request)


class Fallback(httpx2.AsyncBaseTransport):
    """The seam: what the wire transport hands on (https, streamed uploads)."""

    def __init__(self):
        self.seen: list[httpx2.Request] = []
        self.closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        return httpx2.Response(299, content=b"fallback")

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
async def wire():
    made: list[WireTransport] = []

    def make(connections: int = 8, keepalive_s: float = 5.0) -> WireTransport:
        made.append(WireTransport(connections, Fallback(), keepalive_s=keepalive_s))
        return made[-1]

    yield make
    for t in made:
        await t.aclose()


async def test_keeps_one_connection_alive_and_sends_what_httpx2_built(wire):
    srv = RawServer(lambda n: plain())
    async with srv as url:
        t = wire()
        answers = [await get(t, url) for _ in range(5)]
    assert all(a.status_code == 200 and a.json()["choices"][0]["message"]["content"] == "Porto it is." for a in answers)
    assert answers[0].headers["content-type"] == "application/json"
    assert srv.connections == 1
    head, body = srv.requests[0].split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /v1/chat/completions HTTP/1.1" and body == b'{"q": 1}'
    assert b"Content-Length: 8" in lines and any(line.startswith(b"Host: 127.0.0.1:") for line in lines)


async def test_reuses_connections_and_respects_the_limit(wire):
    srv = RawServer(lambda n: plain())
    async with srv as url:
        t = wire(connections=2)
        await asyncio.gather(*(get(t, url) for _ in range(12)))
        await get(t, url)
    assert srv.most_open <= 2 and srv.connections <= 2 and len(srv.requests) == 13


@pytest.mark.parametrize("dribble", [False, True], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize("framing", ["length", "chunked", "until-close", "continue-first"])
async def test_reads_every_framing_a_server_may_use(wire, framing, dribble):
    half = len(BODY) // 2
    answers = {
        "length": plain(),
        "chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"%x;name=value\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n"
                    % (half, BODY[:half], len(BODY) - half, BODY[half:])),
        "until-close": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY,
        "continue-first": b"HTTP/1.1 100 Continue\r\n\r\n" + plain(),
    }
    srv = RawServer(lambda n: answers[framing], dribble=dribble, close_after=framing == "until-close")
    async with srv as url:
        t = wire()
        first, second = await get(t, url), await get(t, url)
    assert first.content == second.content == BODY and first.json()["id"] == "c1"
    assert srv.connections == (2 if framing == "until-close" else 1)


async def test_no_body_for_head_204_and_304(wire):
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n",
               b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", plain()]
    srv = RawServer(lambda n: answers[n])
    async with srv as url:
        t = wire()
        got = [await get(t, url, "HEAD"), await get(t, url), await get(t, url), await get(t, url)]
    assert [r.status_code for r in got] == [200, 204, 304, 200]
    assert [r.content for r in got[:3]] == [b"", b"", b""] and got[3].content == BODY
    assert srv.connections == 1  # each empty answer left the connection in step


async def test_a_connection_the_server_closed_or_asked_to_close_is_not_reused(wire):
    # Connection: close on the first answer; the server also closes after every answer.
    srv = RawServer(lambda n: plain(extra=b"Connection: close\r\n" if n == 0 else b""), close_after=True)
    async with srv as url:
        t = wire()
        for _ in range(3):
            assert (await get(t, url)).content == BODY
            await asyncio.sleep(0.05)  # the close reaches the client before the next request
    assert srv.connections == 3


async def test_an_idle_connection_is_dropped_after_the_keepalive(wire):
    srv = RawServer(lambda n: plain())
    async with srv as url:
        t = wire(keepalive_s=0.05)
        await get(t, url)
        await asyncio.sleep(0.1)
        await get(t, url)
    assert srv.connections == 2


async def test_a_cut_answer_is_a_protocol_error_and_the_connection_is_dropped(wire):
    srv = RawServer(lambda n: plain()[:40] if n == 0 else plain(), close_after=True)  # the first answer is cut
    async with srv as url:
        t = wire()
        with pytest.raises(httpx2.RemoteProtocolError):
            await get(t, url)
        assert (await get(t, url)).content == BODY  # a new connection
    assert srv.connections == 2


@pytest.mark.parametrize("bad", [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
                                 b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                                 b"HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n"])
async def test_a_malformed_answer_is_a_protocol_error(wire, bad):
    async with RawServer(lambda n: bad) as url:
        with pytest.raises(httpx2.RemoteProtocolError):
            await get(wire(), url)


async def test_silence_is_a_read_timeout_and_a_cancelled_request_frees_its_connection(wire):
    srv = RawServer(lambda n: None if n < 2 else plain())
    async with srv as url:
        t = wire(connections=1)
        with pytest.raises(httpx2.ReadTimeout):
            await get(t, url, timeout=0.2)
        task = asyncio.ensure_future(get(t, url, timeout=5))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await get(t, url)).content == BODY  # the one slot is free again, on a new connection
        await asyncio.sleep(0.05)
        assert srv.hung_up == 2  # both abandoned connections were closed, not leaked
    assert srv.connections == 3


async def test_a_closed_port_is_a_connect_error(wire):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx2.ConnectError):
        await get(wire(), f"http://127.0.0.1:{port}")


async def test_https_and_streamed_uploads_go_to_the_fallback(wire):
    t = wire()
    r1 = await t.handle_async_request(httpx2.Request("POST", "https://api.example.invalid/v1/x", content=b"{}"))

    async def chunks():
        yield b"{}"

    r2 = await t.handle_async_request(httpx2.Request("POST", "http://127.0.0.1:9/v1/x", content=chunks()))
    assert r1.status_code == r2.status_code == 299 and len(t._fallback.seen) == 2
    await t.aclose()
    assert t._fallback.closed


async def _chat(url: str, monkeypatch, **cfg):
    monkeypatch.setenv("SIMLOOP_LLM_HTTP", "wire")
    monkeypatch.setenv("WIRE_TEST_KEY", "sk-wire-test-0123456789")
    pool = LLMPool(LLMConfig(default={"base_url": url + "/v1", "model": "m", "api_key_env": "WIRE_TEST_KEY",
                                      **cfg}))
    try:
        return await pool.model("assistant").chat([{"role": "user", "content": "Where to eat?"}], stage="generate")
    finally:
        await pool.aclose()


async def test_through_openai_a_cut_answer_is_retried_then_answers(monkeypatch):
    srv = RawServer(lambda n: plain()[:40] if n == 0 else plain(), close_after=True)
    async with srv as url:
        result = await _chat(url, monkeypatch, timeout_s=5, max_attempts=3, backoff_base_s=0.01)
    assert result.text == "Porto it is." and result.stage.retries == 1
    sent = srv.requests[-1].decode()
    assert "Authorization: Bearer sk-wire-test-0123456789" in sent.replace("authorization", "Authorization")
    assert json.loads(sent.split("\r\n\r\n", 1)[1])["model"] == "m"


@pytest.mark.parametrize("answer, error", [(lambda n: plain()[:40], LLMConnectionError),
                                           (lambda n: None, LLMTimeoutError)], ids=["cut", "silent"])
async def test_through_openai_the_run_records_the_right_error(monkeypatch, answer, error):
    async with RawServer(answer, close_after=True) as url:
        with pytest.raises(error):
            await _chat(url, monkeypatch, timeout_s=0.3, max_attempts=2, backoff_base_s=0.01)


@pytest.mark.parametrize("route", ["json", "streamed"])
async def test_a_uvicorn_server_like_vllm_answers_through_openai(monkeypatch, route):
    # vLLM, and most Python model servers, are FastAPI on uvicorn (h11): a JSON answer has a
    # Content-Length, a streamed one is chunked.  Both must reach ChatModel whole.
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat() -> object:
        if route == "json":
            return JSONResponse(json.loads(BODY))

        async def pieces():
            for i in range(0, len(BODY), 7):
                yield BODY[i:i + 7]

        return StreamingResponse(pieces(), media_type="application/json")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        results = [await _chat(url, monkeypatch, timeout_s=5, max_attempts=1) for _ in range(3)]
    finally:
        server.should_exit = True
        await task
        sock.close()
    assert [r.text for r in results] == ["Porto it is."] * 3
    assert (results[0].stage.prompt_tokens, results[0].stage.completion_tokens) == (5, 3)
