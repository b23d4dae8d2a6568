"""`simloop memory` interrupted (SIGINT or SIGTERM) in its second strategy: the strategy that
did not finish, and those after it, are left out of memory.json and the table (they were
reported as recall 0 over probes they never ran); the real engine on fake seams."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from simloop.cli import build_parser
from simloop.fakes.seams import HashEmbedder, MemoryRetriever
from simloop.memorytest.formats import MemoryResults
from simloop.memorytest.run import MEMORY_FILE, MemoryTest, parse_config
from simloop.run import read_manifest
from tests.helpers.data import ROOT
from tests.helpers.memorytest import DOCS, base_config, memory_config


def _fakes() -> dict:
    fake = HashEmbedder()
    return {"retriever": MemoryRetriever(DOCS), "embedder": fake, "embedder:mpnet": fake}


def _signal_in(strategy: str, sig: int, on_event=None):
    """An on_event that sends ``sig`` to this process when ``strategy``'s first turn ends
    (handled on the loop by the run's Interrupt, as a Ctrl-C or `kill` would be)."""
    sent: list[int] = []

    def hook(name: str, ev) -> None:
        if name == strategy and ev.kind == "turn" and not sent:
            sent.append(sig)
            os.kill(os.getpid(), sig)
        if on_event is not None:
            on_event(name, ev)

    return hook


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_an_interrupted_strategy_is_left_out_of_memory_json(tmp_path: Path, sig: int):
    # window finishes, full is interrupted after one turn: memory.json must not report full
    # as recall 0 over probes it never ran (it did: "dialogues: 0, unanswered: 2").
    cfg = parse_config(memory_config(strategies=["window", "full", "adaptive"]))
    test = MemoryTest(cfg, base_config(tmp_path), overrides=_fakes())
    memory = await test.run(_signal_in("full", sig))
    run_dir = tmp_path / "m"
    assert memory.status == "interrupted"
    assert list(memory.strategies) == ["window"] and {p.strategy for p in memory.probes} == {"window"}
    assert memory.strategies["window"].dialogues == 2 and len(memory.probes) == 2
    assert MemoryResults.model_validate_json((run_dir / MEMORY_FILE).read_text()) == memory
    assert [s.name for s in test.strategies if not s.finished] == ["full", "adaptive"]
    assert read_manifest(run_dir / "m-full").status == "interrupted"  # its run directory says so
    assert not (run_dir / "m-adaptive").exists()  # never started
    assert read_manifest(run_dir).status == "interrupted"


def test_cli_interrupted_memory_prints_only_finished_strategies(tmp_path: Path, capsys, monkeypatch):
    import simloop.memorytest as memorytest_run  # the face the CLI looks it up through

    class Faked(MemoryTest):  # the CLI's test, on the fake seams and stopped in its second strategy
        def __init__(self, cfg, base=None, overrides=None):
            super().__init__(cfg, base, overrides=_fakes())

        async def run(self, on_event=None):
            return await super().run(_signal_in("full", signal.SIGTERM, on_event))

    monkeypatch.setattr(memorytest_run, "MemoryTest", Faked)
    args = build_parser().parse_args([
        "memory", "--personas", str(ROOT / "personas"), "--persona", "maya", "--facts", "allergy-peanut",
        "--distances", "1,3", "--strategies", "window,full", "--out", str(tmp_path), "--run-id", "m", "--no-progress"])
    code = args.func(args)  # not main(): on 130 it leaves the process at once (os._exit)
    out, err = capsys.readouterr()
    assert code == 130
    assert "window" in out and "full" not in out.replace(str(tmp_path), "")  # the table: window only
    assert err.strip().splitlines()[-1] == ("interrupted: memory.json covers the strategies that finished "
                                            "(window); left out: full")
    assert list(json.loads((tmp_path / "m" / MEMORY_FILE).read_text())["strategies"]) == ["window"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, asyncio.CancelledError])
async def test_a_signal_between_strategies_records_interrupted(tmp_path: Path, monkeypatch, stop: type):
    # A Ctrl-C while no sub-run's handler is installed (here: as the second strategy starts)
    # reaches MemoryTest.run as KeyboardInterrupt, or as CancelledError when asyncio.Runner's
    # own handler cancels the main task.  run.json said "failed"; the run was stopped.
    started: list[str] = []
    original = MemoryTest._run_strategy

    async def run_strategy(self, s, overrides, on_event):
        started.append(s.name)
        if len(started) == 2:
            raise stop()
        return await original(self, s, overrides, on_event)

    monkeypatch.setattr(MemoryTest, "_run_strategy", run_strategy)
    test = MemoryTest(parse_config(memory_config(strategies=["window", "full"])), base_config(tmp_path),
                      overrides=_fakes())
    with pytest.raises(stop):
        await test.run()
    assert started == ["window", "full"]
    assert read_manifest(tmp_path / "m").status == "interrupted"
    assert not (tmp_path / "m" / MEMORY_FILE).exists()  # nothing scored, nothing half-written


async def test_a_memory_test_may_use_a_folder_holding_only_a_stale_lock(tmp_path: Path):
    # A crash between taking the run lock and writing run.json leaves the lock file alone;
    # `simloop run` reuses such a folder, and `simloop memory` refused it as "already exists".
    from simloop.run.runlock import LOCK_FILE

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / LOCK_FILE).write_text("12345\n")
    test = MemoryTest(parse_config(memory_config(strategies=["window"])), base_config(tmp_path), overrides=_fakes())
    memory = await test.run()
    assert memory.status == "finished" and read_manifest(tmp_path / "m").status == "finished"
