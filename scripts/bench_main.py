"""``scripts/bench``: measure the engine against its limits; write bench/results.{json,md}.

Each benchmark runs in its own child process (``--run-one NAME``): a JVM, a warmed
client or 10,000 parked dialogues from one never skew the next, and a hung one is
killed at its time limit.  ``results.json`` holds ``{figure: {"value", "target", "ok"}}``
only (a fixed format); everything measured on the way goes to
``details.json`` and into the markdown table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This checkout's simloop, whatever the venv's editable install points at, then the bench modules.
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from bench_common import ROOT, info, machine  # noqa: E402

# name -> (module, time limit in seconds for the full / quick run)
BENCHES: dict[str, tuple[str, int, int]] = {
    "engine_overhead": ("bench_overhead", 300, 90),
    "concurrency": ("bench_concurrency", 1200, 900),
    "rate_limit": ("bench_ratelimit", 240, 90),
    "retrieval": ("bench_retrieval", 420, 300),
    "memory": ("bench_footprint", 300, 120),
    "agents": ("bench_agents", 900, 420),
    "offline": ("bench_offline", 1500, 900),
    "ptkb": ("bench_ptkb", 600, 400),  # all-mpnet-base-v2 over ~400 turns: ~2 min on 2 shared cores
    "answers": ("bench_answers", 1200, 400),
    "memorytest": ("bench_memorytest", 1200, 400),
    # The grader on real iKAT answers (MiniLM over ~3,300 candidates, then five
    # end-to-end runs against the demo personas) and the voice against real iKAT utterances;
    # the evidence kinds add ~9,000 evidence candidates (two reference modes).
    "grader": ("bench_grader", 3600, 1800),
    "realism": ("bench_realism", 1800, 600),  # the demo, then iKAT personas of three topic files
    # A fresh clone to the finished demo (venv set up, index built, 41 dialogues),
    # then the demo again; ~2 GB of venv and cache in a temporary folder, removed after.
    "demo": ("bench_demo", 1500, 900),
    # Every LLM role against SmolLM2-135M on llama-cpp-python's server (simloop
    # llm-server), then a concurrency-4 run for the server's busy share; ~1 s per short call.
    "real-llm": ("bench_real_llm", 3600, 2400),
}


def _run_one(name: str, quick: bool, out: Path, out_dir: Path) -> int:
    from simloop.loop import run as run_loop
    from simloop.search import prepare_environment

    prepare_environment()  # at process start, before any thread (see search/jvm.py)
    module = importlib.import_module(BENCHES[name][0])
    figures, details = run_loop(module.run(quick, out_dir))  # the loop simloop's commands run on
    out.write_text(json.dumps({"figures": figures, "details": details}, indent=1, default=str))
    return 0


def _child(name: str, quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    _, full_s, quick_s = BENCHES[name]
    limit = quick_s if quick else full_s
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = Path(fh.name)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run-one", name, "--json", str(out), "--out", str(out_dir)]
    if quick:
        cmd.append("--quick")
    t0 = time.perf_counter()
    # Its own process group, so that a hung benchmark is ended with the mock it started.
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True)
    rc: int | None = None
    try:
        rc = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        _end_group(proc)
    except BaseException:  # Ctrl-C: the child is in another session and did not get it
        _end_group(proc)
        raise
    try:
        data = json.loads(out.read_text()) if rc == 0 else None
    except ValueError:
        data = None
    finally:
        out.unlink(missing_ok=True)
    took = round(time.perf_counter() - t0, 1)
    if data is None:
        why = f"timed out after {limit}s" if rc is None else f"exit code {rc}"
        info(f"{name}: FAILED ({why})")
        return {f"{name}_completed": {"value": 0, "target": 1, "ok": False}}, {"error": why, "took_s": took}
    data["details"]["took_s"] = took
    info(f"{name}: done in {took}s")
    return data["figures"], data["details"]


def _end_group(proc: subprocess.Popen) -> None:
    """Stop our child's process group (the child and the mock it started), by its id."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller N, shorter windows (a smoke run)")
    p.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHES)}")
    p.add_argument("--out", type=Path, default=ROOT / "bench", help="folder for results.json / results.md")
    p.add_argument("--run-one", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.out = a.out.resolve()  # children run from the repository root
    if a.run_one:
        return _run_one(a.run_one, a.quick, a.json, a.out)
    names = [n.strip() for n in a.only.split(",") if n.strip()] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"scripts/bench: unknown benchmark {unknown[0]!r}; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    a.out.mkdir(parents=True, exist_ok=True)
    results_path, details_path = a.out / "results.json", a.out / "details.json"
    # --only refreshes some figures and keeps the rest from the last run.
    results = _load(results_path) if a.only else {}
    details = _load(details_path) if a.only else {}
    details["machine"] = machine()
    details["quick"] = a.quick
    for name in names:
        info(f"{name}: running{' (quick)' if a.quick else ''}")
        figures, det = _child(name, a.quick, a.out)
        results.pop(f"{name}_completed", None)  # a failure marker from an earlier --only run
        for key in details.get("figure_keys", {}).get(name, []):
            results.pop(key, None)  # the section's last figures: a renamed or dropped one must not linger
        results.update(figures)
        details.setdefault("benches", {})[name] = det
        details.setdefault("figure_keys", {})[name] = sorted(figures)
    details["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    results_path.write_text(json.dumps(results, indent=2) + "\n")
    details_path.write_text(json.dumps(details, indent=1, default=str) + "\n")
    from bench_report import write_markdown

    write_markdown(a.out / "results.md", results, details)
    bad = [k for k, v in results.items() if not v.get("ok")]
    info(f"wrote {results_path} and {a.out / 'results.md'}; targets missed: {', '.join(bad) or 'none'}")
    return 0


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
