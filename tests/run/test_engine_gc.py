"""The engine quiets Python's cyclic GC while dialogues run (engine.py, _quiet_gc) and gives
the process its settings back afterwards, also when two engines overlap or a run fails."""

import asyncio
import gc

import pytest

from simloop.run.engine import Engine
from simloop.run.session import DialogueSpec
from simloop.schema import PluginRef
from tests.helpers.data import make_scenario
from tests.helpers.plugins import EchoAssistant, ScriptedSimulator

SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="a"), max_turns=10, timeout_s=5)


class Watching(EchoAssistant):
    """Notes the GC settings it sees while answering."""

    def __init__(self, seen: list, delay: float = 0.0, **kw):
        super().__init__(**kw)
        self.seen, self.delay = seen, delay

    async def respond(self, state):
        self.seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        await asyncio.sleep(self.delay)
        return await super().respond(state)


async def test_gc_is_quiet_during_a_run_and_restored_after_overlapping_runs():
    before = gc.get_threshold()
    garbage = [[i] for i in range(1000)]  # objects that exist before the run get frozen
    seen_a: list = []
    seen_b: list = []
    a = Engine(SPEC, ScriptedSimulator(), Watching(seen_a, 0.02), [].append, concurrency=2)
    b = Engine(SPEC, ScriptedSimulator(), Watching(seen_b, 0.0), [].append, concurrency=2)
    run_a = asyncio.create_task(a.run(make_scenario(dialogue_id=f"a{i}") for i in range(4)))
    await asyncio.sleep(0.005)
    await b.run(make_scenario(dialogue_id=f"b{i}") for i in range(2))  # ends while a still runs
    mid = (gc.get_threshold()[0], gc.get_freeze_count())
    await run_a
    assert all(th >= 20_000 and frozen >= len(garbage) for th, frozen in seen_a + seen_b)
    assert mid[0] >= 20_000 and mid[1] > 0  # b's end did not undo what a still needs
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


async def test_gc_settings_come_back_after_a_failing_sink():
    before = gc.get_threshold()

    def broken_sink(transcript):
        raise OSError("disk gone")

    with pytest.raises(OSError):
        await Engine(SPEC, ScriptedSimulator(), EchoAssistant(), broken_sink, concurrency=2).run(
            make_scenario(dialogue_id=f"d{i}") for i in range(3))
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
