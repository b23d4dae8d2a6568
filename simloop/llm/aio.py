"""The default HTTP client under ``AsyncOpenAI``: an ``httpx2.AsyncClient`` that sends over aiohttp.

openai's own aiohttp client (``DefaultAioHttpClient``) puts a request through httpx2's whole
client (auth flow, redirect loop, cookie jar, event hooks, a streamed body read chunk by chunk)
and then through aiohttp, which re-parses the URL and builds a timeout per request.  With
1,000 dialogues in flight one core is the limit: at concurrency 500 the whole LLM layer cost
1.13 ms of CPU per call over openai's client and 0.90 ms over this one (``scripts/bench``
section concurrency, same run, load 10).  This client keeps openai's request building and
error handling untouched and replaces only ``send``: one aiohttp session, parsed URLs and
timeouts reused, the body read whole.  Anything it does not handle itself - a redirect, a
cookie, an auth flow, a streamed response - goes through httpx2's own ``send`` over the same
session, so behaviour matches ``DefaultAioHttpClient``.  simloop never streams completions.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import ssl
import time
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import aiohttp
import httpx2
from yarl import URL

from .headers import SnapHeaders
from .memo import memo
from .wire import WireTransport, response_from

__all__ = ["AioHttpTransport", "LeanAioHttpClient"]

# aiohttp's failures as httpx2's, so openai maps them as it does for its own transports
# (timeouts → APITimeoutError, the rest → APIConnectionError).  Most specific first.
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
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
# Jars that keep every cookie in ``_cookies`` (the stdlib's, and httpx2's default subclass).
_PLAIN_JARS = (CookieJar, type(httpx2.Cookies().jar))


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
        # Cookies are httpx2's business (a response that sets one goes through its send), so
        # aiohttp's jar, filtered for every request, stays empty: DummyCookieJar.
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                              cookie_jar=aiohttp.DummyCookieJar(),
                                              skip_auto_headers=("User-Agent", "Accept-Encoding"))  # theirs only
        return self._session

    def _url(self, request: httpx2.Request) -> URL:
        return memo(self._urls, str(request.url), lambda text: URL(text, encoded=True))

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


class LeanAioHttpClient(httpx2.AsyncClient):
    """openai's defaults (timeouts, following redirects) over ``AioHttpTransport``, with a
    short ``send`` for the plain case: no auth flow, no cookies, no hooks, not a redirect."""

    def __init__(self, timeout_s: float, connections: int, wire: bool = True):
        # wire: plain http over simloop's own connections (wire.py), the rest over aiohttp.
        aio = AioHttpTransport(connections)
        self._aio: httpx2.AsyncBaseTransport = WireTransport(connections, aio) if wire else aio
        super().__init__(timeout=timeout_s, follow_redirects=True, transport=self._aio)
        self._urls: dict[str, httpx2.URL] = {}
        self._heads: dict[Any, tuple[SnapHeaders, bool]] = {}

    def build_request(self, method: str, url: Any, *, content: Any = None, params: Any = None, headers: Any = None,
                      extensions: Any = None, **rest: Any) -> httpx2.Request:
        # openai hands over an absolute URL string, bytes of JSON and a header list.  httpx2
        # would parse the URL twice, copy the headers four times and look each auto header up
        # by name; here the URL is parsed once per endpoint path and the headers are merged in
        # one pass, with Host and Content-Length where httpx2 would put them.
        simple = (isinstance(url, str) and isinstance(content, bytes) and not params and not self.params
                  and not extensions and isinstance(headers, (list, type(None)))
                  and all(v is None for k, v in rest.items() if k != "timeout"))  # data, files, json, cookies
        if not simple:
            return super().build_request(method, url, content=content, params=params, headers=headers,
                                         extensions=extensions, **rest)
        parsed = memo(self._urls, url, self._merge_url)
        given = tuple(headers or ())
        # Only Content-Length differs between calls: the rest is merged and normalised once
        # per set of headers (the client's own may be changed, so they are part of the key).
        key = (parsed.netloc, given, tuple(self.headers.raw))
        merged, sized = memo(self._heads, key, lambda _: self._fixed_headers(parsed, given))
        request_headers = merged.plus("Content-Length", str(len(content))) if sized else merged.copy()
        timeout = rest.get("timeout", httpx2.USE_CLIENT_DEFAULT)
        timeout = self.timeout if timeout is httpx2.USE_CLIENT_DEFAULT else httpx2.Timeout(timeout)
        request = httpx2.Request(method, parsed, stream=httpx2.ByteStream(content),
                                 extensions={"timeout": timeout.as_dict()})
        request.headers = request_headers  # the copy, not a third normalising pass over it
        request.read()  # .content, as with content=: the bytes are already in memory
        return request

    def _fixed_headers(self, url: httpx2.URL, given: tuple[tuple[str, str], ...]) -> tuple[SnapHeaders, bool]:
        """The client's headers under the given ones, with Host where httpx2 puts it; and
        whether Content-Length goes last (unless given, or Transfer-Encoding is)."""
        names = {k.lower() for k, _ in given}
        merged = [(k, v) for k, v in self.headers.multi_items() if k not in names] + list(given)
        if "host" not in names:
            merged.insert(0, ("Host", url.netloc.decode("ascii")))
        built = SnapHeaders(merged)
        built.multi_items()  # worked out once here (encoding too), kept by every copy
        return built, "content-length" not in names and "transfer-encoding" not in names

    async def send(self, request: httpx2.Request, *, stream: bool = False, auth: Any = httpx2.USE_CLIENT_DEFAULT,
                   follow_redirects: Any = httpx2.USE_CLIENT_DEFAULT) -> httpx2.Response:
        plain = (not stream and auth is httpx2.USE_CLIENT_DEFAULT and self.auth is None and not self._has_cookies()
                 and not request.url.userinfo and not any(self.event_hooks.values()) and not self.is_closed)
        if not plain:
            return await super().send(request, stream=stream, auth=auth, follow_redirects=follow_redirects)
        start = time.perf_counter()
        self._set_timeout(request)  # the client's timeout when the request brings none
        response = await self._aio.handle_async_request(request)
        if response.status_code in _REDIRECTS or "set-cookie" in response.headers:
            # Rare on an API: httpx2 sends it again and applies its redirect and cookie rules.
            return await super().send(request, stream=stream, auth=auth, follow_redirects=follow_redirects)
        response.elapsed = datetime.timedelta(seconds=time.perf_counter() - start)
        response.default_encoding = self._default_encoding
        return response

    def _has_cookies(self) -> bool:
        """Does the client hold a cookie?  ``bool(self.cookies)`` walks the jar under its lock
        on every send (2 % of the CPU per call, measured); a standard jar keeps its cookies in
        one dict, empty until httpx2 stores one.  A jar whose cookies were cleared may leave
        empty entries behind: then this says yes and httpx2's own send looks for itself."""
        jar = self.cookies.jar
        found = getattr(jar, "_cookies", None)
        return bool(found) if type(jar) in _PLAIN_JARS and isinstance(found, dict) else bool(self.cookies)
