"""The Ray backend (DESIGN §9).

Every test that starts Ray runs its payload in a subprocess inside a private network
namespace (``unshare -n``, loopback up), where Ray binds to 127.0.0.1 and nothing can leave
the machine.  The plugins the workers load live in ``tests/helpers/ray_plugins.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from simloop.cli import main
from simloop.config import load_config
from simloop.distributed.driver import plan_shards
from simloop.distributed.worker import RateGate, worker_config
from simloop.llm import LLMConfig, LLMPool, LLMRole
from simloop.llm.limits import Endpoint
from simloop.run.scenarios import iter_scenarios, load_sources
from tests.helpers.data import ROOT

PAYLOAD_TIMEOUT_S = 110  # every Ray test stays well under two minutes


def _netns_works() -> bool:
    if not (shutil.which("unshare") and shutil.which("ip")):
        return False
    try:
        probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _why_ray_cannot_start() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (the `ray` extra: pip install -e '.[ray]')"
    if not _netns_works():
        return "Ray may only start in a private network namespace; `unshare -n` + `ip` unavailable here"
    return None


# Marks the tests that start Ray; the others need neither Ray nor a network namespace.
_NO_RAY = _why_ray_cannot_start()
starts_ray = pytest.mark.skipif(_NO_RAY is not None, reason=_NO_RAY or "")


def _in_netns(argv: list[str], timeout: float = PAYLOAD_TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run ``argv`` in a fresh network namespace with only loopback up; kill it all on timeout."""
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live under it
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *argv]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"payload timed out after {timeout} s:\n{err[-3000:]}")
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _simloop(*args: str) -> list[str]:
    return [sys.executable, "-m", "simloop", "run", *args, "--no-progress"]


def _shell(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def _fake_run_args(out: Path, run_id: str, *extra: str) -> list[str]:
    return ["--personas", str(ROOT / "personas"), "--simulator", "tests.helpers.ray_plugins:ScriptedSimulator",
            "--repeat", "5", "--out", str(out), "--run-id", run_id, *extra]


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "dialogues.jsonl").read_text().splitlines()]


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def _expected_ids(limit: int) -> list[str]:
    cfg = load_config(None, {"scenarios": {"personas_dir": str(ROOT / "personas"), "repeat": 5, "limit": limit}},
                      environ={})
    return [s.dialogue_id for s in iter_scenarios(cfg, load_sources(cfg))]


# ----------------------------------------------------------------------------- with Ray


@starts_ray
def test_ray_run_records_the_same_dialogues_as_local_and_resumes(tmp_path):
    common = ["--assistant", "tests.helpers.ray_plugins:EchoAssistant", "--limit", "200"]
    assert main(["run", *_fake_run_args(tmp_path, "local", *common), "--no-progress"]) == 0
    local = {t["dialogue_id"]: (len(t["turns"]), t["stop"]["reason"]) for t in _lines(tmp_path / "local")}

    # Run on Ray, cut the file back to 50 lines plus a torn one, resume on Ray (the manifest keeps the backend).
    ray_dir = tmp_path / "ray"
    script = (f"cd {shlex.quote(str(tmp_path))} && "
              f"{_shell(_simloop(*_fake_run_args(tmp_path, 'ray', *common, '--backend', 'ray')))} > first.out && "
              "cp ray/dialogues.jsonl full.jsonl && head -n 50 full.jsonl > ray/dialogues.jsonl && "
              "sed -n 51p full.jsonl | head -c 40 >> ray/dialogues.jsonl && "
              f"{_shell(_simloop('--resume', str(ray_dir)))}")
    res = _in_netns(["sh", "-c", script])
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "first.out").read_text().strip().splitlines()[-1] == str(ray_dir)
    assert res.stdout.strip().splitlines()[-1] == str(ray_dir)  # the run directory on the last line
    said = " ".join(res.stderr.split())  # rich wraps long lines
    assert "ended with a torn line" in said and "50 recorded, 150 to go" in said

    first = json.loads("[" + ",".join((tmp_path / "full.jsonl").read_text().splitlines()) + "]")
    assert {t["dialogue_id"] for t in first} == set(local) and len(first) == 200
    ray = {t["dialogue_id"]: (len(t["turns"]), t["stop"]["reason"]) for t in _lines(ray_dir)}
    assert ray == local and len(_lines(ray_dir)) == 200  # after resume: each id once, same outcomes
    m = _manifest(ray_dir)
    assert m["status"] == "finished" and m["counts"]["recorded"] == 200 and m["counts"]["ray_workers"] == 2


@starts_ray
def test_a_killed_worker_has_its_dialogues_rerun_and_each_recorded_once(tmp_path):
    marker = tmp_path / "crashed"
    args = _fake_run_args(tmp_path, "crash", "--limit", "120", "--backend", "ray", "--simulator-param", "delay=0.01",
                          "--assistant", "tests.helpers.ray_plugins:CrashOnce", "--assistant-param", f"marker={marker}",
                          "--assistant-param", "after=40")
    res = _in_netns(_simloop(*args))
    assert res.returncode == 0, res.stderr[-3000:]
    assert marker.exists(), "the fault plugin never fired"
    assert "a worker failed (ActorDiedError" in " ".join(res.stderr.split())
    lines = _lines(tmp_path / "crash")
    ids = [t["dialogue_id"] for t in lines]
    assert Counter(ids) == Counter(_expected_ids(120))  # every id, exactly once
    assert all(t["error"] is None and t["stop"]["reason"] == "user_satisfied" for t in lines)
    m = _manifest(tmp_path / "crash")
    assert m["status"] == "finished" and m["counts"]["worker_failures"] == 1 and m["counts"]["recorded"] == 120


@starts_ray
def test_a_dialogue_that_keeps_killing_workers_is_recorded_as_an_error(tmp_path):
    poison = _expected_ids(30)[7]
    args = _fake_run_args(tmp_path, "poison", "--limit", "30", "--backend", "ray",
                          "--assistant", "tests.helpers.ray_plugins:CrashOn", "--assistant-param", f"dialogue={poison}")
    res = _in_netns(_simloop(*args))
    assert res.returncode == 0, res.stderr[-3000:]
    lines = {t["dialogue_id"]: t for t in _lines(tmp_path / "poison")}
    assert sorted(lines) == sorted(_expected_ids(30)) and len(_lines(tmp_path / "poison")) == 30
    bad = lines.pop(poison)
    assert bad["stop"] == {"reason": "error", "by": "engine", "detail": bad["stop"]["detail"], "utterance": None}
    assert bad["error"]["type"] == "WorkerLost" and bad["error"]["source"] == "engine"
    assert bad["scenario"]["persona_id"] == poison.split("--")[0]
    assert all(t["error"] is None for t in lines.values())
    # Three deaths with it alone at least; innocent neighbours are re-run alone, never blamed to the end.
    assert 3 <= _manifest(tmp_path / "poison")["counts"]["worker_failures"] <= 3 + 2 * 2


_RATE_PAYLOAD = r"""
import json, subprocess, sys, time, httpx
mock = subprocess.Popen([sys.executable, "-m", "simloop", "mock-llm", "--port", "8089"])
try:
    for _ in range(100):
        try:
            httpx.get("http://127.0.0.1:8089/stats", timeout=1.0); break
        except httpx.TransportError:
            time.sleep(0.1)
    run = subprocess.run(sys.argv[2:], timeout=90)
    stats = httpx.get("http://127.0.0.1:8089/stats", timeout=5.0).json()
    json.dump({"rc": run.returncode, "stats": stats}, open(sys.argv[1], "w"))
finally:
    mock.terminate(); mock.wait(timeout=10)
"""


@starts_ray
def test_the_rate_limit_is_shared_by_all_workers(tmp_path):
    (tmp_path / "payload.py").write_text(_RATE_PAYLOAD)
    # 5 requests/s.  Concurrency 2 = one dialogue per worker, 12 dialogues = 3 shards: both
    # workers busy at once, each able to send well over 5/s alone even on a loaded machine
    # (without the gate this measures 2-4x the limit), so the limit, not their speed, binds.
    rpm = 300
    args = _simloop("--personas", str(ROOT / "personas"), "--simulator", "llm", "--simulator-param", "voice=llm",
                    "--simulator-param", "grader=llm", "--assistant", "tests.helpers.ray_plugins:EchoAssistant",
                    "--limit", "12",
                    "--max-turns", "3", "--base-url", "http://127.0.0.1:8089/v1", "--model", "mock-model",
                    "--rpm", str(rpm), "--concurrency", "2", "--no-cache", "--out", str(tmp_path), "--run-id", "rate",
                    "--backend", "ray")
    res = _in_netns([sys.executable, str(tmp_path / "payload.py"), str(tmp_path / "stats.json"), *args])
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads((tmp_path / "stats.json").read_text())
    assert got["rc"] == 0, res.stderr[-3000:]
    stats, per_s = got["stats"], rpm / 60
    busy = [n for n in stats["rps"] if n]
    assert stats["requests"] >= 50 and stats["by_status"] == {"200": stats["requests"]}
    assert max(busy) <= per_s + 1, stats["rps"]  # the limit, plus one smoothing step
    assert stats["peak_rpm"] <= rpm + 1
    assert sorted(busy)[len(busy) // 2] >= per_s - 1, stats["rps"]  # and it was the limit that held them back
    assert all(t["error"] is None for t in _lines(tmp_path / "rate"))


@starts_ray
def test_workers_that_cannot_start_anywhere_fail_the_run_without_blaming_dialogues(tmp_path):
    args = _fake_run_args(tmp_path, "nogpu", "--limit", "20", "--backend", "ray",
                          "--assistant", "tests.helpers.ray_plugins:FailsInWorkers")
    res = _in_netns(_simloop(*args))
    said = " ".join(res.stderr.split())
    assert res.returncode == 1 and "(last: ActorDiedError: RuntimeError: this node has no GPU)" in said
    assert "resume with: simloop run --resume" in said
    assert res.stdout.strip().splitlines()[-1] == str(tmp_path / "nogpu")
    assert not (tmp_path / "nogpu" / "dialogues.jsonl").exists()  # nothing blamed, nothing recorded
    assert _manifest(tmp_path / "nogpu")["status"] == "failed"


@starts_ray
def test_a_wrong_cluster_address_fails_fast_with_one_line(tmp_path):
    res = _in_netns(_simloop(*_fake_run_args(tmp_path, "nowhere", "--assistant",
                                             "tests.helpers.ray_plugins:EchoAssistant", "--limit", "3",
                                             "--backend", "ray", "--address", "127.0.0.1:1")))
    assert res.returncode == 2, res.stderr  # not a ray.init retrying for minutes (PAYLOAD_TIMEOUT_S)
    assert res.stderr.strip().splitlines()[-1].startswith("simloop: error: cannot reach a Ray cluster at 127.0.0.1:1")
    assert _manifest(tmp_path / "nowhere")["status"] == "failed"


# ----------------------------------------------------------------------------- without Ray


def test_shards_cover_every_id_once_in_order_and_share_work_evenly():
    ids = [f"d{i}" for i in range(1003)]
    shards = plan_shards(ids, workers=2, per_worker=4)  # 8x concurrency = 32 long at least
    assert [i for s in shards for i in s] == ids
    assert len(shards) == 30 and {len(s) for s in shards} == {33, 34}
    assert [len(s) for s in plan_shards(ids[:200], workers=2, per_worker=16)] == [100, 100]
    assert [len(s) for s in plan_shards(ids[:5], workers=4, per_worker=8)] == [1, 1, 1, 2]
    assert plan_shards([], workers=2, per_worker=4) == []
    huge = plan_shards([str(i) for i in range(100_000)], 2, 4)
    assert len(huge) == 100 and max(map(len, huge)) == 1000


def test_worker_config_makes_paths_absolute_and_splits_tpm(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, {"scenarios": {"personas_dir": "people"}, "llm": {
        "default": {"tpm": 10_000}, "cache": "c.sqlite", "roles": {"judge": {"tpm": 999}, "simulator": {"rpm": 5}}}},
        environ={})
    w = worker_config(cfg, workers=4)
    assert w.scenarios.personas_dir == tmp_path / "people" and w.llm.cache == tmp_path / "c.sqlite"
    assert w.llm.default.tpm == 2500 and w.llm.roles["judge"].tpm == 249
    assert w.llm.roles["simulator"].settings() == {"rpm": 5}
    assert w.llm.resolve("judge").tpm == 249 and cfg.llm.default.tpm == 10_000  # the original is untouched


def test_rate_gate_spaces_slots_per_endpoint(monkeypatch):
    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # the calls land at one instant, however loaded the machine
    gate = RateGate()
    delays = [gate.reserve("http://a/v1", 600) for _ in range(5)]
    assert delays[0] == 0 and all(abs(b - a - 0.101) < 0.005 for a, b in zip(delays, delays[1:]))
    assert gate.reserve("http://b/v1", 600) == 0  # another endpoint has its own budget


async def test_a_permit_replaces_the_local_throttle_only_where_rpm_is_set(monkeypatch):
    asked: list[tuple[str, float]] = []
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def permit(url: str, rpm: float) -> None:
        asked.append((url, rpm))

    async def sleep(delay: float, *args):  # the local throttle waits by sleeping
        slept.append(delay)
        return await real_sleep(delay, *args)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    local = Endpoint("http://x/v1", rpm=6000, tpm=None)
    await asyncio.gather(*(local.admit(10) for _ in range(2)))
    assert slept  # the control: without a permit, the second request waits its turn
    slept.clear()
    limited = Endpoint("http://a/v1", rpm=60, tpm=None, permit=permit)
    await asyncio.gather(*(limited.admit(10) for _ in range(3)))  # a local throttle would wait 2 s
    assert slept == [] and asked == [("http://a/v1", 60)] * 3
    await Endpoint("http://b/v1", rpm=None, tpm=None, permit=permit).admit(10)
    assert len(asked) == 3  # no rpm: nothing to ask for
    pool = LLMPool(LLMConfig(default=LLMRole(base_url="http://c/v1", rpm=120)), permit=permit)
    await pool.model("simulator")._endpoint.admit(10)
    assert asked[-1] == ("http://c/v1", 120)


def test_importing_the_backend_does_not_import_ray():
    code = ("import sys, simloop.cli, simloop.distributed.driver, simloop.distributed.worker; "
            "print('ray' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "False", res.stderr
