"""Section ``demo``: how long a newcomer waits for the demo.

- ``demo_fresh_clone_s``: ``git clone`` of this checkout (its committed HEAD) into a new
  temporary folder, then ``./scripts/demo`` there with an empty ``SIMLOOP_CACHE``: the
  ``.venv`` set up by the demo itself (pip installs from its usual sources: the record says
  which, and how big pip's cache was), the demo index built, every demo dialogue run (41;
  ``--quick``: 4), embedding what they retrieve as they go.  Target: 300 s on a quiet
  2-core machine; the load average before and after is recorded, as it moves the figure.
- ``demo_second_run_s``: ``./scripts/demo`` again in the same clone: venv, index, unpacked
  model and vector cache all there.

Also recorded: when each line of the demo's stderr arrived (setup done, the index build,
the MPNet unpack), the dialogues' own wall time, the vector cache's size, whether the two
runs' transcripts say the same things (answers, grades, passages, PTKB rankings: they
must), and the cost of a vector cache lookup (a batch of 64 texts, hits and misses mixed,
as a turn's encode asks for them).  The clone, its venv and its cache are removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_common import ROOT, figure, info, percentile

TARGET_FRESH_S = 300.0
_DIALOGUES_FULL, _DIALOGUES_QUICK = None, 4  # None: every persona x topic of personas/


def _clean_env(cache: Path) -> dict[str, str]:
    """The environment a newcomer's shell would have: no venv of ours on PATH, no SIMLOOP_*
    setting of this bench, the new empty cache."""
    venv_bin = str(ROOT / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SIMLOOP_") and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["SIMLOOP_CACHE"] = str(cache)
    return env


def _timed_demo(clone: Path, env: dict[str, str], args: list[str], log: Path) -> dict[str, Any]:
    """``./scripts/demo ARGS`` in ``clone``: wall seconds, exit code, each stderr line with the
    second it arrived, stdout (kept in ``log``)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(clone / "scripts" / "demo"), *args], cwd=clone, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[tuple[float, str]] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((round(time.perf_counter() - t0, 1), line.rstrip()))

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()  # not communicate(): it would read stderr too, against the thread
    proc.wait()
    reader.join(10)
    wall = round(time.perf_counter() - t0, 1)
    log.write_text(stdout + "\n--- stderr (second: line)\n" + "\n".join(f"{t}: {ln}" for t, ln in lines))
    return {"wall_s": wall, "exit_code": proc.returncode, "stderr_lines": lines[:40],
            "dialogues_wall_s": _dialogues_wall(lines), "run_dir": _run_dir(clone, stdout)}


def _dialogues_wall(lines: list[tuple[float, str]]) -> float | None:
    """The run table's wall time (the demo shows the table on stderr too)."""
    for _, line in lines:
        parts = line.split()
        if parts[:2] == ["wall", "time"] and len(parts) >= 3:
            return float(parts[2])
    return None


def _run_dir(clone: Path, stdout: str) -> str | None:
    for line in stdout.splitlines():
        if line.startswith("transcripts: "):
            return str(clone / Path(line.split()[1]).parent)
    return None


def _answers(run_dir: str | None) -> dict[str, Any]:
    """Per dialogue (persona/topic): each turn's utterance, grade, response, passages, PTKB
    ranking, and the stop: what must not change with the vector cache's state."""
    if run_dir is None:
        return {}
    out = {}
    for line in (Path(run_dir) / "dialogues.jsonl").read_text().splitlines():
        t = json.loads(line)
        out[f"{t['scenario']['persona_id']}/{t['scenario']['topic_id']}"] = [
            [(x["user"]["utterance"], x["user"]["grade"], x["assistant"]["response"],
              [(p["docid"], p["used"]) for p in x["assistant"]["passages"]],
              [(p["statement"], p["score"], p["used"]) for p in x["assistant"]["ptkb_provenance"]])
             for x in t["turns"]], t["stop"]]
    return out


def _lookups(cache_dir: Path, run_dir: str | None) -> dict[str, Any]:
    """Vector cache lookups as the embedder's worker makes them: batches of 64 texts, half
    of them stored (the run's utterances and responses' sentences), half never seen."""
    from simloop.search import vector_cache
    from simloop.text import sentences

    texts: list[str] = []
    for line in (Path(run_dir) / "dialogues.jsonl").read_text().splitlines() if run_dir else []:
        for turn in json.loads(line)["turns"]:
            texts += [turn["user"]["utterance"], *sentences(turn["assistant"]["response"])]
    cache = vector_cache("minilm", cache_dir)
    try:
        known = [t for t, v in zip(texts, cache.lookup(texts)) if v is not None][:2000]
        if not known:
            return {"error": "no stored text found to look up"}
        batches = [[*known[i:i + 32], *(f"never seen {i} {j}" for j in range(32))] for i in range(0, len(known), 32)]
        took = []
        for batch in batches * 3:
            t0 = time.perf_counter()
            cache.lookup(batch)
            took.append((time.perf_counter() - t0) * 1000)
        return {"batches": len(took), "batch_texts": 64, "p50_ms": round(percentile(took, 50), 3),
                "p95_ms": round(percentile(took, 95), 3), "rows": _rows(cache.path),
                "size_mb": round(cache.size_bytes() / 2**20, 1)}
    finally:
        cache.close()


def _rows(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])


def _pip_sources() -> dict[str, Any]:
    """Where pip installs from here, and how warm its cache is (the setup's share of the figure)."""
    cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip"))
    size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) if cache.is_dir() else 0
    config = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    return {"pip_cache_mb": round(size / 2**20), "pip_config": config.strip().splitlines(),
            "find_links": os.environ.get("PIP_FIND_LINKS")}


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    args = ["--limit", str(_DIALOGUES_QUICK)] if quick else []
    details: dict[str, Any] = {"commit": head, "uncommitted_changes_not_measured": dirty, "demo_args": args,
                               **_pip_sources()}
    tmp = Path(tempfile.mkdtemp(prefix="simloop-bench-demo-"))
    first: dict[str, Any] = {"exit_code": None, "wall_s": None}
    second: dict[str, Any] = dict(first)
    try:
        clone, cache = tmp / "simloop", tmp / "cache"
        env = _clean_env(cache)
        details["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        t0 = time.perf_counter()
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, env=env)
        details["clone_s"] = round(time.perf_counter() - t0, 1)
        first = _timed_demo(clone, env, args, out_dir / "demo-first.log")
        first["demo_s"], first["wall_s"] = first["wall_s"], round(time.perf_counter() - t0, 1)  # with the clone
        details["loadavg_after_first"] = [round(x, 2) for x in os.getloadavg()]
        info(f"demo: fresh clone to finished demo in {first['wall_s']} s (exit {first['exit_code']}), "
             f"load {details['loadavg_before']} -> {details['loadavg_after_first']}")
        second = _timed_demo(clone, env, args, out_dir / "demo-second.log")
        details["loadavg_after_second"] = [round(x, 2) for x in os.getloadavg()]
        info(f"demo: second run in {second['wall_s']} s (exit {second['exit_code']})")
        a, b = _answers(first["run_dir"]), _answers(second["run_dir"])
        details.update(first=first, second=second, dialogues=len(a), same_answers=bool(a) and a == b,
                       lookups=_lookups(cache, first["run_dir"]))
        info(f"demo: {len(a)} dialogues, same answers with an empty and a full vector cache: "
             f"{details['same_answers']}; lookups {details['lookups']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = first["exit_code"] == 0 and second["exit_code"] == 0 and details.get("same_answers", False)
    figures = {"demo_fresh_clone_s": figure(first["wall_s"] if ok else None, TARGET_FRESH_S),
               "demo_second_run_s": figure(second["wall_s"] if ok else None, None)}
    return figures, details


if __name__ == "__main__":
    import asyncio

    sys.path[:0] = [str(ROOT)]
    quick = "--quick" in sys.argv
    out = Path(tempfile.mkdtemp(prefix="simloop-bench-demo-logs-"))
    print(json.dumps(asyncio.run(run(quick, out)), indent=1, default=str))
    print(f"logs in {out}", file=sys.stderr)
