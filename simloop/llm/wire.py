"""Plain-http requests over simloop's own HTTP/1.1 keep-alive connections (the default).

A local model server (vLLM, Ollama, llama.cpp, ``simloop mock-llm``) is reached over plain
http, and with 1,000 dialogues in flight the client's CPU per call bounds the run.  aiohttp's
request machinery (a ``ClientRequest``, the connector, a payload, a writer, a response
reader and its flow control) was a quarter of the whole LLM layer's CPU per call; here a
call is one write of the request head and body and one parse of the answer on an
``asyncio.Protocol`` (``scripts/bench`` section concurrency compares both, same run).

Scope, kept narrow on purpose: one request at a time per connection, kept alive (closed
after ``keepalive_s`` idle, as aiohttp does, before the server's own idle timeout can race a
new request); a body framed by Content-Length, chunked, or the end of the connection.  A
compressed body is decoded by httpx2 from its headers, as with aiohttp.  Everything else -
https, a streamed upload - goes to the ``fallback`` transport (aiohttp).  Failures are
httpx2's, mapped to openai's as for its own transports (timeouts -> APITimeoutError, the
rest -> APIConnectionError); nothing is retried here: tenacity, in ``ChatModel``, is the one
retry layer.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import httpx2

__all__ = ["WireTransport", "response_from"]

_NO_BODY = frozenset({204, 304})


def response_from(status: int, reason: bytes, headers: Any, body: bytes, request: httpx2.Request) -> httpx2.Response:
    """The httpx2 response for a body read whole, as sent (both transports build it here).

    Already read, as a transport's response is once the client has read it: httpx2 decodes a
    compressed body by its headers, and gives a chunked one its Content-Length."""
    return httpx2.Response(status, headers=headers, content=body, request=request,
                           extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason})


class _Answer:
    """The response being read: head fields, framing and the body parts so far."""

    __slots__ = ("status", "reason", "headers", "length", "chunked", "close", "parts", "left")

    def __init__(self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], head_only: bool,
                 http10: bool) -> None:
        self.status, self.reason, self.headers = status, reason, headers
        self.length: int | None = None  # None with chunked False: the body runs to the end of the connection
        self.chunked, self.close = False, http10
        for name, value in headers:
            low = name.lower()
            if low == b"content-length":
                if not value.strip().isdigit():
                    raise httpx2.RemoteProtocolError(f"malformed Content-Length: {value[:20]!r}")
                self.length = int(value)
            elif low == b"transfer-encoding":
                self.chunked = value.strip().lower().endswith(b"chunked")
            elif low == b"connection":  # HTTP/1.1 keeps a connection unless told; 1.0 closes it unless told
                token = value.strip().lower()
                self.close = token != b"keep-alive" if http10 else token == b"close"
        if head_only or status in _NO_BODY or status < 200:
            self.length, self.chunked = 0, False
        if self.chunked:
            self.length = None
        elif self.length is None:
            self.close = True
        self.parts: list[bytes] = []
        self.left = -1  # chunked: bytes left in the current chunk (+2 for its CRLF); -1 = at a size line


def _head(data: bytearray, head_only: bool) -> _Answer | None:
    """Take one response head off ``data`` (None until it is complete); skips 1xx heads."""
    while True:
        end = data.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = bytes(data[:end]).split(b"\r\n")
        del data[:end + 4]
        version, _, rest = lines[0].partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise httpx2.RemoteProtocolError(f"not an HTTP/1.x response: {lines[0][:80]!r}")
        status = int(code)
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise httpx2.RemoteProtocolError(f"malformed response header: {line[:80]!r}")
            headers.append((name.strip(), value.strip()))
        if 100 <= status < 200 and status != 101:
            continue  # an informational answer: the real one follows
        return _Answer(status, reason, headers, head_only, version == b"HTTP/1.0")


def _chunks(data: bytearray, answer: _Answer) -> bool:
    """Move complete chunks from ``data`` into ``answer.parts``; True once the last one is in."""
    while True:
        if answer.left < 0:
            eol = data.find(b"\r\n")
            if eol < 0:
                return False
            size_text = bytes(data[:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx2.RemoteProtocolError(f"malformed chunk size: {size_text[:20]!r}") from None
            if size == 0:  # the last chunk, then optional trailers and an empty line
                end = data.find(b"\r\n\r\n", eol) if data[eol + 2:eol + 4] != b"\r\n" else eol
                if end < 0:
                    return False
                del data[:end + 4]
                return True
            del data[:eol + 2]
            answer.left = size + 2
        if len(data) < answer.left:
            return False
        answer.parts.append(bytes(data[:answer.left - 2]))
        del data[:answer.left]
        answer.left = -1


class _Connection(asyncio.Protocol):
    """One keep-alive connection; ``exchange`` sends a request and waits for its answer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._data = bytearray()
        self._waiter: asyncio.Future[_Answer] | None = None
        self._answer: _Answer | None = None
        self._head_only = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._data += data
        if self._waiter is None:  # bytes nobody asked for: the connection cannot be trusted again
            self.close()
            return
        self._read(eof=False)

    def eof_received(self) -> bool | None:
        if self._waiter is not None:
            self._read(eof=True)
        return None  # let the transport close

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self._fail(httpx2.RemoteProtocolError("the server closed the connection before the response was complete"))

    def _read(self, eof: bool) -> None:
        try:
            self._advance(eof)
        except httpx2.HTTPError as exc:  # a malformed answer
            self._fail(exc)

    def _advance(self, eof: bool) -> None:
        answer = self._answer
        if answer is None:
            answer = self._answer = _head(self._data, self._head_only)
            if answer is None:
                return
        if answer.chunked:
            done = _chunks(self._data, answer)
        elif answer.length is not None:
            done = len(self._data) >= answer.length
            if done:
                answer.parts.append(bytes(self._data[:answer.length]))
                del self._data[:answer.length]
        else:
            done = eof
            if done:
                answer.parts.append(bytes(self._data))
                self._data.clear()
        if done:
            waiter = self._release()
            if waiter is not None:
                waiter.set_result(answer)

    def _fail(self, exc: Exception) -> None:
        waiter = self._release()
        if waiter is not None:
            waiter.set_exception(exc)

    def _release(self) -> asyncio.Future[_Answer] | None:
        """The waiting request's future, if it still waits; the connection waits for nothing after."""
        waiter, self._waiter, self._answer = self._waiter, None, None
        return waiter if waiter is not None and not waiter.done() else None

    async def exchange(self, data: bytes, head_only: bool, read_s: float | None) -> _Answer:
        assert self.transport is not None
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self._head_only = head_only
        self.transport.write(data)
        if read_s is None:
            return await waiter
        # A timer that fails the waiter: ~2 us per call against ~10 us for ``asyncio.timeout`` (timeit).
        timer = asyncio.get_running_loop().call_later(read_s, self._expire, read_s)
        try:
            return await waiter
        finally:
            timer.cancel()

    def _expire(self, read_s: float) -> None:
        self._fail(httpx2.ReadTimeout(f"no complete response within {read_s:g} s"))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class WireTransport(httpx2.AsyncBaseTransport):
    """Plain http over our own keep-alive connections, at most ``connections`` at a time;
    every other request goes to ``fallback``."""

    def __init__(self, connections: int, fallback: httpx2.AsyncBaseTransport, keepalive_s: float = 5.0):
        self._slots = asyncio.Semaphore(max(1, connections))
        self._fallback, self._keepalive_s = fallback, keepalive_s
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        try:
            body = request.content
        except httpx2.RequestNotRead:  # a streamed upload (never from simloop)
            body = None
        if url.scheme != "http" or body is None:
            return await self._fallback.handle_async_request(request)
        timeout = request.extensions.get("timeout") or {}
        key = (url.host, url.port or 80)
        data = b"".join([request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n",
                         *(b"%s: %s\r\n" % pair for pair in request.headers.raw), b"\r\n", body])
        async with self._slot(timeout.get("pool")):
            conn = self._reuse(key) or await self._connect(key, timeout.get("connect"))
            try:
                answer = await conn.exchange(data, request.method == "HEAD", timeout.get("read"))
            except BaseException:
                conn.close()  # half a response, a timeout or a cancellation: never reused
                raise
            if answer.close or conn.closed:
                conn.close()
            else:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(key, deque()).append(conn)
        return response_from(answer.status, answer.reason, answer.headers, b"".join(answer.parts), request)

    def _slot(self, pool_s: float | None) -> Any:
        if pool_s is None or not self._slots.locked():
            return self._slots
        return _Bounded(self._slots, pool_s)

    def _reuse(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the one least likely to have timed out
            if not conn.closed and now - conn.idle_since < self._keepalive_s:
                return conn
            conn.close()
        return None

    async def _connect(self, key: tuple[str, int], connect_s: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(connect_s):
                _, conn = await loop.create_connection(_Connection, *key)
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"no connection to {key[0]}:{key[1]} within {connect_s:g} s") from None
        except OSError as exc:
            raise httpx2.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc.strerror or exc}") from None
        return conn

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        await self._fallback.aclose()


class _Bounded:
    """``async with`` a semaphore, waiting at most ``pool_s`` for it (httpx2's pool timeout)."""

    def __init__(self, slots: asyncio.Semaphore, pool_s: float):
        self._slots, self._pool_s = slots, pool_s

    async def __aenter__(self) -> None:
        try:
            await asyncio.wait_for(self._slots.acquire(), self._pool_s)
        except TimeoutError:
            raise httpx2.PoolTimeout(f"no free connection within {self._pool_s:g} s") from None

    async def __aexit__(self, *exc: Any) -> None:
        self._slots.release()
