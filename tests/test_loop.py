"""The event loop under simloop's commands (simloop/loop.py): uvloop unless
SIMLOOP_EVENT_LOOP asks for asyncio's, a bad value refused before anything is written, and
the loop a run actually ran on, seen from inside a plugin of a real CLI run."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest

import simloop.loop as loop_module
from simloop.errors import ConfigError
from simloop.loop import loop_name, run, running_loop_name
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT
from tests.helpers.plugins import EchoAssistant

ENV = "SIMLOOP_EVENT_LOOP"  # the variable settings.event_loop reads


class LoopEcho(EchoAssistant):
    """Echoes, and says which loop it was called on (read back from the transcript)."""

    async def respond(self, state):
        reply = await super().respond(state)
        return reply.model_copy(update={"response": f"loop={running_loop_name()}"})


async def _which() -> str:
    return running_loop_name()


def test_uvloop_by_default_asyncio_when_asked(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert loop_name() == "uvloop" and run(_which()) == "uvloop"
    monkeypatch.setenv(ENV, " AsyncIO ")
    assert loop_name() == "asyncio" and run(_which()) == "asyncio"
    assert run(_which(), loop="uvloop") == "uvloop"  # an explicit choice beats the variable


def test_a_bad_value_is_refused_and_the_coroutine_is_not_left_unawaited(monkeypatch):
    monkeypatch.setenv(ENV, "trio")
    coro = _which()
    with pytest.raises(ConfigError, match=f"{ENV}='trio': expected one of uvloop, asyncio"):
        run(coro)
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


def _cli_run(tmp_path: Path, run_id: str, loop: str | None):
    env = {k: v for k, v in os.environ.items() if k != ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if loop is not None:
        env[ENV] = loop
    return simloop_cli("run", "--simulator", "tests.helpers.resume_plugins:ScriptedSimulator",
                       "--assistant", "tests.test_loop:LoopEcho", "--persona", "aroha", "--out", tmp_path,
                       "--run-id", run_id, "--no-progress", env=env)


@pytest.mark.parametrize("loop", [None, "asyncio"])
def test_a_cli_run_runs_on_the_loop_it_records(tmp_path, loop):
    expected = loop or "uvloop"
    p = _cli_run(tmp_path, "r", loop)
    assert p.returncode == 0, p.stderr
    answers = {t["assistant"]["response"] for line in (tmp_path / "r" / "dialogues.jsonl").read_text().splitlines()
               for t in json.loads(line)["turns"] if t.get("assistant")}
    assert answers == {f"loop={expected}"}
    assert json.loads((tmp_path / "r" / "run.json").read_text())["versions"]["event_loop"] == expected


def test_a_bad_loop_variable_is_one_line_exit_2_and_writes_nothing(tmp_path):
    p = _cli_run(tmp_path, "bad", "tokio")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines() == [f"simloop: error: {ENV}='tokio': expected one of uvloop, asyncio"]
    assert list(tmp_path.iterdir()) == []


class _ClosingInterrupted:
    """asyncio.Runner whose close is hit by Ctrl-C, as uvloop's is when the second signal
    lands while it tears the loop down: the loop is left "running", and closing it then
    raises RuntimeError over the KeyboardInterrupt."""

    def __init__(self, loop_factory=None):
        pass

    def __enter__(self):
        return self

    def run(self, main):
        main.close()
        return "ran"

    def __exit__(self, *exc):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Cannot close a running event loop")  # noqa: B904 (as asyncio raises it: context, no cause)


async def _nothing():
    return None


def test_ctrl_c_while_the_loop_closes_is_an_interrupt_not_a_runtime_error(monkeypatch):
    monkeypatch.setattr(loop_module.asyncio, "Runner", _ClosingInterrupted)
    with pytest.raises(KeyboardInterrupt):
        loop_module.run(_nothing(), loop="asyncio")


def test_other_runtime_errors_of_the_loop_still_raise(monkeypatch):
    class Broken(_ClosingInterrupted):
        def __exit__(self, *exc):
            raise RuntimeError("something else")

    monkeypatch.setattr(loop_module.asyncio, "Runner", Broken)
    with pytest.raises(RuntimeError, match="something else"):
        loop_module.run(_nothing(), loop="asyncio")
