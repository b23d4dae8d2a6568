"""simloop's HTTP transports under the real openai client (llm/http.py, aio.py, wire.py), over real HTTP.

What a real OpenAI-compatible server may do that the mock does not: gzip its bodies, redirect,
set cookies.  A small aiohttp server on 127.0.0.1 does each, and the answer must come back
through ``ChatModel`` exactly as with openai's own client."""

from __future__ import annotations

import functools
import gzip
import json
import socket
import ssl

import httpx2
import pytest
from aiohttp import web

from simloop.errors import LLMConnectionError, LLMStatusError
from simloop.llm import LLMConfig, LLMPool
from simloop.llm.http import make_http_client

pytestmark = pytest.mark.timeout(60)

MSGS = [{"role": "user", "content": "Which vegetarian restaurants in Porto?"}]


def completion(text: str) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}


@pytest.fixture
async def server():
    """An aiohttp app on 127.0.0.1; ``seen`` keeps every request's path, headers and body."""
    seen: list[dict] = []
    runners: list[web.AppRunner] = []

    async def start(routes: dict) -> str:
        app = web.Application()

        async def record(request: web.Request) -> web.StreamResponse:
            seen.append({"path": request.path, "headers": dict(request.headers), "body": await request.read()})
            return await routes[request.path](request)

        for path in routes:
            app.router.add_route("*", path, record)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/v1"

    start.seen = seen  # type: ignore[attr-defined]
    yield start
    for runner in runners:
        await runner.cleanup()


def pool_for(url: str, monkeypatch, transport: str = "wire") -> LLMPool:
    monkeypatch.setenv("SIMLOOP_LLM_HTTP", transport)
    monkeypatch.setenv("AIO_TEST_KEY", "sk-aio-test-0123456789")
    return LLMPool(LLMConfig(default={"base_url": url, "model": "m", "api_key_env": "AIO_TEST_KEY", "timeout_s": 5,
                                      "max_attempts": 1}))


@pytest.mark.parametrize("transport", ["wire", "aiohttp", "openai-aiohttp"])
async def test_sends_openais_request_and_reads_a_gzipped_answer(server, monkeypatch, transport):
    async def chat(request: web.Request) -> web.Response:
        body = gzip.compress(json.dumps(completion("Try Da Terra, near Bolhão.")).encode())
        return web.Response(body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    url = await server({"/v1/chat/completions": chat})
    pool = pool_for(url, monkeypatch, transport)
    try:
        result = await pool.model("assistant").chat(MSGS, stage="generate", max_tokens=20)
    finally:
        await pool.aclose()
    assert result.text == "Try Da Terra, near Bolhão."
    assert (result.stage.prompt_tokens, result.stage.completion_tokens) == (7, 3)
    sent = server.seen[-1]
    assert sent["headers"]["Authorization"] == "Bearer sk-aio-test-0123456789"
    assert sent["headers"]["User-Agent"].startswith("AsyncOpenAI/Python")  # openai's, not aiohttp's
    assert sent["headers"]["Content-Type"] == "application/json"
    body = json.loads(sent["body"])
    assert body["messages"] == MSGS and body["max_tokens"] == 20 and body["model"] == "m"


async def test_follows_a_redirect_and_keeps_a_cookie(server, monkeypatch):
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/v1/real/chat/completions")

    async def real(request: web.Request) -> web.Response:
        response = web.json_response(completion("After the redirect."))
        response.set_cookie("affinity", "node-2")
        return response

    url = await server({"/v1/chat/completions": moved, "/v1/real/chat/completions": real})
    pool = pool_for(url, monkeypatch)
    try:
        model = pool.model("assistant")
        first = await model.chat(MSGS, stage="generate")
        second = await model.chat(MSGS, stage="generate")
    finally:
        await pool.aclose()
    assert first.text == second.text == "After the redirect."
    paths = [s["path"] for s in server.seen]
    # 307 keeps the method and body; the cookie set by the first answer goes with the next request.
    assert paths.count("/v1/real/chat/completions") >= 2
    assert json.loads(server.seen[-1]["body"])["messages"] == MSGS
    assert "affinity=node-2" in server.seen[-1]["headers"].get("Cookie", "")


async def test_status_errors_keep_their_status_and_message(server, monkeypatch):
    async def teapot(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "model not found: m"}}, status=404)

    url = await server({"/v1/chat/completions": teapot})
    pool = pool_for(url, monkeypatch)
    try:
        with pytest.raises(LLMStatusError) as err:
            await pool.model("assistant").chat(MSGS, stage="generate")
    finally:
        await pool.aclose()
    assert err.value.status == 404 and "model not found: m" in str(err.value)


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def cannot_connect(url: str, monkeypatch) -> None:
    pool = pool_for(url, monkeypatch)
    try:
        with pytest.raises(LLMConnectionError):
            await pool.model("assistant").chat(MSGS, stage="generate")
    finally:
        await pool.aclose()


async def test_a_closed_port_is_a_connection_error(monkeypatch):
    await cannot_connect(f"http://127.0.0.1:{closed_port()}/v1", monkeypatch)


async def test_only_https_loads_the_tls_bundle_and_once_per_process(server, monkeypatch):
    """Loading the certifi bundle blocks the loop 30-70 ms: an http endpoint never waits for it;
    an https one gets httpx2's verifying context, built once and shared by every later pool."""
    import httpx2

    from simloop.llm import aio

    built = []
    real = httpx2.create_ssl_context
    monkeypatch.setattr(httpx2, "create_ssl_context", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(aio, "_tls", functools.cache(aio._tls.__wrapped__))  # a fresh per-process cache

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(completion("Plain http."))

    pool = pool_for(await server({"/v1/chat/completions": chat}), monkeypatch)
    try:
        assert (await pool.model("assistant").chat(MSGS, stage="generate")).text == "Plain http."
    finally:
        await pool.aclose()
    assert built == []
    port = closed_port()  # the calls fail at connect, after TLS was chosen
    for _ in range(2):  # two pools, one context
        await cannot_connect(f"https://127.0.0.1:{port}/v1", monkeypatch)
    assert built == [1]
    assert isinstance(aio._tls(), ssl.SSLContext) and aio._tls().verify_mode == ssl.CERT_REQUIRED


async def test_a_rejected_first_answer_is_retried_with_the_next_seed(server, monkeypatch):
    # The first attempt runs before tenacity is set up (client.py); a rejection there must
    # still be retried by tenacity, asking a seeded model with the next seed.
    async def chat(request: web.Request) -> web.Response:
        seed = json.loads(await request.read()).get("seed")
        return web.json_response(completion("unusable" if seed == 7 else f"fine with seed {seed}"))

    url = await server({"/v1/chat/completions": chat})
    monkeypatch.setenv("SIMLOOP_LLM_HTTP", "aiohttp")
    monkeypatch.setenv("AIO_TEST_KEY", "sk-aio-test-0123456789")
    pool = LLMPool(LLMConfig(default={"base_url": url, "model": "m", "api_key_env": "AIO_TEST_KEY", "timeout_s": 5,
                                      "max_attempts": 3, "backoff_base_s": 0.01}))
    try:
        result = await pool.model("assistant").chat(
            MSGS, stage="generate", seed=7, check=lambda text: "rejected" if text == "unusable" else None)
    finally:
        await pool.aclose()
    assert result.text == "fine with seed 8" and result.stage.retries == 1
    assert [json.loads(s["body"])["seed"] for s in server.seen] == [7, 8]


def test_behind_a_proxy_openais_own_client_is_used(monkeypatch):
    import openai

    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert not isinstance(make_http_client(5.0), openai.DefaultAioHttpClient)  # simloop's transports
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert isinstance(make_http_client(5.0), openai.DefaultAioHttpClient)
    assert isinstance(make_http_client(5.0, transport="aiohttp"), openai.DefaultAioHttpClient)


async def test_openai_headers_say_each_attempt_is_a_first(server, monkeypatch):
    calls = 0

    async def flaky(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return web.json_response({"error": {"message": "busy"}}, status=503)
        return web.json_response(completion("fine"))

    url = await server({"/v1/chat/completions": flaky})
    monkeypatch.setenv("AIO_TEST_KEY", "sk-aio-test-0123456789")
    pool = LLMPool(LLMConfig(default={"base_url": url, "model": "m", "api_key_env": "AIO_TEST_KEY", "timeout_s": 5,
                                      "max_attempts": 2, "backoff_base_s": 0.01}))
    try:
        assert (await pool.model("assistant").chat(MSGS, stage="generate")).stage.retries == 1  # 503, then tenacity
    finally:
        await pool.aclose()
    # openai's retries are off: each attempt is its first, and says so.
    lowered = [{k.lower(): v for k, v in s["headers"].items()} for s in server.seen]
    assert len(lowered) == 2 and {h["x-stainless-retry-count"] for h in lowered} == {"0"}
    assert {h["x-stainless-read-timeout"] for h in lowered} == {"5.0"}
    assert {h["authorization"] for h in lowered} == {"Bearer sk-aio-test-0123456789"}


@pytest.mark.parametrize("wire", [True, False], ids=["wire", "aiohttp"])
@pytest.mark.parametrize("route", ["/plain", "/gzipped", "/chunked"])
async def test_a_response_is_the_one_httpx2_would_make(server, route, wire):
    import httpx2

    from simloop.llm.aio import AioHttpTransport
    from simloop.llm.wire import WireTransport

    text = json.dumps(completion("Bolhão market opens at eight."))

    async def plain(request: web.Request) -> web.Response:
        return web.Response(text=text, content_type="application/json")

    async def gzipped(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(text.encode()), headers={"Content-Encoding": "gzip",
                                                                         "Content-Type": "application/json"})

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(text.encode())
        await response.write_eof()
        return response

    url = await server({"/plain": plain, "/gzipped": gzipped, "/chunked": chunked})
    transport = WireTransport(4, AioHttpTransport(4)) if wire else AioHttpTransport(4)
    try:
        ours = await transport.handle_async_request(httpx2.Request("GET", url.removesuffix("/v1") + route))
    finally:
        await transport.aclose()
    wire = await ours.aread()  # still as sent: httpx2 decodes by the headers
    theirs = httpx2.Response(ours.status_code, headers=[(k, v) for k, v in ours.headers.raw
                                                        if k.lower() != b"content-length" or route != "/chunked"],
                             content=gzip.compress(text.encode()) if route == "/gzipped" else text.encode())
    assert ours.json() == json.loads(text) == theirs.json()
    assert ours.headers.multi_items() == theirs.headers.multi_items()
    assert (ours.is_closed, ours.is_stream_consumed) == (theirs.is_closed, theirs.is_stream_consumed) == (True, True)
    assert ours.content == theirs.content and wire == ours.content


PLATFORM_SCRIPT = """
import asyncio, platform, threading
from simloop.fakes.mockllm import MockLLM
from simloop.llm import LLMConfig, LLMPool

looked_up = []
real = platform.platform
platform.platform = lambda *a, **k: looked_up.append(threading.current_thread().name) or real(*a, **k)

async def main():
    async with MockLLM() as mock:
        pool = LLMPool(LLMConfig(default={"base_url": mock.url + "/v1", "model": "m"}))
        try:
            model = pool.model("assistant")
            await asyncio.gather(*(model.chat([{"role": "user", "content": "hi"}], stage="s") for _ in range(20)))
        finally:
            await pool.aclose()
        on_the_loop = sum(name == threading.current_thread().name for name in looked_up)
        print(mock.stats()["requests"], len(looked_up), on_the_loop)

asyncio.run(main())
"""


def test_openais_platform_lookup_runs_once_and_off_the_loop():
    # openai's platform headers read files (tens of ms): its own request path looks them up in
    # a thread at the start of every request until one lookup has returned, so 1,000 dialogues
    # starting together made 1,000 thread calls.  The ChatClient makes openai's headers once,
    # the lookup in a thread, while the first requests wait.  A fresh process: openai
    # remembers the lookup for the rest of a process.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", PLATFORM_SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    requests, lookups, on_the_loop = map(int, done.stdout.split())
    assert (requests, lookups, on_the_loop) == (20, 1, 0)


@pytest.mark.parametrize("answer", [
    (200, completion("fine")),
    (429, {"error": {"message": "slow down", "type": "rate_limit"}}),
    (400, {"detail": "not openai-shaped"}),
    (500, "<html>proxy error</html>"),
])
async def test_the_request_and_its_errors_are_the_ones_openai_makes(server, monkeypatch, answer):
    """ChatClient sends what openai's own raw request (client.post) sends, and raises what it raises."""
    import openai

    from simloop.llm.http import ChatClient

    status, payload = answer

    async def chat(request: web.Request) -> web.Response:
        if isinstance(payload, str):
            return web.Response(text=payload, status=status, content_type="text/html")
        return web.json_response(payload, status=status)

    url = await server({"/v1/chat/completions": chat})
    monkeypatch.setenv("OPENAI_ORG_ID", "org-test")  # openai's own settings come along
    client = ChatClient(url, "sk-aio-test-0123456789", 5.0)
    body = {"model": "m", "messages": MSGS, "max_tokens": 20}
    outcomes = []
    try:
        raw = client.openai.post("/chat/completions", body=body, cast_to=httpx2.Response)  # openai's raw request
        for send in (client.complete(body), raw):
            try:
                outcomes.append(await send)
            except openai.APIStatusError as exc:
                outcomes.append(exc)
    finally:
        await client.close()
    ours, theirs = outcomes
    assert type(ours) is type(theirs)  # httpx2.Response, or the same APIStatusError subclass
    if status == 200:
        assert ours.json() == theirs.json()
    else:
        # (The exception's own text differs between openai releases; simloop reports the body.)
        assert (ours.status_code, ours.body) == (theirs.status_code, theirs.body)
        assert str(ours).startswith(f"Error code: {status}")
    sent = [{k.lower(): v for k, v in s["headers"].items()} for s in server.seen]
    assert sent[0] == sent[1] and sent[0]["openai-organization"] == "org-test"
    assert json.loads(server.seen[0]["body"]) == json.loads(server.seen[1]["body"]) == body
