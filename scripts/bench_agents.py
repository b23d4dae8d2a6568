"""Figure 6 — cost per turn of each reference agent against the mock at a fixed latency.

Every registered assistant (``simloop.run.plugins.available("assistant")``; ``remote_http``
excepted: its cost is the remote's) answers a few dialogues from a scripted user that
makes no LLM call, so every request the mock counts is the agent's.  Per turn: HTTP
requests at the mock (retries included), LLM stages, prompt and completion tokens, and
the wall time of ``respond`` (``turn.latency_ms``), one dialogue at a time so that agents'
local work (MiniLM and MPNet on CPU) does not queue behind another dialogue's.  Every agent
starts from the same state: openai imported (a run that calls a model imports it while it
prepares, outside the timing; the first agent in the plan would otherwise pay the import),
one BM25 retriever on the demo index, shared and warmed by an untimed dialogue (the JVM
compiles Lucene's search path over its first queries), and embedders of its own (MiniLM,
and all-mpnet-base-v2 for the PTKB ranker), loaded and warmed outside the timing (a model's
load and its ONNX Runtime session are a process's start-up, paid once, not a turn's), so
that no agent's encodes are served from another agent's cache.  The embedder reads the
passage vectors stored with the demo index, as a run's does.  ``agent_cpu_ms_per_turn_<agent>``:
the whole process's CPU per turn (MiniLM, MPNet, JVM and the LLM client included), with a
target for the three agents with the most local work.  The mock's completions are synthetic:
prompt tokens are the agent's own, completion tokens only show how many outputs it asks for.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_common import (
    MockProcess,
    bench_config,
    close_embedders,
    figure,
    info,
    percentile,
    run_prepared,
    warm_embedders,
)

LATENCY_MS = 200.0
EXPECTED = ("bm25_extractive", "genaius", "nii_rtg", "nii_gtr", "iiuot", "acms")
SKIP = {"remote_http": "calls an assistant running elsewhere; its cost is the remote's"}
VARIANTS = {"genaius": [("genaius_summary", {"memory": "summary"})]}
CPU_TARGET_MS = {"nii_gtr": 400.0, "iiuot": 400.0, "acms": 400.0}


def _plan() -> tuple[list[tuple[str, str, dict]], list[str]]:
    from simloop.run import available

    names = available("assistant")
    plan: list[tuple[str, str, dict]] = []
    for name in names:
        if name in SKIP:
            continue
        plan.append((name, name, {}))
        plan.extend((label, name, params) for label, params in VARIANTS.get(name, []))
    return plan, [n for n in EXPECTED if n not in names]


def _summarise(run_dir: Path, requests: int, cpu_s: float) -> dict[str, Any]:
    from simloop.run import read_transcripts

    transcripts = list(read_transcripts(run_dir))
    turns = [t for tr in transcripts for t in tr.turns]
    n = max(1, len(turns))
    stages = [s for t in turns for s in t.stages]
    llm = [s for s in stages if s.model is not None and not s.cached]
    latency = [t.latency_ms for t in turns]
    errors = [tr.error.message for tr in transcripts if tr.error is not None]
    return {
        "dialogues": len(transcripts), "turns": len(turns), "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "requests_per_turn": round(requests / n, 3), "llm_stages_per_turn": round(len(llm) / n, 3),
        "prompt_tokens_per_turn": round(sum(s.prompt_tokens for s in stages) / n, 1),
        "completion_tokens_per_turn": round(sum(s.completion_tokens for s in stages) / n, 1),
        "wall_ms_per_turn": round(statistics.fmean(latency), 1) if latency else None,
        "wall_ms_p50": round(percentile(latency, 50), 1) if latency else None,
        "cpu_ms_per_turn": round(1000 * cpu_s / n, 1),  # whole process: MiniLM, MPNet, JVM and client threads too
        "stage_names": sorted({s.name for s in stages}),
        "retries": sum(s.retries for s in stages),
    }


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from simloop.search import RetrievalConfig, open_retriever

    dialogues, turns = (1, 2) if quick else (2, 3)
    plan, missing = _plan()
    retriever = await open_retriever(RetrievalConfig())
    rows: dict[str, Any] = {}
    stored_hits = 0
    try:
        with MockProcess(latency_ms=LATENCY_MS) as mock, tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
            def config(label: str, name: str, params: dict) -> Any:
                return bench_config(Path(tmp) / label, base_url=mock.url, simulator="bench_plugins:ScriptedUser",
                                    assistant=name, concurrency=1, limit=dialogues, sim_params={"turns": turns},
                                    asst_params=params, max_turns=turns + 1, timeout_s=300.0)

            warm = await warm_embedders(retriever.index_dir)
            try:  # untimed: the JVM's search path compiled before any agent is measured
                await run_prepared(config("warm-up", "bm25_extractive", {}), {**warm, "retriever": retriever})
            finally:
                await close_embedders(warm)
            for label, name, params in plan:
                mock.reset()
                embedders = await warm_embedders(retriever.index_dir)
                try:
                    r = await run_prepared(config(label, name, params), {**embedders, "retriever": retriever})
                except Exception as exc:  # a plugin that cannot even be built is reported, not fatal
                    rows[label] = {"agent": name, "params": params, "error": f"{type(exc).__name__}: {exc}"[:300]}
                    info(f"agent {label}: FAILED to run: {rows[label]['error']}")
                    continue
                finally:
                    stored_hits += embedders["embedder"].stats["stored_hits"]
                    await close_embedders(embedders)
                summary = _summarise(r["run_dir"], mock.stats()["requests"], r["cpu_s"])
                row = {"agent": name, "params": params, **summary, "loadavg": [round(x, 2) for x in os.getloadavg()]}
                rows[label] = row
                info(f"agent {label}: {row['requests_per_turn']} LLM requests/turn, "
                     f"{row['prompt_tokens_per_turn']:.0f}+{row['completion_tokens_per_turn']:.0f} tokens/turn, "
                     f"{row['wall_ms_per_turn']} ms/turn ({row['cpu_ms_per_turn']} ms CPU), errors {row['errors']}")
    finally:
        await retriever.aclose()
    figures: dict[str, Any] = {}
    for label, row in rows.items():
        ok = "error" not in row and row["errors"] == 0
        for key, field in (("llm_calls_per_turn", "requests_per_turn"), ("tokens_per_turn", None),
                           ("wall_ms_per_turn", "wall_ms_per_turn")):
            if "error" in row:
                value = None
            elif field is None:
                value = round(row["prompt_tokens_per_turn"] + row["completion_tokens_per_turn"], 1)
            else:
                value = row[field]
            figures[f"agent_{label}_{key}"] = {**figure(value, None), "ok": ok and value is not None}
        cpu = None if "error" in row else row["cpu_ms_per_turn"]
        fig = figure(cpu, CPU_TARGET_MS.get(label))
        figures[f"agent_cpu_ms_per_turn_{label}"] = {**fig, "ok": fig["ok"] and ok}
    for name in missing:
        figures[f"agent_{name}_wall_ms_per_turn"] = figure(None, None)
    return figures, {"latency_ms": LATENCY_MS, "dialogues": dialogues, "turns": turns, "agents": rows,
                     "stored_vectors_used": stored_hits,
                     "missing": missing, "skipped": SKIP}
