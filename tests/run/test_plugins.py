"""Plugin loading: effective parameters (DESIGN §3) and the once-per-run ``aclose``."""

from __future__ import annotations

from pathlib import Path

import pytest

from simloop.config import RunConfig
from simloop.run import read_manifest, read_transcripts
from simloop.run.plugins import Context, close_plugins, effective_params, load_plugin
from simloop.run.runner import execute, prepare_run
from tests.helpers.data import ROOT
from tests.helpers.plugins import EchoAssistant


class Tunable:
    """Defaults, a Path, and free keyword options."""

    def __init__(self, ctx, k: int = 20, where: Path = Path("/tmp/x"), **options):
        self.k = k

    async def respond(self, state):
        raise NotImplementedError


class Derived(Tunable):
    """A plugin that says itself what it runs with (here: k as validated)."""

    @property
    def params(self):
        return {"k": max(1, self.k)}


def test_effective_params_fill_in_defaults_as_json():
    assert effective_params(Tunable(None), {}) == {"k": 20, "where": "/tmp/x"}
    assert effective_params(Tunable(None, k=3, colour="red"), {"k": 3, "colour": "red"}) == {
        "k": 3, "where": "/tmp/x", "colour": "red"}
    assert effective_params(Derived(None, k=-5), {"k": -5}) == {"k": 1}


def test_offline_simulator_records_its_defaults():
    sim = load_plugin("simulator", "offline", {"threshold": 2.5}, Context(RunConfig()))
    assert effective_params(sim, {"threshold": 2.5}) == {
        "threshold": 2.5, "retries": 3, "voice": "template", "grader": "embedding", "reveal_threshold": 0.35,
        "max_words": 400}


class Closing(EchoAssistant):
    closed = 0

    async def aclose(self):
        type(self).closed += 1


class Broken:
    async def aclose(self):
        raise RuntimeError("cannot close")


async def test_close_plugins_closes_each_once_and_reports_a_failure():
    a = Closing()
    Closing.closed = 0
    with pytest.raises(RuntimeError, match="cannot close"):
        await close_plugins(Broken(), a, a, object())
    assert Closing.closed == 1  # the failure did not keep it open; the same instance closed once


async def test_a_run_records_effective_params_and_closes_its_plugins(tmp_path):
    Closing.closed = 0
    cfg = RunConfig.model_validate({
        "out": str(tmp_path), "run_id": "r", "progress": False,
        "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 3},
        "simulator": {"name": "tests.helpers.plugins:ScriptedSimulator", "params": {"grade": 5.0}},
        "assistant": {"name": "tests.run.test_plugins:Closing"}})
    prep = prepare_run(cfg)
    await execute(prep)
    assert Closing.closed == 1  # once for the run, not per dialogue
    manifest = read_manifest(prep.run_dir)
    expected = {"fail_on": None, "delay": 0.0, "grade": 5.0, "closing": "Thanks, that is all. Bye!"}
    assert manifest.simulator.params == expected and manifest.assistant.params == {"fail_on": None}
    assert manifest.config["simulator"]["params"] == {"grade": 5.0}  # the config keeps what was given
    assert all(t.simulator.params == expected for t in read_transcripts(prep.run_dir))
