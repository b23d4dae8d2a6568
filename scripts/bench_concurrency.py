"""Figure 1 — concurrency efficiency against a 200 ms mock LLM in another process.

N dialogues × T turns, two sequential LLM calls per turn (bench simulator, bench
assistant), at concurrency C.  Ideal wall time = T × 2 × latency × ceil(N / C); the
figure is measured / ideal.  The client's CPU per request is reported alongside: when
C / latency requests per second need more than one core of client CPU, the ratio is
bounded below by (C / latency) × cpu_per_request, whatever the engine does.

Figures compare against limits measured in the same run (the machine is shared, so
absolute times drift; the load average is recorded with every row):

- ``client_cpu_ms_per_request``: the full LLM layer at concurrency 500 (plain http over
  simloop's own HTTP/1.1 connections, ``wire``, the default), paired A/B with the same
  requests over aiohttp (``..._aiohttp``), over openai's own aiohttp client
  (``..._openai_aiohttp``) and over the httpx2 fallback (``..._httpx``);
- ``concurrency_ratio_1000_vs_cpu_bound``: wall / ideal at 1,000 dialogues and 200 ms,
  divided by that run's own CPU bound max(1, ρ), ρ = needed req/s × CPU per request;
- ``concurrency_ratio_1000_at_2s``: wall / ideal at 1,000 dialogues when the model takes
  2 s, where one core is enough (ρ < 1) and the ratio itself should be near 1; next to it
  ``..._at_2s_minimal``, the bare asyncio client's ratio against the same mock: the floor
  that 1,000 connections opened at once and the mock's queueing set for any client.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

from bench_common import MockProcess, Steal, bench_config, figure, info, run_prepared, shown_path

LATENCY_MS = 200.0
CALLS_PER_TURN = 2


async def _one(mock: MockProcess, out: Path, c: int, n: int, turns: int, latency_ms: float = LATENCY_MS,
               transport: str = "wire") -> dict[str, Any]:
    from simloop.loop import running_loop_name

    os.environ["SIMLOOP_LLM_HTTP"] = transport  # read when the run's LLM pool makes its client
    cfg = bench_config(out, base_url=mock.url, simulator="bench_plugins:OneCallSimulator",
                       assistant="bench_plugins:OneCallAssistant", concurrency=c, limit=n,
                       sim_params={"turns": turns}, asst_params={"retrieve": False}, max_turns=turns + 1)
    mock.reset()
    mock_cpu0 = mock.cpu_s()
    with Steal() as steal:
        r = await run_prepared(cfg)
    st = mock.stats()
    requests = st["requests"]
    ideal = turns * CALLS_PER_TURN * latency_ms / 1000 * math.ceil(n / c)
    wall = r["engine_wall_s"]
    row = {
        "concurrency": c, "dialogues": n, "turns": turns, "latency_ms": latency_ms, "transport": transport,
        "event_loop": running_loop_name(),  # uvloop, as simloop's commands run, unless SIMLOOP_EVENT_LOOP says
        "loadavg": [round(x, 2) for x in os.getloadavg()], "steal_share": steal.share,
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "ratio": round(wall / ideal, 3),
        "requests": requests, "by_status": st["by_status"],
        "req_per_s": round(requests / wall, 1),
        "client_cpu_s": round(r["cpu_s"], 3),
        "client_cpu_ms_per_request": round(1000 * r["cpu_s"] / max(1, requests), 3),
        "client_cpu_util": round(r["cpu_s"] / wall, 3),
        "mock_cpu_s": round(mock.cpu_s() - mock_cpu0, 3),
        "errors": r["stats"].errors, "turns_done": r["stats"].turns,
        "needed_req_per_s": round(c * 1000 / latency_ms, 1),
    }
    # Client load: the share of one core (one event loop) the ideal request rate needs.
    # Above 1 the ratio cannot go below it; close to 1, queueing for the loop adds to every call.
    row["client_load"] = round(row["needed_req_per_s"] * row["client_cpu_ms_per_request"] / 1000, 3)
    row["cpu_bound"] = max(1.0, row["client_load"])
    row["ratio_vs_cpu_bound"] = round(row["ratio"] / row["cpu_bound"], 3)
    info(f"{transport} concurrency {c} at {latency_ms:g} ms: N={n} T={turns} wall {wall:.2f}s ideal {ideal:.2f}s "
         f"ratio {row['ratio']} "
         f"({row['req_per_s']} req/s, client {row['client_cpu_ms_per_request']} ms CPU/req, "
         f"errors {row['errors']}, load {row['loadavg']}, steal {row['steal_share']})")
    return row


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import openai  # noqa: F401  imported before timing: a first import costs ~0.5 s (the warm-up runs load the rest)

    turns = 2 if quick else 4
    plan = [(10, 10), (100, 100), (1000, 1000)] if quick else [(10, 20), (100, 200), (1000, 1000)]
    rows: list[dict[str, Any]] = []
    ab: dict[str, list[dict[str, Any]]] = {"wire": [], "aiohttp": [], "openai-aiohttp": [], "httpx": []}
    with MockProcess(latency_ms=LATENCY_MS) as mock, tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        for transport in ab:  # warm-up: imports, first connections
            await _one(mock, Path(tmp) / f"warm-{transport}", 10, 10, 1, transport=transport)
        for c, n in plan:
            rows.append(await _one(mock, Path(tmp) / f"c{c}", c, n, turns))
        # client CPU at concurrency 500, A/B paired: wire (default), aiohttp, openai's, httpx2, alternating
        for rnd in range(1 if quick else 2):
            order = ("wire", "aiohttp", "openai-aiohttp", "httpx")
            for transport in order if rnd % 2 == 0 else order[::-1]:
                ab[transport].append(await _one(mock, Path(tmp) / f"ab-{transport}-{rnd}", 500, 500, turns,
                                                transport=transport))
        httpx_1000 = await _one(mock, Path(tmp) / "httpx-1000", *plan[-1], turns, transport="httpx")
        profile = await _profile_client(mock, Path(tmp) / "prof", out_dir, 1000)
        floor = await _minimal_client(mock, 1000, turns * CALLS_PER_TURN)
    with MockProcess(latency_ms=10 * LATENCY_MS) as slow, tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        await _one(slow, Path(tmp) / "warm", 10, 10, 1, latency_ms=10 * LATENCY_MS)
        at_2s = await _one(slow, Path(tmp) / "c1000-2s", 1000, 1000, 2, latency_ms=10 * LATENCY_MS)
        floor_2s = await _minimal_client(slow, 1000, 2 * CALLS_PER_TURN, latency_ms=10 * LATENCY_MS)
    os.environ.pop("SIMLOOP_LLM_HTTP", None)
    figures = {f"concurrency_ratio_{r['concurrency']}": figure(r["ratio"], None) for r in rows}
    for r in rows:
        if r["errors"]:
            figures[f"concurrency_ratio_{r['concurrency']}"]["ok"] = False
    top = rows[-1]
    best = {t: min(rs, key=lambda r: r["client_cpu_ms_per_request"]) for t, rs in ab.items()}
    figures["client_cpu_ms_per_request"] = figure(best["wire"]["client_cpu_ms_per_request"], 1.0)
    figures["client_cpu_ms_per_request_aiohttp"] = figure(best["aiohttp"]["client_cpu_ms_per_request"], None)
    figures["client_cpu_ms_per_request_httpx"] = figure(best["httpx"]["client_cpu_ms_per_request"], None)
    figures["client_cpu_ms_per_request_openai_aiohttp"] = figure(
        best["openai-aiohttp"]["client_cpu_ms_per_request"], None)
    figures["client_cpu_ms_per_request_1000"] = figure(top["client_cpu_ms_per_request"], None)
    figures["concurrency_ratio_1000_vs_cpu_bound"] = figure(top["ratio_vs_cpu_bound"], 1.2)
    figures["concurrency_ratio_1000_at_2s"] = figure(at_2s["ratio"], 1.1)
    figures["concurrency_ratio_1000_at_2s_minimal"] = figure(floor_2s["ratio"], None)
    figures["concurrency_ratio_1000_httpx"] = figure(httpx_1000["ratio"], None)
    figures["client_cpu_ms_per_request_minimal"] = figure(floor["cpu_ms_per_request"], None)
    for key, row in (("concurrency_ratio_1000_vs_cpu_bound", top), ("concurrency_ratio_1000_at_2s", at_2s)):
        if row["errors"]:
            figures[key]["ok"] = False
    return figures, {"latency_ms": LATENCY_MS, "calls_per_turn": CALLS_PER_TURN, "runs": rows, "ab_500": ab,
                     "httpx_run": httpx_1000, "at_2s": at_2s, "client_profile": profile, "minimal_client": floor,
                     "minimal_client_at_2s": floor_2s}


async def _profile_client(mock: MockProcess, out: Path, out_dir: Path, c: int) -> dict[str, Any]:
    """Where the client's CPU goes at concurrency ``c`` (pyinstrument; one turn per dialogue)."""
    from bench_profile import profiled

    from simloop.run import execute, prepare_run

    cfg = bench_config(out, base_url=mock.url, simulator="bench_plugins:OneCallSimulator",
                       assistant="bench_plugins:OneCallAssistant", concurrency=c, limit=c,
                       sim_params={"turns": 1}, asst_params={"retrieve": False}, max_turns=2)
    os.environ["SIMLOOP_LLM_HTTP"] = "wire"  # the default transport (an A/B run may have set httpx)
    prep = prepare_run(cfg)
    text = out_dir / f"profile_client_{c}.txt"
    _, prof = await profiled(execute(prep), text)
    for row in prof["top_self"][:5]:
        info(f"  {row['share']:6.1%}  {row['function']}")
    info("  by package: " + ", ".join(f"{k} {v:.0%}" for k, v in list(prof["by_package"].items())[:8]))
    return {**prof, "profile_text": shown_path(text)}


async def _minimal_client(mock: MockProcess, c: int, per_connection: int,
                          latency_ms: float = LATENCY_MS) -> dict[str, Any]:
    """The floor: a bare asyncio HTTP/1.1 keep-alive client (no SDK, no engine) sending the
    same kind of request, ``c`` connections at once, each ``per_connection`` in a row.  Its
    ratio at 2 s is what opening 1,000 connections and the mock's own queueing cost any
    client (``concurrency_ratio_1000_at_2s_minimal``)."""
    import asyncio
    import json
    import time

    from bench_common import proc_cpu_s

    body = json.dumps({"model": "mock-model", "messages": [{"role": "user", "content": "Write turn 1 of the user."}],
                       "max_tokens": 48}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()

    async def conn() -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", mock.port)
        for _ in range(per_connection):
            writer.write(head + body)
            lines = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
            length = next(int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length"))
            json.loads(await reader.readexactly(length))["choices"][0]["message"]["content"]
        writer.close()
        return per_connection

    mock.reset()
    cpu0, mock0, t0 = proc_cpu_s(), mock.cpu_s(), time.perf_counter()
    done = sum(await asyncio.gather(*(conn() for _ in range(c))))
    wall = time.perf_counter() - t0
    row = {"connections": c, "requests": done, "cpu_ms_per_request": round(1000 * (proc_cpu_s() - cpu0) / done, 3),
           "mock_cpu_ms_per_request": round(1000 * (mock.cpu_s() - mock0) / done, 3),
           "latency_ms": latency_ms, "wall_s": round(wall, 3), "ideal_s": round(per_connection * latency_ms / 1000, 3)}
    row["ratio"] = round(wall / row["ideal_s"], 3)
    info(f"minimal asyncio client, {c} connections at {latency_ms:g} ms: {row['cpu_ms_per_request']} ms CPU/request "
         f"(mock {row['mock_cpu_ms_per_request']} ms), ratio {row['ratio']}")
    return row
