"""The offline stack: CPU per demo dialogue, and what batching and caching of embeddings buy.

The offline demo (offline simulator with its embedding grader, ``bm25_extractive``, the
demo index) runs the same dialogues twice in this process, A/B paired, each time with
fresh embedders (MiniLM, and all-mpnet-base-v2 for the PTKB ranker; loaded and warmed
before the timing, as a model load is a process's start-up, not a dialogue's):

- on: simloop's embedder (concurrent encodes coalesced into one batch, split into model
  calls of similar length; fixed texts and passages cached; passage and sentence vectors
  stored with the index);
- off: every encode call is its own model call, padded as sentence-transformers pads
  a plain ``encode`` (to the longest text of each 64), and nothing is cached or stored
  (``max_batch=1``, no length buckets, every cache size 0, no index).

``embedding_batch_speedup`` = throughput on / throughput off (dialogues per second);
``offline_cpu_s_per_dialogue`` = process CPU per dialogue with everything on.  The BM25
retriever is shared and warmed so neither side pays for the JVM.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from bench_common import bench_config, close_embedders, figure, info, run_prepared, warm_embedders

CONCURRENCY = 16


async def _one(out: Path, n: int, embedders: dict[str, Any], retriever: Any) -> dict[str, Any]:
    cfg = bench_config(out, base_url=None, simulator="offline", assistant="bm25_extractive", concurrency=CONCURRENCY,
                       limit=n)
    r = await run_prepared(cfg, {**embedders, "retriever": retriever})
    embedder, mpnet = embedders["embedder"], embedders["embedder:mpnet"]
    turns = max(1, r["stats"].turns)
    return {"dialogues": n, "turns": r["stats"].turns, "errors": r["stats"].errors,
            "wall_s": round(r["engine_wall_s"], 3), "cpu_s": round(r["cpu_s"], 3),
            "dialogues_per_s": round(n / r["engine_wall_s"], 4), "cpu_s_per_dialogue": round(r["cpu_s"] / n, 3),
            "cpu_ms_per_turn": round(1000 * r["cpu_s"] / turns, 1), "model_calls": embedder.stats["model_calls"],
            "batches": embedder.stats["batches"],
            "texts_encoded": embedder.stats["texts"],
            "encode_cpu_s_per_dialogue": round(embedder.stats["encode_cpu_s"] / n, 3),
            "stored_hits": embedder.stats["stored_hits"], "mpnet_texts_encoded": mpnet.stats["texts"],
            "mpnet_encode_cpu_s_per_dialogue": round(mpnet.stats["encode_cpu_s"] / n, 3),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from simloop.search import RetrievalConfig, open_retriever

    n = 4 if quick else 8
    retriever = await open_retriever(RetrievalConfig())
    await retriever.search("warm-up query", 10)
    rows: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    settings: dict[str, dict[str, Any]] = {
        "on": {"index": retriever.index_dir},
        "off": {"max_batch": 1, "buckets": False, "cache_size": 0, "passage_cache_size": 0, "fixed_cache_size": 0}}
    try:
        with tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
            for rnd in range(1 if quick else 2):
                for mode in ("on", "off") if rnd % 2 == 0 else ("off", "on"):  # alternate who goes first
                    embedders = await warm_embedders(**settings[mode])
                    try:
                        row = await _one(Path(tmp) / f"{mode}{rnd}", n, embedders, retriever)
                    finally:
                        await close_embedders(embedders)
                    rows[mode].append(row)
                    info(f"offline demo, embeddings {mode}: {n} dialogues in {row['wall_s']} s, "
                         f"{row['cpu_s_per_dialogue']} s CPU/dialogue, {row['model_calls']} model calls for "
                         f"{row['texts_encoded']} texts ({row['encode_cpu_s_per_dialogue']} s CPU/dialogue), "
                         f"{row['stored_hits']} stored vectors used; MPNet {row['mpnet_texts_encoded']} texts "
                         f"({row['mpnet_encode_cpu_s_per_dialogue']} s CPU/dialogue), load {row['loadavg']}")
    finally:
        await retriever.aclose()
    on = max(rows["on"], key=lambda r: r["dialogues_per_s"])  # best of each: the least disturbed
    off = max(rows["off"], key=lambda r: r["dialogues_per_s"])
    speedup = on["dialogues_per_s"] / off["dialogues_per_s"]
    errors = sum(r["errors"] for rs in rows.values() for r in rs)
    figures = {"embedding_batch_speedup": figure(round(speedup, 3), 3.0, better="higher"),
               "offline_cpu_s_per_dialogue": figure(min(r["cpu_s_per_dialogue"] for r in rows["on"]), 1.5)}
    if errors:
        for fig in figures.values():
            fig["ok"] = False
    # CPU per dialogue off / on: what the throughput ratio becomes on a quiet machine (under
    # other processes' load, wall time tracks the CPU share a process gets, not its work).
    cpu_ratio = min(r["cpu_s_per_dialogue"] for r in rows["off"]) / min(r["cpu_s_per_dialogue"] for r in rows["on"])
    return figures, {"concurrency": CONCURRENCY, "dialogues": n, "runs": rows, "errors": errors,
                     "cpu_ratio_off_on": round(cpu_ratio, 3)}
