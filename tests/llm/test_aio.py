"""simloop's lean aiohttp client under the real openai client (llm/aio.py), over real HTTP.

What a real OpenAI-compatible server may do that the mock does not: gzip its bodies, redirect,
set cookies.  A small aiohttp server on 127.0.0.1 does each, and the answer must come back
through ``ChatModel`` exactly as with openai's own client."""

from __future__ import annotations

import functools
import gzip
import json
import socket
import ssl

import pytest
from aiohttp import web

from simloop.errors import LLMConnectionError, LLMStatusError
from simloop.llm.client import LLMConfig, LLMPool
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


def test_the_default_client_is_the_lean_one(monkeypatch):
    from simloop.llm.aio import LeanAioHttpClient

    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)

    assert isinstance(make_http_client(5.0), LeanAioHttpClient)
    assert type(make_http_client(5.0)._aio).__name__ == "WireTransport"
    assert type(make_http_client(5.0, transport="aiohttp")._aio).__name__ == "AioHttpTransport"
    assert not isinstance(make_http_client(5.0, transport="openai-aiohttp"), LeanAioHttpClient)


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


async def test_a_changed_base_url_is_followed(server, monkeypatch):
    async def one(request: web.Request) -> web.Response:
        return web.json_response(completion("from one"))

    async def two(request: web.Request) -> web.Response:
        return web.json_response(completion("from two"))

    first = await server({"/v1/chat/completions": one})
    second = await server({"/v1/chat/completions": two})
    pool = pool_for(first, monkeypatch)
    try:
        model = pool.model("assistant")
        assert (await model.chat(MSGS, stage="generate")).text == "from one"
        model._client.base_url = second  # the prepared-URL cache must not keep the old one
        assert (await model.chat(MSGS, stage="generate")).text == "from two"
    finally:
        await pool.aclose()


async def test_builds_the_request_httpx2_would_build():
    import httpx2

    from simloop.llm.aio import LeanAioHttpClient

    lean = LeanAioHttpClient(5.0, 8)
    plain = httpx2.AsyncClient(timeout=5.0)
    try:
        args = dict(method="POST", url="http://127.0.0.1:9/v1/chat/completions", content=b'{"model": "m"}',
                    headers=[("Authorization", "Bearer x"), ("Content-Type", "application/json"),
                             ("Accept", "application/json"), ("X-Stainless-Retry-Count", "0")], timeout=7.0)
        ours, theirs = lean.build_request(**args), plain.build_request(**args)
        assert (ours.method, ours.url, ours.content) == (theirs.method, theirs.url, theirs.content)
        assert ours.headers.multi_items() == theirs.headers.multi_items()  # same names, values and order
        assert ours.extensions == theirs.extensions
        # Anything else (query parameters here) goes through httpx2's own build_request.
        with_query = lean.build_request("GET", "http://127.0.0.1:9/v1/models", params={"limit": "2"})
        assert str(with_query.url) == "http://127.0.0.1:9/v1/models?limit=2"
    finally:
        await lean.aclose()
        await plain.aclose()


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
    from simloop.llm.aio import LeanAioHttpClient

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert not isinstance(make_http_client(5.0), LeanAioHttpClient)
    assert not isinstance(make_http_client(5.0, transport="aiohttp"), LeanAioHttpClient)


async def test_request_headers_are_built_once_but_never_shared():
    from simloop.llm.aio import LeanAioHttpClient

    lean = LeanAioHttpClient(5.0, 8)
    try:
        args = dict(method="POST", url="http://127.0.0.1:9/v1/chat/completions",
                    headers=[("Authorization", "Bearer x"), ("Content-Type", "application/json")])
        short = lean.build_request(content=b"{}", **args)
        long = lean.build_request(content=b'{"model": "m"}', **args)
        assert (short.headers["Content-Length"], long.headers["Content-Length"]) == ("2", "14")
        short.headers["X-Only-Here"] = "1"  # a request's headers are its own
        assert "X-Only-Here" not in long.headers
        assert "X-Only-Here" not in lean.build_request(content=b"{}", **args).headers
        lean.headers["X-Client-Wide"] = "yes"  # a change to the client's headers is seen at once
        assert lean.build_request(content=b"{}", **args).headers["X-Client-Wide"] == "yes"
    finally:
        await lean.aclose()


async def test_openai_headers_follow_a_changed_key_and_the_retry_count(server, monkeypatch):
    calls = 0

    async def flaky(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        if calls == 2:
            return web.json_response({"error": {"message": "busy"}}, status=503)
        return web.json_response(completion("fine"))

    url = await server({"/v1/chat/completions": flaky})
    monkeypatch.setenv("AIO_TEST_KEY", "sk-aio-test-0123456789")
    pool = LLMPool(LLMConfig(default={"base_url": url, "model": "m", "api_key_env": "AIO_TEST_KEY", "timeout_s": 5,
                                      "max_attempts": 2, "backoff_base_s": 0.01}))
    try:
        model = pool.model("assistant")
        await model.chat(MSGS, stage="generate")
        model._client.api_key = "sk-aio-second-0123456789"
        await model.chat(MSGS, stage="generate")  # 503, then retried by tenacity
    finally:
        await pool.aclose()
    auth = [s["headers"]["Authorization"] for s in server.seen]
    assert auth == ["Bearer sk-aio-test-0123456789"] + ["Bearer sk-aio-second-0123456789"] * 2
    # openai's retries are off: each attempt is its first, and says so.
    lowered = [{k.lower(): v for k, v in s["headers"].items()} for s in server.seen]
    assert {h["x-stainless-retry-count"] for h in lowered} == {"0"}
    assert {h["x-stainless-read-timeout"] for h in lowered} == {"5.0"}


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


async def test_the_platform_is_looked_up_once_for_many_first_requests(server, monkeypatch):
    import asyncio
    import threading

    import openai._base_client as base

    from simloop.llm import http

    looked_up: list[str] = []
    real = base.get_platform

    def counted():
        looked_up.append(threading.current_thread().name)  # off the loop's thread
        return real()

    monkeypatch.setattr(base, "get_platform", counted)
    monkeypatch.setattr(http, "_PLATFORM", [], raising=False)

    async def chat(request: web.Request) -> web.Response:
        return web.json_response(completion("ok"))

    url = await server({"/v1/chat/completions": chat})
    pool = pool_for(url, monkeypatch)
    try:
        model = pool.model("assistant")
        await asyncio.gather(*(model.chat(MSGS, stage="generate") for _ in range(20)))
    finally:
        await pool.aclose()
    assert len(looked_up) == 1 and looked_up[0] != threading.current_thread().name
    os_names = {{k.lower(): v for k, v in s["headers"].items()}["x-stainless-os"] for s in server.seen}
    assert os_names == {str(real())}
