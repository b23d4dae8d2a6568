"""Figure 5 — memory per active dialogue, with 10,000 dialogues parked mid-turn.

The real runner starts 10,000 dialogues at once (concurrency 10,000); the bench
simulator speaks (scripted model at the seam) and the bench assistant parks each one on
an ``asyncio.Event`` inside ``respond``.  With all of them parked, the growth over the
idle baseline is divided by 10,000: once as RSS (what the OS charges; the figure), once
with tracemalloc in a second pass (Python allocations only, and where they come from).
(``scripts/bench_memory.py`` is the other engineer's memory-*strategy* bench; this is
the engine's footprint.)
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench_common import bench_config, figure, info
from bench_plugins import bench_chat

from simloop.fakes import CpuMeter

KIB = 1024


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    import os

    return pages * os.sysconf("SC_PAGE_SIZE")


async def _parked(out: Path, n: int, measure: Any, timeout_s: float = 240.0) -> dict[str, Any]:
    """Start ``n`` dialogues, wait until all are parked, call ``measure()``, release them."""
    from simloop.run import execute, prepare_run

    meter = CpuMeter()
    cfg = bench_config(out, base_url=None, simulator="bench_plugins:OneCallSimulator",
                       assistant="bench_plugins:ParkedAssistant", concurrency=n, limit=n,
                       sim_params={"turns": 1}, max_turns=2)
    prep = prepare_run(cfg, overrides={"chat:simulator": bench_chat("simulator", meter)})
    assistant: Any = prep.assistant  # a ParkedAssistant (bench_plugins): its arrived count and gate
    task = asyncio.create_task(execute(prep))
    t0 = time.monotonic()
    while assistant.arrived < n and time.monotonic() - t0 < timeout_s and not task.done():
        await asyncio.sleep(0.05)
    parked = assistant.arrived
    park_s = time.monotonic() - t0
    result = measure()
    assistant.gate.set()
    stats = await asyncio.wait_for(task, timeout=timeout_s)
    return {"parked": parked, "park_s": round(park_s, 2), "finished": stats.dialogues, "errors": stats.errors,
            "measure": result}


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    n = 2000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        await _parked(Path(tmp) / "warm", 200, lambda: None)  # imports, first-use caches, arenas
        gc.collect()
        base_rss = _rss_bytes()

        def rss_now() -> int:
            gc.collect()
            return _rss_bytes()

        rss = await _parked(Path(tmp) / "rss", n, rss_now)
        rss_per = (rss["measure"] - base_rss) / max(1, rss["parked"])

        gc.collect()
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        base_traced = tracemalloc.get_traced_memory()[0]

        def traced_now() -> tuple[int, Any]:
            gc.collect()
            return tracemalloc.get_traced_memory()[0], tracemalloc.take_snapshot()

        traced = await _parked(Path(tmp) / "traced", n, traced_now)
        tracemalloc.stop()
    current, after = traced["measure"]
    traced_per = (current - base_traced) / max(1, traced["parked"])
    top = [{"where": str(s.traceback[0]), "kib_per_dialogue": round(s.size_diff / KIB / n, 3),
            "count_diff": s.count_diff} for s in after.compare_to(before, "lineno")[:12]]
    info(f"memory: {n} parked dialogues: RSS {rss_per / KIB:.1f} KiB each, Python allocations "
         f"{traced_per / KIB:.1f} KiB each (parked {rss['parked']}/{n} in {rss['park_s']}s)")
    for row in top[:6]:
        info(f"  {row['kib_per_dialogue']:7.3f} KiB  {row['where']}")
    ok = rss["parked"] == n and traced["parked"] == n and not rss["errors"] and not traced["errors"]
    figures = {"memory_per_dialogue_kib": figure(rss_per / KIB, 64.0),
               "memory_per_dialogue_traced_kib": figure(traced_per / KIB, None)}
    figures["memory_per_dialogue_kib"]["ok"] = figures["memory_per_dialogue_kib"]["ok"] and ok
    rss.pop("measure")
    traced.pop("measure")
    return figures, {"dialogues": n, "baseline_rss_mib": round(base_rss / KIB / KIB, 1), "rss_run": rss,
                     "traced_run": traced, "top_allocations": top}
