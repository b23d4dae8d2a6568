"""The mock LLM's HTTP/1.1 layer: a keep-alive ``asyncio.Protocol``, one request at a time.

No framework and no task per request: a request costs one parse, one call into the
server's ``dispatch`` and, for latency, one loop timer.  That is what lets one core
answer thousands of requests per second for the 1,000-dialogue benchmark.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Connection", "Request", "response", "error"]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            411: "Length Required", 413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error"}
_MAX_HEAD = 64 * 1024
_MAX_BODY = 32 * 1024 * 1024


def response(status: int, body: bytes, keep_alive: bool, headers: Iterable[tuple[str, str]] = ()) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}", "content-type: application/json",
            f"content-length: {len(body)}", "connection: keep-alive" if keep_alive else "connection: close",
            *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def error(status: int, message: str, kind: str, keep_alive: bool, headers: Iterable[tuple[str, str]] = ()) -> bytes:
    body = json.dumps({"error": {"message": message, "type": kind, "code": None}}).encode()
    return response(status, body, keep_alive, headers)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


class Connection(asyncio.Protocol):
    """One client connection: parses requests one at a time and answers them in order."""

    def __init__(self, dispatch: Callable[[Connection, Request], None], registry: set[Connection]):
        self.dispatch, self.registry = dispatch, registry
        self.buf = bytearray()
        self.busy = False  # a response is pending; later bytes wait in buf (HTTP/1.1 ordering)
        self.closed = False
        self.timer: asyncio.TimerHandle | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.registry.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.registry.discard(self)
        if self.timer is not None:
            self.timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._drain()

    def _drain(self) -> None:
        while not self.busy and not self.closed:
            try:
                request = self._parse()
            except ValueError as exc:
                self.busy = True
                self.send(error(400, str(exc), "invalid_request_error", False), False)
                return
            if request is None:
                return
            self.busy = True
            self.dispatch(self, request)

    def _parse(self) -> Request | None:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > _MAX_HEAD:
                raise ValueError("request head too large")
            return None
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise ValueError("malformed request line")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise ValueError("chunked request bodies are not supported; send content-length")
        length = int(headers.get("content-length") or 0)
        if length > _MAX_BODY:
            raise ValueError("request body too large")
        total = end + 4 + length
        if len(self.buf) < total:
            return None
        body = bytes(self.buf[end + 4 : total])
        del self.buf[:total]
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if parts[2] == "HTTP/1.1" else connection == "keep-alive"
        return Request(parts[0].upper(), parts[1].split("?", 1)[0], headers, body, keep_alive)

    # -- answering -------------------------------------------------------------------------

    def respond(self, payload: bytes, keep_alive: bool, delay: float = 0.0) -> None:
        if delay > 0:
            self.timer = asyncio.get_running_loop().call_later(delay, self._send_later, payload, keep_alive)
        else:
            self.send(payload, keep_alive)

    def _send_later(self, payload: bytes, keep_alive: bool) -> None:
        self.timer = None
        self.send(payload, keep_alive)
        self._drain()  # from a timer: nobody else will look at bytes that arrived meanwhile

    def send(self, payload: bytes, keep_alive: bool) -> None:
        if self.closed or self.transport is None:
            return
        self.transport.write(payload)
        if keep_alive:
            self.busy = False
        else:
            self.transport.close()

    def cut(self, payload: bytes, upto: int, delay: float) -> None:
        def go() -> None:
            self.timer = None
            if not self.closed and self.transport is not None:
                self.transport.write(payload[:upto])
                self.transport.close()  # flushes what was written, then FIN: a truncated response

        self.timer = asyncio.get_running_loop().call_later(delay, go)

    def hang(self, seconds: float) -> None:
        # Never answer; the client times out.  Closed after ``seconds`` or on shutdown.
        self.timer = asyncio.get_running_loop().call_later(seconds, self.abort)

    def abort(self) -> None:
        self.timer = None
        if self.transport is not None and not self.closed:
            self.transport.close()
