import asyncio

from conftest import EchoAssistant, ScriptedSimulator, make_scenario
from simloop.run.engine import DialogueSpec, Engine, run_dialogue
from simloop.schema import PluginRef

SPEC = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="a"), max_turns=10, timeout_s=5)


async def test_dialogue_runs_to_simulator_end():
    t = await run_dialogue(make_scenario(), ScriptedSimulator(), EchoAssistant(), SPEC)
    assert t.stop.reason == "user_satisfied" and t.stop.by == "simulator"
    assert [x.index for x in t.turns] == [1, 2, 3]
    assert all(x.user.grade == 4.0 for x in t.turns)  # grade lands on the answered turn
    assert t.turns[0].user.rubric_id == "q0" and t.turns[0].assistant.passages[0].docid == "doc-1"


async def test_max_turns_is_an_engine_stop():
    spec = DialogueSpec(**{**SPEC.__dict__, "max_turns": 2})
    t = await run_dialogue(make_scenario(), ScriptedSimulator(), EchoAssistant(), spec)
    assert (t.stop.reason, t.stop.by, len(t.turns)) == ("max_turns", "engine", 2)


async def test_timeout_is_recorded():
    spec = DialogueSpec(**{**SPEC.__dict__, "timeout_s": 0.05})
    t = await run_dialogue(make_scenario(), ScriptedSimulator(delay=1.0), EchoAssistant(), spec)
    assert t.stop.reason == "timeout" and t.stop.by == "engine" and len(t.turns) == 1


async def test_plugin_exception_is_recorded_not_raised():
    t = await run_dialogue(make_scenario(dialogue_id="bad-1"), ScriptedSimulator(), EchoAssistant(fail_on="bad"), SPEC)
    assert t.stop.reason == "error" and t.error.type == "ValueError" and "exploded" in t.error.message


async def test_wrong_return_type_is_a_dialogue_error():
    class Broken(ScriptedSimulator):
        async def open(self, scenario):
            return "hello"
    t = await run_dialogue(make_scenario(), Broken(), EchoAssistant(), SPEC)
    assert t.error.type == "DialogueError" and "SimulatorTurn" in t.error.message


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
