"""The HTTP client under each endpoint's ``AsyncOpenAI``: simloop's lean client by default, httpx2 as fallback.

The default is simloop's lean client (``aio.py``): openai builds and checks every request as
usual, and only the send is shorter - over simloop's own HTTP/1.1 connections for plain http
(``wire.py``; ``SIMLOOP_LLM_HTTP=aiohttp`` sends those over aiohttp too) and over aiohttp for
https.  openai's own aiohttp client
(``DefaultAioHttpClient``, ``SIMLOOP_LLM_HTTP=openai-aiohttp``) is kept to compare against
(``scripts/bench`` section concurrency).  Without aiohttp, or with ``SIMLOOP_LLM_HTTP=httpx``,
the fallback is httpx2 over sharded pools: httpcore's pool re-scans every connection and queued
request twice per request, so requests go round-robin over a few smaller pools to keep each
scan short.  Either way one ``AsyncOpenAI`` client serves the whole endpoint.  Imported lazily.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx2
import openai

from .headers import SnapHeaders
from .memo import memo
from .transport import env_proxies, transport_name

__all__ = ["AsyncOpenAI", "ShardedTransport", "make_http_client"]

_PLATFORM: list[Any] = []  # openai's get_platform(), the same for the whole process


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


def make_http_client(timeout_s: float, shards: int = 16, per_shard: int = 128, *, transport: str | None = None) -> Any:
    """openai's defaults (redirects, timeouts) over aiohttp, or over the sharded httpx2 pools.

    Both allow ``shards * per_shard`` connections, kept alive: 1,000 dialogues in flight
    must not reconnect (openai's default keeps 100 alive, and reconnecting costs 4x the CPU).
    """
    connections = max(1, shards) * per_shard
    name = transport_name(transport)
    if name in ("wire", "aiohttp") and not env_proxies():  # the lean client sends directly
        from .aio import LeanAioHttpClient

        return LeanAioHttpClient(timeout_s, connections, wire=name == "wire")
    if name in ("wire", "aiohttp", "openai-aiohttp"):  # behind a proxy: openai's client routes through it
        limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
        return openai.DefaultAioHttpClient(timeout=timeout_s, limits=limits)
    return openai.DefaultAsyncHttpxClient(transport=ShardedTransport(shards, per_shard), timeout=timeout_s)


class AsyncOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI`` that remembers where its paths point: openai parses and joins
    the base URL for every request (a tenth of the client's CPU per call, measured), though
    a run only ever asks for a handful of paths.  If a later openai drops ``_prepare_url``,
    this is simply never called."""

    _prepared: tuple[Any, dict[str, Any]] = (None, {})

    def _prepare_url(self, url: str) -> Any:
        base, cache = self._prepared
        if base is not self.base_url:  # first call, or the base URL was changed
            base, cache = self._prepared = (self.base_url, {})
        return memo(cache, url, super()._prepare_url)

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        if self._platform is None:
            self._platform = await self._platform_once()
        return await super().request(*args, **kwargs)

    async def _platform_once(self) -> Any:
        """openai's platform lookup, once per process.  openai runs it in a thread on every
        request until one returns, so the first 1,000 dialogues of a run made 1,000 thread
        calls, and were all held until they came back (the at_2s start, measured)."""
        if _PLATFORM:
            return _PLATFORM[0]
        pending = self.__dict__.get("_platform_pending")
        if pending is None:
            from openai._base_client import get_platform  # what openai's request() calls

            pending = self.__dict__["_platform_pending"] = asyncio.ensure_future(asyncio.to_thread(get_platform))
        value = await asyncio.shield(pending)  # one waiter cancelled leaves the lookup to the rest
        _PLATFORM[:] = [value]
        return value

    def _build_headers(self, options: Any, *, retries_taken: int = 0) -> httpx2.Headers:
        """openai's headers, built once per set of inputs: merging, validating and normalising
        the same dozen headers was a twentieth of the client's CPU per call (measured).  The
        key is every input openai reads - the auth and default headers as they are now (so a
        new key or organisation is seen at once), the retry count and the timeout; a call
        with headers of its own or an idempotency key is built afresh."""
        timeout = options.timeout
        if options.headers or (self._idempotency_header and options.idempotency_key) \
                or not isinstance(timeout, (int, float, type(None), openai.NotGiven)):
            return super()._build_headers(options, retries_taken=retries_taken)
        defaults = tuple((k, v if v.__class__ is str else v.__class__) for k, v in self.default_headers.items())
        key = (tuple(self._auth_headers(options.security).items()), defaults, retries_taken,
               self.timeout if isinstance(timeout, openai.NotGiven) else timeout)
        cache: dict[Any, SnapHeaders] = self.__dict__.setdefault("_simloop_headers", {})
        return memo(cache, key, lambda _: self._snap_headers(options, retries_taken)).copy()  # openai may change the copy

    def _snap_headers(self, options: Any, retries_taken: int) -> SnapHeaders:
        built = SnapHeaders(super()._build_headers(options, retries_taken=retries_taken))
        built.multi_items()  # worked out once here (encoding too), kept by every copy
        return built
