"""Real commands in subprocesses, stopped with real signals at seeded moments (DESIGN §12,
issues 14 and 35), for tests/run/test_interrupt*.py: the process, the trial table, the
checks after a stop, runs chained by resume, and cache folders that share the suite's demo
index or models while the rest starts empty.

The suite's cache is ``$SIMLOOP_CACHE`` (scripts/test sets it and makes the demo index and
MPNet there before the tests start)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from simloop.run import read_manifest, read_transcripts
from simloop.settings import cache_root
from tests.helpers.data import ROOT

__all__ = ["EXIT_DEADLINE_S", "PHASE_TIMEOUT_S", "PHASES", "Trial", "Proc", "recorded", "check_after_stop", "chain",
           "table", "cache_sharing", "leftovers"]

EXIT_DEADLINE_S = 10.0  # the issues' bound on how long a stop may take: a hang guard, not a speed figure
PHASE_TIMEOUT_S = 300.0  # waiting for a phase to begin on a loaded machine

# moment -> the stderr line that opens its phase (``-v`` shows the log lines) and the random
# delay after it
PHASES = {
    "jvm boot": ("preparing: search index", (0.0, 0.8)),
    "embedder load": ("preparing: embedder", (0.0, 0.3)),
    "retrieval": ("ready: dialogues start", (0.3, 3.0)),
    "retrieval, after a line": ("ready: dialogues start", (0.0, 0.5)),  # the delay counts from the new line
    "llm calls": ("ready: dialogues start", (1.0, 6.0)),  # calls take 0.5 s each, a dialogue ~6
    "llm calls, after a line": ("ready: dialogues start", (0.0, 0.5)),  # the delay counts from the new line
    "llm calls, 2x SIGINT": ("ready: dialogues start", (1.0, 4.0)),
    # preparation (issue 35): the notes a first run prints while it waits
    "demo index build": ("building the demo index", (0.0, 3.0)),
    "model unpack": ("unpacking all-mpnet-base-v2", (0.0, 2.0)),
}


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

    def __init__(self, args: list[str], cwd: Path, name: str, env: dict[str, str] | None = None):
        self.out, self.err = cwd / f"{name}.out", cwd / f"{name}.err"
        env = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        with self.out.open("w") as out, self.err.open("w") as err:
            self.p = subprocess.Popen([sys.executable, "-m", "simloop", *args], cwd=cwd, stdout=out, stderr=err,
                                      env=env)  # tests/ on the path: interrupt_plugins

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def wait_until(self, ready, what: str) -> None:
        """Until ``ready()`` is true (polled every 10 ms): the process must still run by then."""
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while not ready():
            if self.p.poll() is not None:
                pytest.fail(f"ended (code {self.p.returncode}) before {what}:\n{self.stderr()[-3000:]}")
            if time.monotonic() > deadline:
                self.p.kill()
                pytest.fail(f"no {what} after {PHASE_TIMEOUT_S:.0f} s:\n{self.stderr()[-3000:]}")
            time.sleep(0.01)

    def wait_for(self, text: str) -> None:
        self.wait_until(lambda: text in self.stderr(), repr(text))

    def wait_for_lines(self, run_dir: Path, more_than: int) -> None:
        """Until the run has recorded more than ``more_than`` dialogues."""
        self.wait_until(lambda: len(recorded(run_dir)) > more_than, "a new line")

    def stop(self, sig: signal.Signals, again: bool = False) -> int | None:
        if self.p.poll() is not None:
            pytest.fail(f"ended (code {self.p.returncode}) before the signal; make it longer:\n"
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


def recorded(run_dir: Path) -> list:
    """The recorded transcripts (none yet: a run stopped before its first line has no file)."""
    return list(read_transcripts(run_dir)) if (run_dir / "dialogues.jsonl").exists() else []


def check_after_stop(run_dir: Path, proc: Proc, trial: Trial, cwd: Path) -> None:
    err = proc.stderr()
    assert trial.exit_code == 130, f"{trial}: {err[-3000:]}"
    assert "Traceback" not in err, err[-3000:]
    assert not list(cwd.glob("hs_err_pid*.log")) and not list(ROOT.glob("hs_err_pid*.log"))
    ts = recorded(run_dir)
    ids = [t.dialogue_id for t in ts]
    trial.recorded, trial.duplicated = len(ids), len(ids) - len(set(ids))
    trial.errors = sum(t.error is not None for t in ts)
    assert trial.errors == 0, [t.error for t in ts if t.error]
    assert trial.duplicated == 0
    if "2x" not in trial.moment:  # a second signal leaves at once, before run.json is closed
        assert read_manifest(run_dir).status == "interrupted"
        assert f"resume with: simloop run --resume {run_dir}" in err


def chain(tmp: Path, start: list[str], plan: list[tuple[str, signal.Signals]], total: int, rng: random.Random,
          env: dict[str, str] | None = None, after_stop=None) -> list[Trial]:
    """Start a run, interrupt it as ``plan`` says (each next trial resumes it), then resume it
    once more, left alone: every dialogue must be there exactly once.  ``after_stop(trial)``
    checks more after each stop (what a preparation step must not leave behind)."""
    run_dir = tmp / "runs" / "r"
    trials = []
    for i, (moment, sig) in enumerate(plan):
        args = start if i == 0 else ["run", "--resume", str(run_dir), "--no-progress"]
        proc = Proc(["-v", *args], tmp, f"trial{i}", env)  # -v: the phase lines on stderr
        marker, (lo, hi) = PHASES[moment]
        proc.wait_for(marker)
        if "after a line" in moment:  # finished lines on disk, others in flight
            proc.wait_for_lines(run_dir, len(recorded(run_dir)))
        time.sleep(rng.uniform(lo, hi))
        trial = Trial(moment, sig.name)
        t0 = time.monotonic()
        trial.exit_code = proc.stop(sig, again="2x" in moment)
        trial.exit_s = time.monotonic() - t0
        trials.append(trial)
        check_after_stop(run_dir, proc, trial, tmp)
        if after_stop is not None:
            after_stop(trial)
    last = Proc(["run", "--resume", str(run_dir), "--no-progress"], tmp, "final", env)
    assert last.p.wait(timeout=PHASE_TIMEOUT_S * 2) == 0, last.stderr()[-3000:]
    ids = [t.dialogue_id for t in read_transcripts(run_dir)]
    assert len(ids) == total and len(set(ids)) == total  # none lost, none twice
    assert all(t.error is None for t in read_transcripts(run_dir))
    assert read_manifest(run_dir).status == "finished"
    return trials


def table(title: str, trials: list[Trial]) -> str:
    rows = [f"{title}", "moment | signal | exit | exit s | lines after | errors | duplicated"]
    rows += [f"{t.moment} | {t.signal} | {t.exit_code} | {t.exit_s:.1f} | {t.recorded} | {t.errors} | {t.duplicated}"
             for t in trials]
    return "\n".join(rows)


def cache_sharing(folder: Path, *parts: str) -> Path:
    """A cache folder at ``folder`` whose ``parts`` (``index``, ``corpus``, ``models``) are
    the suite cache's (links), everything else (the vector cache ...) its own, empty."""
    suite = cache_root()
    folder.mkdir(parents=True)
    for part in parts:
        (suite / part).mkdir(parents=True, exist_ok=True)
        (folder / part).symlink_to(suite / part, target_is_directory=True)
    return folder


def leftovers(folder: Path) -> list[str]:
    """What a stopped preparation step must not leave: scratch folders and temp files under
    ``folder`` (links not followed), and live processes whose command line names it (an
    indexer child)."""
    found = [str(p) for p in folder.rglob("*") if ".build-" in p.name or p.name.endswith(".tmp")]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(folder).encode() in cmdline.read_bytes() and cmdline.parent.name != str(os.getpid()):
                found.append(f"process {cmdline.parent.name}: {cmdline.read_bytes()[:200]!r}")
        except OSError:  # gone meanwhile
            continue
    return found
