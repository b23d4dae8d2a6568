"""Section ``real-llm`` — every LLM role against a real model, and how busy simloop keeps it.

``simloop llm-server`` (llama-cpp-python's server, SmolLM2-135M-Instruct) is started as a
real subprocess and put behind a thin proxy on 127.0.0.1 that records when each request
was in flight, as the server saw it.  Then:

1. every role of ``real_llm_roles.ROLES``, one after the other, through the real CLI:
   ``real_llm_roles_ok`` (roles that finished a dialogue without a protocol error, "k/n"),
   ``real_llm_protocol_errors``, ``real_llm_invalid_outputs_recorded_as_utterances`` and
   ``real_llm_seconds_per_call`` (the server's time per request, from the proxy: one role
   at a time, so mostly without queueing);
2. a run with the LLM simulator and GenAIus (k=5, as in the roles) at ``--concurrency 4``,
   8 dialogues of 2 turns:
   ``real_llm_server_busy_share``, the union of the proxy's in-flight intervals over the
   run's wall time (``run.json`` started_at .. finished_at, warm-up included).  The server
   answers one request at a time, so the share says how often simloop left it idle.

Quality is not measured: a 135M model is weak.  Without the extra ``local-llm`` the
section reports why and its figures as missing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench_common import ROOT, figure, info
from real_llm_roles import GENAIUS, MODEL, ROLES, RoleResult, run_role

READY_S = 300
BUSY_CONCURRENCY = 4

__all__ = ["run", "union_s", "Proxy"]


def union_s(intervals: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds of [lo, hi] covered by at least one of ``intervals``."""
    total, end = 0.0, lo
    for a, b in sorted(intervals):
        a, b = max(a, end), min(b, hi)
        if b > a:
            total += b - a
            end = b
    return total


class Proxy:
    """A thin HTTP proxy on 127.0.0.1 in front of ``upstream`` that records each request's
    (start, end) on the wall clock (``time.time``, comparable with run.json)."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.upstream = f"{parts.scheme}://{parts.netloc}"  # requests keep their own path (/v1/...)
        self.intervals: list[tuple[float, float]] = []
        self.chat_s: list[float] = []
        self.abandoned = 0  # requests whose client hung up before the answer (its timeout)
        self.url = ""

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Proxy]:
        import aiohttp
        from aiohttp import web

        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800))
        hop = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}

        async def forward(request: web.Request) -> web.Response:
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in hop}
            t0 = time.time()
            try:
                async with session.request(request.method, self.upstream + request.path_qs, data=body,
                                           headers=headers) as r:
                    data = await r.read()
                    out = {k: v for k, v in r.headers.items() if k.lower() not in hop}
                    status = r.status
            except asyncio.CancelledError:  # the client gave up: in flight until then
                self.intervals.append((t0, time.time()))
                self.abandoned += 1
                raise
            t1 = time.time()
            self.intervals.append((t0, t1))
            if request.path.endswith("/chat/completions"):
                self.chat_s.append(t1 - t0)
            return web.Response(body=data, status=status, headers=out)

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", forward)
        # handler_cancellation: a client that gives up (its timeout) closes the proxy's upstream
        # request too, as it would close its own connection to the server without the proxy
        # (llama-cpp-python then drops a request still waiting for its lock).
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))  # the kernel's free port, held from here on
        site = web.SockSite(runner, sock)
        await site.start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        try:
            yield self
        finally:
            await runner.cleanup()
            await session.close()


@asynccontextmanager
async def llm_server() -> AsyncIterator[str]:
    """``simloop llm-server`` in a subprocess; its base URL (the first line of its stdout)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "simloop", "llm-server", cwd=ROOT,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), READY_S)
        except TimeoutError:
            line = b""
        if not line.strip():
            proc.send_signal(signal.SIGTERM)
            err = (await proc.stderr.read()).decode(errors="replace")[-800:]
            raise RuntimeError(f"simloop llm-server printed no URL: {err}")
        yield line.decode().strip()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)  # our own child, by its pid: it stops the server it started
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _iso_s(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def _busy_phase(proxy: Proxy, out: Path, quick: bool) -> dict[str, Any]:
    """The LLM simulator and GenAIus at concurrency 4; the server's busy share of the run."""
    limit = 4 if quick else 8
    args = ["run", "--simulator", "llm", *GENAIUS, "--concurrency", str(BUSY_CONCURRENCY),
            "--limit", str(limit), "--max-turns", "2", "--base-url", proxy.url, "--model", MODEL,
            "--out", str(out), "--no-progress"]
    first, abandoned = len(proxy.intervals), proxy.abandoned
    p = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "simloop", *args], cwd=ROOT, text=True,
                                capture_output=True, timeout=1800, stdin=subprocess.DEVNULL)
    run_dir = Path(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else None
    if run_dir is None or not (run_dir / "run.json").exists():
        return {"error": f"exit {p.returncode}: {p.stderr[-800:]}"}
    manifest = json.loads((run_dir / "run.json").read_text())
    lo, hi = _iso_s(manifest["started_at"]), _iso_s(manifest["finished_at"])
    spans = [(_iso_s(t["started_at"]), _iso_s(t["ended_at"]))
             for t in map(json.loads, (run_dir / "dialogues.jsonl").read_text().splitlines())]
    mine = proxy.intervals[first:]
    busy = union_s(mine, lo, hi)
    d_lo, d_hi = min(a for a, _ in spans), max(b for _, b in spans)
    return {"exit": p.returncode, "run_dir": str(run_dir), "dialogues": len(spans), "requests": len(mine),
            "wall_s": round(hi - lo, 1), "busy_s": round(busy, 1), "busy_share": round(busy / (hi - lo), 4),
            "before_first_dialogue_s": round(d_lo - lo, 1), "after_last_dialogue_s": round(hi - d_hi, 1),
            "busy_share_while_dialogues_ran": round(union_s(mine, d_lo, d_hi) / max(1e-9, d_hi - d_lo), 4),
            "abandoned_requests": proxy.abandoned - abandoned, "stop_reasons": manifest.get("counts", {}),
            "errors": _errors(run_dir), "capabilities": manifest.get("llm", {}).get("capabilities")}


def _errors(run_dir: Path) -> dict[str, int]:
    """The run's dialogue errors by type."""
    seen: dict[str, int] = {}
    for line in (run_dir / "dialogues.jsonl").read_text().splitlines():
        error = json.loads(line).get("error")
        if error:
            seen[error["type"]] = seen.get(error["type"], 0) + 1
    return seen


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import tempfile

    from simloop.llm import server_missing

    missing = server_missing()
    if missing:
        info(f"real-llm: {missing}")
        names = ("real_llm_roles_ok", "real_llm_protocol_errors", "real_llm_invalid_outputs_recorded_as_utterances",
                 "real_llm_seconds_per_call", "real_llm_server_busy_share")
        return {n: figure(None, None) for n in names}, {"skipped": missing}
    results: dict[str, RoleResult] = {}
    with tempfile.TemporaryDirectory(prefix="simloop-real-llm-") as tmp:
        async with llm_server() as url, Proxy(url).serving() as proxy:
            info(f"real-llm: SmolLM2 at {url}, proxied at {proxy.url}")
            for role in ROLES:
                t0 = time.perf_counter()
                results[role.name] = r = await asyncio.to_thread(run_role, role, proxy.url, Path(tmp) / role.name,
                                                                 results)
                info(f"real-llm: {role.name}: {'ok' if r.ok else 'FAILED'} in {time.perf_counter() - t0:.0f} s, "
                     f"{r.llm_calls} calls, {len(r.protocol_errors)} protocol errors, exit {r.code}")
            per_call = list(proxy.chat_s)
            busy = await _busy_phase(proxy, Path(tmp) / "busy", quick)
            info(f"real-llm: busy share {busy.get('busy_share')} over {busy.get('wall_s')} s")
    ok = sum(r.ok for r in results.values())
    protocol = sum(len(r.protocol_errors) for r in results.values())
    invalid = sum(len(r.invalid_utterances) for r in results.values())
    seconds = round(sum(per_call) / len(per_call), 3) if per_call else None
    figures = {
        "real_llm_roles_ok": {"value": f"{ok}/{len(ROLES)}", "target": f"{len(ROLES)}/{len(ROLES)}",
                              "ok": ok == len(ROLES)},
        "real_llm_protocol_errors": figure(protocol, 0),
        "real_llm_invalid_outputs_recorded_as_utterances": figure(invalid, 0),
        "real_llm_seconds_per_call": figure(seconds, None),
        "real_llm_server_busy_share": figure(busy.get("busy_share"), 0.95, better="higher"),
    }
    details = {"model": MODEL, "roles": {n: r.as_dict() for n, r in results.items()}, "requests": len(per_call),
               "busy": busy, "busy_measured": "a proxy on 127.0.0.1 in front of the server: the union of its "
                                             "requests' in-flight intervals over the run's wall time (run.json)"}
    return figures, details
