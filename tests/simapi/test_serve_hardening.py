"""`simloop serve` hardening (issue 14 item 5) over real HTTP: the token is checked before
the body is read, a body over --max-body answers 413, oversized fields answer 422."""

from __future__ import annotations

import asyncio
import json

import httpx

from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.simapi.app import ServeOptions, create_app, running
from simloop.simapi.protocol import MAX_DESCRIPTION_CHARS, MAX_RESPONSE_CHARS
from tests.helpers.simapi import TOKEN_A, TOKENS, make_cfg

SIM = "tests.helpers.plugins:QuickSimulator"  # the simulator the server loads by name


def _app(tmp_path, max_body: int = 1 << 20):
    cfg = make_cfg(tmp_path, simulator=SIM)
    fakes = {"embedder": HashEmbedder(), "retriever": MemoryRetriever([])}
    return create_app(cfg, TOKENS, ServeOptions(max_body=max_body), overrides=fakes)


async def _raw(url: str, head: str) -> bytes:
    """Send raw request bytes (a head alone, or a head and a chunked body) and read the answer."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode())
    await writer.drain()
    try:
        # The server must answer from the headers alone; it never gets the 20 MB it was promised.
        return await asyncio.wait_for(reader.read(4096), timeout=60)
    finally:
        writer.close()


async def test_token_is_checked_before_the_body_is_read(tmp_path):
    async with running(_app(tmp_path)) as url:
        for auth, detail in (("", "Not authenticated"), ("Authorization: Bearer wrong\r\n", "Token is invalid.")):
            head = (f"POST /run/start HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
                    f"Content-Length: {20 << 20}\r\n\r\n")
            answer = await _raw(url, head)
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
            assert detail.encode() in answer and b"www-authenticate: bearer" in answer.lower()
        # With the right token the same promise of 20 MB is refused by its Content-Length.
        head = (f"POST /run/start HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN_A}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {20 << 20}\r\n\r\n")
        assert (await _raw(url, head)).startswith(b"HTTP/1.1 413")


async def test_body_limit_answers_413_with_or_without_content_length(tmp_path):
    async with running(_app(tmp_path, max_body=4096)) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=30) as http:
            big = {"run_id": "r1", "description": "x", "extra": {"pad": "y" * 5000}}
            r = await http.post("/run/start", json=big)
            assert r.status_code == 413 and "4096" in r.json()["detail"]

            # Chunked, so no Content-Length: the limit is found while reading (10 chunks of 1000 bytes).
            chunked = "".join(f"3e8\r\n{' ' * 1000}\r\n" for _ in range(10)) + "0\r\n\r\n"
            head = (f"POST /run/start HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN_A}\r\n"
                    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            assert (await _raw(url, head + chunked)).startswith(b"HTTP/1.1 413")
            ok = await http.post("/run/start", json={"run_id": "r1", "description": "small"})
            assert ok.status_code == 200, ok.text  # under the limit the body reaches the route whole
            assert (await http.get("/auth/verify")).json() == {"team_id": "team-a"}


async def test_field_limits_answer_422_and_write_nothing(tmp_path):
    async with running(_app(tmp_path)) as url:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=30) as http:
            too_long = "d" * (MAX_DESCRIPTION_CHARS + 1)
            r = await http.post("/debug/start", json={"run_id": "big", "description": too_long})
            assert r.status_code == 422 and "description" in json.dumps(r.json())
            r = await http.post("/run/start", json={"run_id": "i" * 300, "description": "ok"})
            assert r.status_code == 422
            assert not (tmp_path / "out" / "serve-big").exists()
            start = await http.post("/run/start", json={"run_id": "r2", "description": "ok"})
            assert start.status_code == 200, start.text
            r = await http.post("/run/continue", json={"run_id": "r2", "response": "a" * (MAX_RESPONSE_CHARS + 1)})
            assert r.status_code == 422 and "response" in json.dumps(r.json())
            r = await http.post("/run/continue", json={"run_id": "r2", "response": "A marathon is 42 km."})
            assert r.status_code == 200, r.text
