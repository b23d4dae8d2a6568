"""Preparation steps (issue 35): a lock held by another process is named with its pid and
what it does, and the wait stops on request; a coroutine that waits for a step and is
cancelled stops the step and lets it clean up before it goes on."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from simloop.search.steps import STOP_GRACE_S, Step, Stopped, held_lock, lock_holder, off_loop
from tests.helpers.data import ROOT

_HOLDER = """
import sys, time
from pathlib import Path
from simloop.search.steps import Step, held_lock
with held_lock(Path(sys.argv[1]), "building the demo index", Step()):
    print("held", flush=True)
    time.sleep(120)
"""


class Notes:
    def __init__(self):
        self.said: list[str] = []
        self.heard = threading.Event()

    def phase(self, label: str, total: int | None = None) -> None:
        self.said.append(label)
        self.heard.set()

    def advance(self, n: int = 1) -> None:
        pass


def test_a_lock_held_by_another_process_is_named_with_its_pid_and_the_wait_stops(tmp_path: Path):
    lock = tmp_path / ".wiki.lock"
    with subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], cwd=ROOT, stdout=subprocess.PIPE,
                          text=True) as holder:
        try:
            assert holder.stdout.readline().strip() == "held"
            assert lock_holder(lock).pid == holder.pid
            notes = Notes()
            step = Step(notes)
            failed: list[BaseException] = []

            def wait() -> None:
                try:
                    with held_lock(lock, "building it too", step, note_after=0.2):
                        pass
                except BaseException as exc:  # what the waiting thread ended with
                    failed.append(exc)

            waiter = threading.Thread(target=wait)
            waiter.start()
            assert notes.heard.wait(30)
            step.stop.set()
            waiter.join(30)
            assert not waiter.is_alive() and len(failed) == 1 and isinstance(failed[0], Stopped)
            assert notes.said == [f"waiting for process {holder.pid}, which is building the demo index (lock {lock})"]
        finally:
            holder.kill()
    quiet = Notes()
    with held_lock(lock, "building the demo index", Step(quiet), note_after=0.0):  # the holder died: free at once
        assert lock_holder(lock).pid != holder.pid
    assert quiet.said == [] and lock_holder(lock) is None  # the side file goes with the lock


async def test_a_cancelled_wait_stops_its_step_and_lets_it_clean_up(tmp_path: Path):
    scratch = tmp_path / "scratch"
    started = threading.Event()

    def build(step: Step) -> str:
        scratch.mkdir()
        try:
            started.set()
            while True:
                step.sleep(0.05)  # a long job, looking at its stop flag between chunks
        finally:
            scratch.rmdir()

    task = asyncio.ensure_future(off_loop(build))
    assert await asyncio.to_thread(started.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, STOP_GRACE_S + 5)
    assert not scratch.exists()  # cleaned up before the cancellation went on


async def test_a_step_stopped_by_its_own_signal_reads_as_a_cancellation():
    def stopped(step: Step) -> None:  # as when the indexer child dies of the terminal's Ctrl-C
        raise Stopped("the indexer ended on signal 2")

    with pytest.raises(asyncio.CancelledError):
        await off_loop(stopped)
    assert await off_loop(lambda step: "done") == "done"
