"""Figure 3 — rate-limit utilisation: configured rpm R against a mock enforcing the same R.

The mock (another process, 200 ms latency) answers 429 above R requests in any sliding
60 s window, so every 429 it sends was caused by simloop's own pacing.  Enough
dialogues run to keep the throttle saturated; the achieved rate is read from the mock's
per-second request counts over a window longer than the mock's 60 s one (a window
shorter than 60 s could never trip it), skipping the first second.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import MockProcess, bench_config, figure, info, percentile, run_prepared

RPM = 1200
LATENCY_MS = 200.0
CONCURRENCY = 64


async def measure(rpm: float, window_s: int) -> dict[str, Any]:
    per_s = rpm / 60
    # Enough calls to outlast the window: turns × 2 calls per dialogue.
    turns = 10
    n = int(per_s * (window_s + 10) / (2 * turns)) + CONCURRENCY
    with MockProcess(latency_ms=LATENCY_MS, rpm_limit=int(rpm)) as mock, \
            tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        cfg = bench_config(Path(tmp), base_url=mock.url, simulator="bench_plugins:OneCallSimulator",
                           assistant="bench_plugins:OneCallAssistant", concurrency=CONCURRENCY, limit=n,
                           sim_params={"turns": turns}, asst_params={"retrieve": False}, rpm=rpm,
                           max_turns=turns + 1)
        mock.reset()
        t0 = time.monotonic()
        task = asyncio.create_task(run_prepared(cfg))
        # Stop once the window (plus the skipped first second and one spare) has passed.
        done, _ = await asyncio.wait([task], timeout=window_s + 2.5)
        stats = mock.stats()
        if not done:
            task.cancel()  # the engine records the interruption and closes the run
            await asyncio.gather(task, return_exceptions=True)
        elapsed = time.monotonic() - t0
    rps = stats["rps"]
    measured = rps[1:1 + window_s]
    achieved_rpm = 60 * sum(measured) / max(1, len(measured))
    return {
        "rpm": rpm, "window_s": len(measured), "requests_in_window": sum(measured),
        "achieved_rpm": round(achieved_rpm, 1), "utilisation": round(achieved_rpm / rpm, 4),
        "self_429s": stats["by_status"].get("429", 0), "peak_rpm_60s": stats["peak_rpm"],
        "rps_min": min(measured) if measured else 0, "rps_max": max(measured) if measured else 0,
        "rps_p50": percentile(measured, 50), "by_status": stats["by_status"], "elapsed_s": round(elapsed, 1),
        "saturated": not done,
    }


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import openai  # noqa: F401  imported before the clock starts

    window = 12 if quick else 70
    r = await measure(RPM, window)
    info(f"rate limit: R={RPM} rpm over {r['window_s']}s: achieved {r['achieved_rpm']} rpm "
         f"= {r['utilisation']:.3f} of R, {r['self_429s']} self-inflicted 429s, per-second "
         f"{r['rps_min']}..{r['rps_max']} (saturated: {r['saturated']})")
    figures = {"rate_limit_utilisation": figure(r["utilisation"], 0.95, better="higher"),
               "rate_limit_self_429s": figure(r["self_429s"], 0)}
    if not r["saturated"]:
        figures["rate_limit_utilisation"]["ok"] = False  # demand ran out: the figure would say nothing
    note = "window shorter than the mock's 60 s: 429s cannot occur (quick run)" if window < 60 else ""
    return figures, {**r, "latency_ms": LATENCY_MS, "concurrency": CONCURRENCY, "note": note}
