"""Interrupting real runs with real signals (issue 14, DESIGN §12).

The index is the suite's cached demo index (``SIMLOOP_CACHE``, set by scripts/test).
Each trial starts ``simloop run`` in a subprocess (the real demo index, MiniLM, MPNet, the JVM;
for the LLM trials a real ``simloop mock-llm --latency-ms 500`` over HTTP, and genaius over
an in-memory index, since those trials are about HTTP calls, not the JVM) and sends
SIGINT or SIGTERM at a seeded random moment within a phase: while the JVM boots, while
the embedder loads, while dialogues search, in the middle of LLM calls.  Every trial must
end with exit code 130 within 10 s, the run marked ``interrupted`` and the resume command
printed, no dialogue recorded as an error, no duplicate line, and no ``hs_err_pid*.log``.

To keep the suite short the trials of one kind are chained on one run directory: the
first trial starts the run, each next one resumes it and is interrupted in turn, and a
last resume, left alone, must complete the run with every dialogue exactly once.  The
trial table is printed (``-s``) for the closing note of the issue.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from simloop.config import RunConfig
from simloop.run import read_manifest, read_transcripts
from simloop.run.runner import execute, prepare_run
from tests.helpers.data import ROOT

SEED = 14
EXIT_DEADLINE_S = 10.0  # the bound on how long a stop may take, not a speed figure
PHASE_TIMEOUT_S = 300.0  # waiting for a phase to begin on a loaded machine


@dataclass
class Trial:
    moment: str
    signal: str
    exit_code: int | None = None
    exit_s: float = 0.0  # signal to exit, for the table (bounded by EXIT_DEADLINE_S, not judged)
    recorded: int = 0  # lines after this trial
    errors: int = 0
    duplicated: int = 0


class Proc:
    """``simloop ...`` in a subprocess, its output in files (a pipe nobody reads can fill up).
    It runs in the test's folder: a JVM that crashed would leave its hs_err file there."""

    def __init__(self, args: list[str], cwd: Path, name: str):
        self.out, self.err = cwd / f"{name}.out", cwd / f"{name}.err"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "simloop", *args], cwd=cwd, stdout=out, stderr=err,
                                      env=env)  # tests/ on the path: interrupt_plugins

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while text not in self.stderr():
            if self.p.poll() is not None:
                pytest.fail(f"run ended (code {self.p.returncode}) before {text!r}:\n{self.stderr()[-3000:]}")
            if time.monotonic() > deadline:
                self.p.kill()
                pytest.fail(f"no {text!r} after {PHASE_TIMEOUT_S:.0f} s:\n{self.stderr()[-3000:]}")
            time.sleep(0.02)

    def wait_for_lines(self, run_dir: Path, more_than: int) -> None:
        """Until the run has recorded more than ``more_than`` dialogues."""
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while len(_lines(run_dir)) <= more_than:
            if self.p.poll() is not None or time.monotonic() > deadline:
                self.p.kill()
                pytest.fail(f"no new line (code {self.p.returncode}):\n{self.stderr()[-3000:]}")
            time.sleep(0.05)

    def stop(self, sig: signal.Signals, again: bool = False) -> int | None:
        if self.p.poll() is not None:
            pytest.fail(f"run ended (code {self.p.returncode}) before the signal; make it longer:\n"
                        f"{self.stderr()[-2000:]}")
        self.p.send_signal(sig)
        if again:
            time.sleep(0.05)
            self.p.send_signal(sig)
        try:
            return self.p.wait(timeout=EXIT_DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


# moment -> the stderr line (``-v``) that opens its phase and the random delay after it
PHASES = {
    "jvm boot": ("preparing: search index", (0.0, 0.8)),
    "embedder load": ("preparing: embedder", (0.0, 0.3)),
    "retrieval": ("ready: dialogues start", (0.3, 3.0)),
    "retrieval, after a line": ("ready: dialogues start", (0.0, 0.5)),  # the delay counts from the new line
    "llm calls": ("ready: dialogues start", (1.0, 6.0)),  # calls take 0.5 s each, a dialogue ~6
    "llm calls, after a line": ("ready: dialogues start", (0.0, 0.5)),  # the delay counts from the new line
    "llm calls, 2x SIGINT": ("ready: dialogues start", (1.0, 4.0)),
}


def _lines(run_dir: Path) -> list:
    """The recorded transcripts (none yet: a run stopped before its first line has no file)."""
    return list(read_transcripts(run_dir)) if (run_dir / "dialogues.jsonl").exists() else []


def _check_after_stop(run_dir: Path, proc: Proc, trial: Trial, cwd: Path) -> None:
    err = proc.stderr()
    assert trial.exit_code == 130, f"{trial}: {err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    assert not list(cwd.glob("hs_err_pid*.log")) and not list(ROOT.glob("hs_err_pid*.log"))
    ts = _lines(run_dir)
    ids = [t.dialogue_id for t in ts]
    trial.recorded, trial.duplicated = len(ids), len(ids) - len(set(ids))
    trial.errors = sum(t.error is not None for t in ts)
    assert trial.errors == 0, [t.error for t in ts if t.error]
    assert trial.duplicated == 0
    if "2x" not in trial.moment:  # a second signal leaves at once, before run.json is closed
        assert read_manifest(run_dir).status == "interrupted"
        assert f"resume with: simloop run --resume {run_dir}" in err


def _chain(tmp: Path, start: list[str], plan: list[tuple[str, signal.Signals]], total: int,
           rng: random.Random) -> list[Trial]:
    run_dir = tmp / "runs" / "r"
    trials = []
    for i, (moment, sig) in enumerate(plan):
        args = start if i == 0 else ["run", "--resume", str(run_dir), "--no-progress"]
        proc = Proc(["-v", *args], tmp, f"trial{i}")  # -v: the phase lines on stderr
        marker, (lo, hi) = PHASES[moment]
        proc.wait_for(marker)
        if "after a line" in moment:  # finished lines on disk, others in flight
            proc.wait_for_lines(run_dir, len(_lines(run_dir)))
        time.sleep(rng.uniform(lo, hi))
        trial = Trial(moment, sig.name)
        t0 = time.monotonic()
        trial.exit_code = proc.stop(sig, again="2x" in moment)
        trial.exit_s = time.monotonic() - t0
        trials.append(trial)
        _check_after_stop(run_dir, proc, trial, tmp)
    last = Proc(["run", "--resume", str(run_dir), "--no-progress"], tmp, "final")
    assert last.p.wait(timeout=PHASE_TIMEOUT_S * 2) == 0, last.stderr()[-3000:]
    ids = [t.dialogue_id for t in read_transcripts(run_dir)]
    assert len(ids) == total and len(set(ids)) == total  # none lost, none twice
    assert all(t.error is None for t in read_transcripts(run_dir))
    manifest = read_manifest(run_dir)
    assert manifest.status == "finished"
    return trials


def _table(title: str, trials: list[Trial]) -> str:
    rows = [f"{title}", "moment | signal | exit | exit s | lines after | errors | duplicated"]
    rows += [f"{t.moment} | {t.signal} | {t.exit_code} | {t.exit_s:.1f} | {t.recorded} | {t.errors} | {t.duplicated}"
             for t in trials]
    return "\n".join(rows)


# ----------------------------------------------------------------------------- in process
class SlowEcho:
    """The scripted assistant, slow enough that dialogues are in flight when the signal
    comes; it declares an embedder (a fake at the Context seam) to be warmed up."""

    needs = ("embedder",)

    def __init__(self, ctx):
        self.ctx = ctx

    async def respond(self, state):
        from tests.helpers.plugins import EchoAssistant

        await self.ctx.embedder()
        await asyncio.sleep(0.05)
        return await EchoAssistant().respond(state)


class CountingEmbedder:
    def __init__(self):
        self.opened = 0


def _prepared(tmp_path: Path, limit: int = 8):
    cfg = RunConfig.model_validate({
        "out": str(tmp_path), "run_id": "s", "concurrency": 2,
        "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": limit},
        "simulator": {"name": "tests.helpers.plugins:ScriptedSimulator", "params": {"delay": 0.05}},
        "assistant": {"name": "tests.run.test_interrupt:SlowEcho"},
    })
    return prepare_run(cfg, overrides={"embedder": CountingEmbedder()})  # no MiniLM in unit tests


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_stops_the_run_and_records_nothing_in_flight(tmp_path, sig):
    prep = _prepared(tmp_path)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kinds: list[str] = []

    def on_event(ev):
        kinds.append(ev.kind)
        if ev.kind == "ended" and kinds.count("ended") == 2:
            os.kill(os.getpid(), sig)  # handled on the loop, between two steps

    stats = await execute(prep, events=on_event)
    assert stats.interrupted
    assert kinds.index("ready") < kinds.index("started")  # warm-up before the first dialogue
    assert kinds[kinds.index("stopping") + 1:].count("ended") == 0  # nothing recorded after the signal
    ts = list(read_transcripts(prep.run_dir))
    assert len(ts) == kinds.count("ended") == 2 and all(t.error is None for t in ts)
    assert kinds.count("started") > 2  # others were in flight and were dropped
    manifest = read_manifest(prep.run_dir)
    assert manifest.status == "interrupted" and manifest.counts["recorded"] == 2
    assert {s: signal.getsignal(s) for s in before} == before  # the host's handlers are back


async def test_warm_up_opens_what_plugins_need_before_the_first_dialogue(tmp_path):
    from simloop.run.runner import warm_up

    prep = _prepared(tmp_path, limit=1)
    opened = []
    prep.ctx._cache.clear()

    async def fake_embedder():  # the Context seam: what ``ctx.embedder()`` would load
        opened.append("embedder")
        return CountingEmbedder()

    prep.ctx.embedder = fake_embedder
    events = []
    assert await warm_up(prep, events.append) == ["embedder"]
    assert opened == ["embedder"]
    assert [(e.kind, e.detail) for e in events] == [("preparing", "embedder (MiniLM)")]
    prep.recorder.close()


_STUBBORN = """
import asyncio, sys
from simloop.run.interrupt import Interrupt, at_hard_exit

async def stubborn():  # work that does not stop when cancelled (a stuck close, say)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            print("cancelled", flush=True)

async def main():
    task = asyncio.create_task(stubborn())
    at_hard_exit(lambda: print("terminal restored", flush=True))
    with Interrupt(task):
        print("ready", flush=True)
        await task

asyncio.run(main())
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_exits_at_once_even_when_the_work_does_not_stop(tmp_path, sig):
    with subprocess.Popen([sys.executable, "-c", _STUBBORN], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(sig)
        assert p.stdout.readline().strip() == "cancelled"  # the first signal only cancels
        p.send_signal(sig)
        out, err = p.communicate(timeout=EXIT_DEADLINE_S)
    assert p.returncode == 130
    assert "terminal restored" in out and f"{sig.name} again: exiting now" in err and "Traceback" not in err


# ----------------------------------------------------------------------------- subprocesses
# Each chain is several runs, each booting Java and loading MiniLM and MPNet: allow for a loaded machine.
@pytest.mark.timeout(900)
@pytest.mark.slow
def test_offline_run_interrupted_during_boot_load_and_retrieval(tmp_path):
    rng = random.Random(SEED)
    total = 6
    start = ["run", "--personas", str(ROOT / "personas"), "--limit", str(total), "--concurrency", "2",
             "--max-turns", "2", "--out", str(tmp_path / "runs"),
             "--run-id", "r", "--no-progress"]
    # Each signal in each phase; a trial after the JVM boot costs a whole boot (~13 s of CPU),
    # so the retrieval phase has one per signal (SIGTERM once a line is on disk).
    plan = [("jvm boot", signal.SIGINT), ("jvm boot", signal.SIGTERM), ("embedder load", signal.SIGINT),
            ("retrieval", signal.SIGINT), ("retrieval, after a line", signal.SIGTERM)]
    trials = _chain(tmp_path, start, plan, total, rng)
    print("\n" + _table("offline simulator + bm25_extractive", trials))


@pytest.fixture
def slow_llm(tmp_path):
    cmd = [sys.executable, "-m", "simloop", "mock-llm", "--port", "0", "--latency-ms", "500"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=tmp_path) as proc:
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("mock-llm listening on "), line
            yield line.rsplit(" ", 1)[1]
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_llm_run_interrupted_in_the_middle_of_llm_calls(tmp_path, slow_llm):
    # genaius over an in-memory index (tests/helpers/interrupt_plugins.py): no JVM to boot in each run;
    # a signal while the JVM boots is the offline chain's (both signals, the real stack), so
    # this chain no longer starts with one.
    rng = random.Random(SEED + 1)
    total = 8
    start = ["run", "--personas", str(ROOT / "personas"), "--simulator", "llm",
             "--assistant", "tests.helpers.interrupt_plugins:GenAIusInMemory", "--base-url", slow_llm,
             "--model", "mock-model",
             "--limit", str(total), "--concurrency", "4", "--max-turns", "3", "--out", str(tmp_path / "runs"),
             "--run-id", "r", "--no-progress"]
    plan = [("llm calls", signal.SIGINT), ("llm calls", signal.SIGTERM), ("llm calls, after a line", signal.SIGINT),
            ("llm calls, 2x SIGINT", signal.SIGINT)]
    trials = _chain(tmp_path, start, plan, total, rng)
    print("\n" + _table("llm simulator + genaius (in-memory index), mock-llm --latency-ms 500", trials))
