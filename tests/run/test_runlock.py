"""One process writes a run at a time (simloop/run/runlock.py): a `--resume` of a run another
process holds is refused with exit 2 and one line, writing nothing; a lock left by a process
that died never blocks a later resume.  The holder is this test process or a child we start
and kill, so nothing depends on timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simloop.errors import ResumeError
from simloop.run import Recorder
from simloop.run.runlock import LOCK_FILE, RunLock
from tests.helpers.data import ROOT
from tests.helpers.resume_plugins import ASSISTANT, SIM, resume_cli
from tests.helpers.runs import bare_manifest, lines_of


def _killed_run(tmp_path: Path) -> tuple[Path, int]:
    """A run through the real CLI, then its last line dropped as if it had been killed
    mid-run: a resume has a dialogue to re-run."""
    p = resume_cli("run", "--simulator", SIM, "--assistant", ASSISTANT, "--persona", "aroha", "--out", tmp_path,
                   "--run-id", "r", "--no-progress")
    assert p.returncode == 0, p.stderr
    run_dir = tmp_path / "r"
    text = (run_dir / "dialogues.jsonl").read_text().splitlines(keepends=True)
    assert len(text) >= 2
    (run_dir / "dialogues.jsonl").write_text("".join(text[:-1]))
    return run_dir, len(text)


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run_dir.iterdir() if p.name != LOCK_FILE}


def _assert_resumes_whole(run_dir: Path, n: int) -> None:
    p = resume_cli("run", "--resume", run_dir, "--no-progress")
    assert p.returncode == 0, p.stderr
    assert f"resuming {run_dir}: {n - 1} recorded, 1 to go" in p.stderr
    ids = [r["dialogue_id"] for r in lines_of(run_dir)]
    assert len(ids) == n == len(set(ids))
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["status"] == "finished" and manifest["counts"]["dialogues"] == n


def test_resume_of_a_run_in_use_is_refused_and_writes_nothing(tmp_path):
    run_dir, n = _killed_run(tmp_path)
    before = _snapshot(run_dir)
    lock = RunLock.take(run_dir)  # this process is "the run still going"
    try:
        p = resume_cli("run", "--resume", run_dir, "--no-progress")
        assert p.returncode == 2, p.stderr
        assert p.stderr.strip() == (f"simloop: error: run {run_dir} is in use by another simloop process "
                                    f"(pid {os.getpid()}); wait for it to end or stop it, then resume")
        assert "Traceback" not in p.stderr and p.stdout == ""
        assert _snapshot(run_dir) == before  # not a byte written: run.json still as it was
    finally:
        lock.release()
    _assert_resumes_whole(run_dir, n)  # the lock file stays behind and blocks nothing


def test_a_lock_left_by_a_killed_process_does_not_block_resume(tmp_path):
    run_dir, n = _killed_run(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from simloop.run.runlock import RunLock; "
                               "lock = RunLock.take(sys.argv[1]); print('locked', flush=True); time.sleep(120)",
         str(run_dir)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ResumeError, match=f"in use by another simloop process \\(pid {holder.pid}\\)"):
            Recorder.resume(run_dir, json.loads((run_dir / "run.json").read_text())["config_hash"])
        holder.send_signal(signal.SIGKILL)  # dies holding the lock: no clean-up runs
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        holder.stdout.close()
    assert (run_dir / LOCK_FILE).read_text().strip() == str(holder.pid)  # stale, and harmless
    _assert_resumes_whole(run_dir, n)


def test_one_recorder_per_run_until_it_closes(tmp_path):
    rec = Recorder.create(tmp_path, bare_manifest())
    with pytest.raises(ResumeError, match=f"in use by another simloop process \\(pid {os.getpid()}\\)"):
        Recorder.resume(tmp_path / "r1", "h1")  # a lock belongs to an open file: this process too
    rec.finish("interrupted", {})  # finishing lets the run go
    rec2, done, _ = Recorder.resume(tmp_path / "r1", "h1")
    assert done == set() and json.loads((tmp_path / "r1" / "run.json").read_text())["status"] == "running"
    rec2.close()


def test_a_new_run_may_use_a_folder_holding_only_a_stale_lock(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / LOCK_FILE).write_text("12345\n")  # a crash before run.json was written
    rec = Recorder.create(tmp_path, bare_manifest())
    assert (tmp_path / "r1" / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    with pytest.raises(ResumeError, match="already exists"):
        Recorder.create(tmp_path, bare_manifest())  # a second new run with this id: refused, as before
    rec.close()

