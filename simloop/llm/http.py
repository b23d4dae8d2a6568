"""The HTTP client under each endpoint's ``AsyncOpenAI``: connection pools split into shards.

httpcore's pool re-scans every connection and queued request twice per request.  With
1,000 dialogues in flight on one endpoint that scan costs about a millisecond of CPU per
request (measured), enough to make the client, not the server, the bottleneck.  Spreading
requests round-robin over a few smaller pools keeps each scan short; one ``AsyncOpenAI``
client and one ``httpx2.AsyncClient`` still serve the whole endpoint.  Imported lazily.
"""

from __future__ import annotations

import itertools

import httpx2
import openai

__all__ = ["ShardedTransport", "make_http_client"]


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


def make_http_client(timeout_s: float, shards: int = 16, per_shard: int = 128) -> httpx2.AsyncClient:
    """openai's defaults (redirects, timeouts) over the sharded transport."""
    return openai.DefaultAsyncHttpxClient(transport=ShardedTransport(shards, per_shard), timeout=timeout_s)
