"""An httpx2 transport that sends over aiohttp: https always, plain http with ``SIMLOOP_LLM_HTTP=aiohttp``.

One aiohttp session per transport; each endpoint URL is parsed once and each timeout built
once (aiohttp would do both per request), and the body is read whole before the response is
returned (simloop never streams completions).  It speaks plain HTTP through aiohttp's public
API only: redirects, cookies and auth stay with the ``httpx2.AsyncClient`` above it, and
aiohttp's failures become httpx2's, which ``ChatClient`` maps to openai's as openai does.
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx2
from yarl import URL

from .wire import response_from

__all__ = ["AioHttpTransport"]

# aiohttp's failures as httpx2's, mapped on as openai maps them (timeouts → APITimeoutError,
# the rest → APIConnectionError).  Most specific first.
_ERRORS: tuple[tuple[type[BaseException], type[Exception]], ...] = (
    (aiohttp.SocketTimeoutError, httpx2.ReadTimeout),
    (aiohttp.ConnectionTimeoutError, httpx2.ConnectTimeout),
    (aiohttp.ServerTimeoutError, httpx2.TimeoutException),
    (TimeoutError, httpx2.TimeoutException),
    (aiohttp.ClientProxyConnectionError, httpx2.ProxyError),
    (aiohttp.ClientConnectorError, httpx2.ConnectError),
    (aiohttp.ClientPayloadError, httpx2.ReadError),
    (aiohttp.InvalidURL, httpx2.UnsupportedProtocol),
    (aiohttp.ClientError, httpx2.NetworkError),
)
# An endpoint has a handful of URLs; one with ever-changing queries must not grow the cache.
_URLS_KEPT = 256


@functools.cache
def _tls() -> ssl.SSLContext:
    """TLS as httpx2 verifies by default (certifi bundle): loading the bundle took 30-70 ms,
    on the loop, in front of every run's first request (scripts/bench, at_2s).  Built once per
    process, and only when an https URL is asked for: a local http endpoint never needs it."""
    return httpx2.create_ssl_context()


@contextlib.contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except httpx2.HTTPError:
        raise
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc) or type(exc).__name__) from exc
        raise


class AioHttpTransport(httpx2.AsyncBaseTransport):
    """One aiohttp session; every response body is read whole before it is returned."""

    def __init__(self, connections: int, keepalive_s: float | None = 5.0):
        self._connections, self._keepalive_s = connections, keepalive_s
        self._session: aiohttp.ClientSession | None = None
        self._urls: dict[str, URL] = {}  # an endpoint has a handful of URLs; parsed once each
        self._timeouts: dict[tuple[Any, Any, Any], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        # Made on first use, inside the running loop (aiohttp binds a session to its loop).
        # TLS is given per request, for https only (``_tls``).
        connector = aiohttp.TCPConnector(limit=self._connections, keepalive_timeout=self._keepalive_s)
        # Cookies are the httpx2 client's business, so aiohttp's jar, filtered for every
        # request, stays empty: DummyCookieJar.
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                              cookie_jar=aiohttp.DummyCookieJar(),
                                              skip_auto_headers=("User-Agent", "Accept-Encoding"))  # theirs only
        return self._session

    def _url(self, request: httpx2.Request) -> URL:
        text = str(request.url)
        url = self._urls.get(text)
        if url is None:
            if len(self._urls) >= _URLS_KEPT:
                self._urls.clear()
            url = self._urls[text] = URL(text, encoded=True)
        return url

    def _timeout(self, request: httpx2.Request) -> aiohttp.ClientTimeout:
        t = request.extensions.get("timeout") or {}
        key = (t.get("connect"), t.get("read"), t.get("pool"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(sock_connect=key[0], sock_read=key[1], connect=key[2])
        return timeout

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        session = self._session or self._open()
        try:
            data: Any = request.content or None
        except httpx2.RequestNotRead:  # a streamed upload (never from simloop)
            data = request.stream
        url = self._url(request)
        with _mapped():
            async with session.request(request.method, url, headers=request.headers.multi_items(),
                                       data=data, allow_redirects=False, compress=False,
                                       timeout=self._timeout(request), ssl=_tls() if url.scheme == "https" else True,
                                       server_hostname=request.extensions.get("sni_hostname")) as resp:
                body = await resp.read()
        return response_from(resp.status, (resp.reason or "").encode(), resp.raw_headers, body, request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
