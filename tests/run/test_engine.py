"""The engine's worker pool (the dialogue itself is tests/run/test_session.py)."""

import asyncio

import pytest

from simloop.run.engine import Engine, run_dialogue
from simloop.run.session import DialogueSpec
from simloop.schema import PluginRef
from tests.helpers.data import make_scenario
from tests.helpers.plugins import EchoAssistant, ScriptedSimulator

SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="a"), max_turns=10, timeout_s=5)


async def test_run_dialogue_emits_started_turn_events():
    events = []
    t = await run_dialogue(make_scenario(), ScriptedSimulator(), EchoAssistant(), SPEC, events.append)
    assert [(e.kind, e.turn) for e in events] == [("started", 0), ("turn", 1), ("turn", 2), ("turn", 3)]
    assert t.stop.reason == "user_satisfied"


async def test_pool_bounds_concurrency_and_survives_errors():
    active = peak = 0

    class Slow(EchoAssistant):
        async def respond(self, state):
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1
            return await super().respond(state)

    got = []
    scenarios = (make_scenario(dialogue_id=f"{'bad' if i % 7 == 0 else 'ok'}-{i}") for i in range(40))
    engine = Engine(SPEC, ScriptedSimulator(), Slow(fail_on="bad"), got.append, concurrency=5)
    stats = await engine.run(scenarios)
    assert peak <= 5 and len(got) == 40 == stats.dialogues
    assert stats.reasons["error"] == 6 and stats.reasons["user_satisfied"] == 34
    assert len({t.dialogue_id for t in got}) == 40


async def test_pool_pulls_scenarios_lazily():
    pulled = 0

    def gen():
        nonlocal pulled
        for i in range(100_000):
            pulled += 1
            yield make_scenario(dialogue_id=f"d{i}")
            if pulled >= 30:
                return

    got = []
    await Engine(SPEC, ScriptedSimulator(), EchoAssistant(), got.append, concurrency=4).run(gen())
    assert len(got) == 30  # the generator was consumed one scenario at a time


async def test_lanes_ask_for_the_next_scenario_only_after_the_last_was_recorded():
    recorded: list[str] = []
    asked: list[tuple[str, list[str]]] = []

    async def lane(name: str):
        for i in range(3):
            asked.append((f"{name}{i}", list(recorded)))
            yield make_scenario(dialogue_id=f"{name}{i}")

    stats = await Engine(SPEC, ScriptedSimulator(), EchoAssistant(), lambda t: recorded.append(t.dialogue_id),
                         concurrency=1).run_lanes([lane("a"), lane("b")])
    assert stats.dialogues == 6 and sorted(recorded) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    for dialogue_id, before in asked:  # a lane's previous dialogue is on record when it is asked again
        lane_name, i = dialogue_id[0], int(dialogue_id[1])
        assert all(f"{lane_name}{j}" in before for j in range(i))


async def test_a_failing_lane_stops_the_others_and_raises():
    async def broken():
        yield make_scenario(dialogue_id="x0")
        raise ConnectionError("the server went away")

    async def slow():
        for i in range(1000):
            await asyncio.sleep(0.01)
            yield make_scenario(dialogue_id=f"s{i}")

    engine = Engine(SPEC, ScriptedSimulator(), EchoAssistant(), lambda t: None, concurrency=1)
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(engine.run_lanes([broken(), slow()]), timeout=10)
    assert engine.stats.dialogues < 1000


async def test_workers_start_one_loop_iteration_apart():
    # A dialogue that has suspended (its first request on the wire) resumes before the last
    # worker starts: the loop handles sockets between starts instead of after all of them.
    order: list[tuple[str, str]] = []

    class Stepping(ScriptedSimulator):
        async def open(self, state):
            order.append(("start", state.dialogue_id))
            await asyncio.sleep(0)  # a request in flight
            order.append(("resumed", state.dialogue_id))
            return await super().open(state)

    scenarios = [make_scenario(dialogue_id=f"d{i}") for i in range(20)]
    stats = await Engine(SPEC, Stepping(), EchoAssistant(), lambda t: None, concurrency=20).run(scenarios)
    assert stats.dialogues == 20
    assert order.index(("resumed", "d0")) < order.index(("start", "d19"))


async def test_interrupted_while_workers_start_leaves_no_coroutine_behind(recwarn):
    scenarios = [make_scenario(dialogue_id=f"d{i}") for i in range(200)]
    engine = Engine(SPEC, ScriptedSimulator(delay=0.05), EchoAssistant(), lambda t: None, concurrency=200)
    task = asyncio.create_task(engine.run(scenarios))
    for _ in range(5):  # a few workers are running, most are not started yet
        await asyncio.sleep(0)
    task.cancel()
    stats = await task
    import gc

    gc.collect()
    assert stats.interrupted and stats.dialogues == 0
    assert not [w for w in recwarn if "never awaited" in str(w.message)]
