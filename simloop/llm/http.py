"""Each endpoint's ``ChatClient``: the one place a chat request is built and sent.

The request is openai's: ``openai.AsyncOpenAI`` is made for the endpoint as usual (key,
``OPENAI_ORG_ID``/``OPENAI_PROJECT_ID``, its User-Agent and diagnostic headers), its headers
are read once through its public properties, and a failure is raised as the exception openai
raises for it (``APIStatusError`` with the response, ``APITimeoutError``, ``APIConnectionError``),
so one translation (``ChatModel._translate``) serves every path.  simloop sends it, through
the endpoint's ``httpx2.AsyncClient``: openai's own request path (its options model, headers,
URL and idempotency key built afresh per call, its auth and retry wrappers) costs as much CPU
per call as everything else in a run together, and with 1,000 dialogues in flight the
client's CPU per call is what bounds the run (``scripts/bench`` section concurrency).

Which ``httpx2.AsyncClient``, after ``$SIMLOOP_LLM_HTTP`` (``transport.py``):

- ``wire`` (the default): plain http over simloop's own HTTP/1.1 connections (``wire.py``),
  https over aiohttp (``aio.py``);
- ``aiohttp``: every request over aiohttp;
- ``openai-aiohttp``: openai's own aiohttp client (to compare against);
- ``httpx``: httpx2 over sharded pools, the fallback without aiohttp: httpcore's pool re-scans
  every connection and queued request twice per request, so requests go round-robin over a
  few smaller pools to keep each scan short.

Behind an HTTP(S) proxy (``HTTPS_PROXY`` and friends) the first two become openai's aiohttp
client, which routes through it.  Redirects, cookies and auth are the ``httpx2.AsyncClient``'s
own.  Imported lazily, with openai (most commands never talk to a model).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import ssl
from typing import Any

import httpx2
import openai

from .aio import AioHttpTransport
from .transport import env_proxies, transport_name
from .wire import WireTransport

__all__ = ["ChatClient", "ShardedTransport", "make_http_client", "status_error"]


class ShardedTransport(httpx2.AsyncBaseTransport):
    """Round-robin over ``shards`` HTTP/1.1 keep-alive pools of ``per_shard`` connections each."""

    def __init__(self, shards: int = 16, per_shard: int = 128):
        limits = httpx2.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        tls = httpx2.create_ssl_context()  # built once: loading the CA bundle costs ~30 ms per copy
        self._pools = [httpx2.AsyncHTTPTransport(verify=tls, limits=limits) for _ in range(max(1, shards))]
        self._next = itertools.cycle(range(len(self._pools)))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._pools[next(self._next)].handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()


def make_http_client(timeout_s: float, shards: int = 16, per_shard: int = 128, *,
                     transport: str | None = None) -> httpx2.AsyncClient:
    """openai's defaults (timeouts, following redirects) over the chosen transport.

    Every choice allows ``shards * per_shard`` connections, kept alive: 1,000 dialogues in
    flight must not reconnect (openai's default keeps 100 alive, and reconnecting costs 4x
    the CPU per call).
    """
    connections = max(1, shards) * per_shard
    name = transport_name(transport)
    if name in ("wire", "aiohttp") and not env_proxies():
        aio = AioHttpTransport(connections)
        sender: httpx2.AsyncBaseTransport = WireTransport(connections, aio) if name == "wire" else aio
        return httpx2.AsyncClient(transport=sender, timeout=timeout_s, follow_redirects=True)
    if name != "httpx":  # behind a proxy, or asked for: openai's aiohttp client routes through it
        limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
        return openai.DefaultAioHttpClient(timeout=timeout_s, limits=limits)
    return openai.DefaultAsyncHttpxClient(transport=ShardedTransport(shards, per_shard), timeout=timeout_s)


_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
    404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def status_error(response: httpx2.Response) -> openai.APIStatusError:
    """The ``APIStatusError`` openai raises for an error ``response``: its text says the status
    and the body's ``error.message``; ``body`` is the decoded ``error`` object (else the whole
    decoded body, else the text)."""
    message = f"Error code: {response.status_code}"
    text = response.text.strip()
    body: Any = text
    try:
        body = json.loads(text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        detail = error.get("message") if isinstance(error, dict) else None
        if isinstance(detail, str) and detail:
            message += f" - {detail}"
    data = body.get("error", body) if isinstance(body, dict) else body
    status = response.status_code
    kind = _STATUS_ERRORS.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return kind(message, response=response, body=data)


class ChatClient:
    """One endpoint (base URL and key): ``complete`` POSTs a chat request to its
    ``/chat/completions``; openai's own retries are off (tenacity, in ``ChatModel``, is the
    one retry layer), so every attempt says it is a first one."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float, *, transport: str | None = None):
        self.http = make_http_client(timeout_s, transport=transport)
        self.openai = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s,
                                         http_client=self.http)
        self._url = httpx2.URL(f"{base_url.rstrip('/')}/chat/completions")
        self._timeout_s = timeout_s
        self._headers: httpx2.Headers | None = None
        self._platform: asyncio.Future[Any] | None = None

    async def _openai_headers(self) -> httpx2.Headers:
        """openai's headers for every request of this client, as its raw request sends them with
        retries off; made at the first request (one names the running event loop).  openai's
        platform headers read files (tens of ms, remembered for the process): in a thread, once,
        while the first requests wait, not on the loop."""
        if self._platform is None:
            self._platform = asyncio.ensure_future(asyncio.to_thread(self.openai.platform_headers))
        await asyncio.shield(self._platform)  # one waiter cancelled leaves it to the rest
        if self._headers is None:
            given = {**self.openai.default_headers, **self.openai.auth_headers,
                     "X-Stainless-Retry-Count": "0", "X-Stainless-Read-Timeout": str(float(self._timeout_s))}
            self._headers = httpx2.Headers({k: v for k, v in given.items() if isinstance(v, str)})  # not Omit
        return self._headers

    @property
    def api_key(self) -> str:
        return self.openai.api_key

    async def complete(self, body: dict[str, Any]) -> httpx2.Response:
        """The response to ``body`` (plain JSON), read whole; an error status, a timeout or a
        lost connection raises as openai would (see the module's docstring)."""
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()  # as openai
        headers = self._headers if self._headers is not None else await self._openai_headers()
        request = self.http.build_request("POST", self._url, content=content, headers=headers)
        try:
            response = await self.http.send(request)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except (httpx2.RequestError, ssl.SSLError) as exc:
            raise openai.APIConnectionError(request=request) from exc
        if response.status_code >= 400:
            raise status_error(response)
        return response

    async def close(self) -> None:
        await self.openai.close()  # and the HTTP client it was given
