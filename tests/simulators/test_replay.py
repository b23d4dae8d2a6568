"""The replay simulator on the real 2023 train topics."""

from __future__ import annotations

import pytest

from simloop.errors import DialogueError
from simloop.inputs.ikat import load_ikat_topics
from simloop.schema import AssistantTurn, DialogueState, Scenario, Turn, UserTurn
from simloop.simulators.replay import ReplaySimulator
from tests.helpers.data import ikat_file, make_scenario


def scenarios() -> list[Scenario]:
    personas = load_ikat_topics(ikat_file("2023", "2023_train_topics.json"))
    return [
        Scenario(dialogue_id=p.id, persona=p, topic=p.topics[0], behaviour=p.behaviour, seed=0) for p in personas
    ]


async def replay(sim: ReplaySimulator, scenario: Scenario) -> tuple[DialogueState, object]:
    state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=100)
    turn = await sim.open(state)
    while turn.end is None:
        assert turn.intent == "replay" and turn.gold is not None
        user = UserTurn(utterance=turn.utterance, intent=turn.intent)
        reply = AssistantTurn(response="Thanks, noted.")  # the replayed user does not listen
        state.turns.append(Turn(index=len(state.turns) + 1, user=user, assistant=reply, gold=turn.gold))
        turn = await sim.next(state)
    return state, turn


async def test_replay_of_2023_train_ends_with_the_files_last_turn():
    sim = ReplaySimulator(None)
    all_scenarios = scenarios()
    assert len(all_scenarios) == 11
    total = 0
    for sc in all_scenarios:
        state, end = await replay(sim, sc)
        gold = sc.topic.gold_turns
        assert [t.user.utterance for t in state.turns] == [g.utterance for g in gold]
        assert state.turns[-1].user.utterance == gold[-1].utterance
        assert [t.gold.ptkb_provenance for t in state.turns] == [g.ptkb_provenance for g in gold]
        assert end.end.reason == "user_satisfied" and end.end.by == "simulator"
        assert end.end.detail == f"replay finished: {len(gold)} turns"
        total += len(state.turns)
    assert total == 95


async def test_replay_without_gold_turns_is_a_clear_error():
    with pytest.raises(DialogueError, match="no gold turns"):
        sc = make_scenario()
        await ReplaySimulator(None).open(DialogueState(dialogue_id=sc.dialogue_id, scenario=sc))
