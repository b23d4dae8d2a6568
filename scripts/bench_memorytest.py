#!/usr/bin/env python3
"""Section ``memorytest``: does the offline memory test tell strategies apart (issue 12)?

Runs ``simloop memory`` (``MemoryTest``: the scripted probe user, ``bm25_extractive`` with
``memory=<strategy>``, the demo index, MiniLM and all-mpnet-base-v2 (the PTKB ranker), rules
scoring) over the 10 demo personas and reads recall per distance from ``memory.json``:

- ``memory_recall_full_d40`` >= 0.9: ``full`` keeps the fact, so the answer names it;
- ``memory_recall_window_d40`` <= 0.1: a 3-turn window lost it 40 turns ago.

The full run does all four strategies at distances 5/10/20/40 (the README table);
``--quick`` only ``full`` and ``window`` at 5 and 40.  Usage:
``scripts/bench_memorytest.py [--quick]`` (prints the figures and the table; writes nothing).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_VENV_PY = ROOT / ".venv" / "bin" / "python"

if __name__ == "__main__" and _VENV_PY.exists() and Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
    os.execv(str(_VENV_PY), [str(_VENV_PY), __file__, *sys.argv[1:]])  # run under the project venv

sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

TARGETS = {"full": (0.9, "higher"), "window": (0.1, "lower")}


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from bench_common import figure, info

    from simloop.config import RunConfig
    from simloop.memorytest import MemoryTest, parse_config

    strategies = ["full", "window"] if quick else ["full", "summary", "window", "adaptive"]
    distances = [5, 40] if quick else [5, 10, 20, 40]
    with tempfile.TemporaryDirectory(prefix="simloop-bench-memorytest-") as tmp:
        # A 42-turn dialogue on a loaded machine can take longer than the default 600 s, and a
        # probe cut off by a timeout counts as a miss: the limit here is generous.
        base = RunConfig.model_validate({"out": tmp, "run_id": "mem", "progress": False, "concurrency": 8,
                                         "dialogue_timeout_s": 3600,
                                         "scenarios": {"personas_dir": str(ROOT / "personas")}})
        test = MemoryTest(parse_config({"strategies": strategies, "distances": distances}), base)
        t0 = time.perf_counter()
        memory = await test.run()
        took = round(time.perf_counter() - t0, 1)
    table = {name: {"recall_by_distance": s.recall_by_distance, "query_recall_by_distance": s.query_recall_by_distance,
                    "tokens_per_turn": s.tokens_per_turn, "probes_by_distance": s.probes_by_distance,
                    "errors": s.errors}
             for name, s in memory.strategies.items()}
    figures = {}
    for name, (target, better) in TARGETS.items():
        value = memory.strategies[name].recall_by_distance.get("40") if name in memory.strategies else None
        figures[f"memory_recall_{name}_d40"] = figure(value, target, better)
    for name, row in table.items():
        info(f"memorytest {name}: recall {row['recall_by_distance']}, {row['tokens_per_turn']} tokens/turn")
    return figures, {"strategies": table, "distances": distances, "personas": memory.personas, "run_s": took,
                     "failed_probes": [p.model_dump(include={"strategy", "fact_id", "distance", "rule", "recommended"})
                                       for p in memory.probes if not p.passed and p.strategy == "full"]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    figures, det = asyncio.run(run(a.quick, ROOT / "bench"))
    print(json.dumps({"figures": figures, "details": det}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
