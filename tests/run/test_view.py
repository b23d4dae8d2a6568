"""The assistant under test sees what an iKAT system sees (simloop/run/view.py): the
utterances, its own replies, the PTKB and its own memory; never the rubric, the need, gold
turns, grades or the simulator's memory.  End to end through the real CLI, with a plugin
that records every state it is handed (tests/helpers/view_plugins.py)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from simloop.inputs.ikat import load_ikat_topics
from simloop.inputs.personas import load_personas
from simloop.run import read_transcripts
from simloop.schema import Behaviour
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT, ikat_file

_KEYS = ('"keywords"', '"reference"', '"question"', '"rubric_id": "')


def _run(tmp_path: Path, *args: str) -> tuple[list, dict[str, list[dict]]]:
    seen_file = tmp_path / "seen.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = simloop_cli("run", "--assistant", "tests.helpers.view_plugins:Recorder",
                       "--assistant-param", f"out={seen_file}",
                       "--no-progress", "--out", tmp_path / "runs", "--run-id", "r", *args, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls: dict[str, list[dict]] = defaultdict(list)
    for line in seen_file.read_text(encoding="utf-8").splitlines():
        seen = json.loads(line)
        calls[seen["state"]["dialogue_id"]].append(seen)
    return list(read_transcripts(tmp_path / "runs" / "r")), calls


def _check_redacted(transcript, calls: list[dict], ptkb: list[str]) -> None:
    """What every call of one dialogue saw, against what the transcript recorded."""
    assert len(calls) == len(transcript.turns) >= 2
    memory_ids = {c["memory_id"] for c in calls}
    assert len(memory_ids) == 1, "assistant_memory must be the same dict on every call"
    for n, (seen, turn) in enumerate(zip(calls, transcript.turns)):
        state = seen["state"]
        assert seen["calls_before"] == n  # what the assistant wrote on earlier turns is still there
        assert state["simulator_memory"] == {}
        topic, persona = state["scenario"]["topic"], state["scenario"]["persona"]
        assert topic == {"id": transcript.scenario.topic_id, "title": "", "need": "", "rubric": [], "gold_turns": []}
        assert persona["id"] == transcript.scenario.persona_id and persona["ptkb"] == ptkb
        assert persona["name"] == "" and persona["topics"] == []
        assert state["scenario"]["behaviour"] == Behaviour().model_dump(mode="json")
        assert state["user"] == {"utterance": turn.user.utterance, "rubric_id": None, "grade": None, "intent": None}
        assert len(state["turns"]) == n
        for past, recorded in zip(state["turns"], transcript.turns):
            assert past["user"] == {"utterance": recorded.user.utterance, "rubric_id": None, "grade": None,
                                    "intent": None}
            assert past["gold"] is None and past["stages"] == []
            assert past["assistant"]["response"] == recorded.assistant.response


def test_the_assistant_never_sees_the_rubric_grades_or_simulator_memory(tmp_path: Path):
    personas = {p.id: p for p in load_personas(ROOT / "personas")}
    transcripts, calls = _run(tmp_path, "--personas", ROOT / "personas", "--limit", "2", "--max-turns", "6")
    assert len(transcripts) == 2
    for t in transcripts:
        persona = personas[t.scenario.persona_id]
        # the recorded turns carry what the simulator knew and did ...
        assert all(turn.user.rubric_id for turn in t.turns) and any(turn.user.grade is not None for turn in t.turns)
        _check_redacted(t, calls[t.dialogue_id], persona.ptkb)
        dumped = json.dumps([c["state"] for c in calls[t.dialogue_id]])
        topic = next(x for x in persona.topics if x.id == t.scenario.topic_id)
        # ... and nothing of it reached the assistant
        assert not [key for key in _KEYS if key in dumped]
        assert topic.need not in dumped and topic.title not in dumped


def test_a_replayed_ikat_topic_shows_no_gold_turn(tmp_path: Path):
    topics = ikat_file("2023", "2023_train_topics.json")
    persona = load_ikat_topics(topics)[0]
    transcripts, calls = _run(tmp_path, "--simulator", "replay", "--topics", topics, "--topic", persona.topics[0].id,
                              "--max-turns", "4")
    (t,) = transcripts
    _check_redacted(t, calls[t.dialogue_id], persona.ptkb)
    dumped = json.dumps([c["state"] for c in calls[t.dialogue_id]])
    gold = persona.topics[0].gold_turns
    assert len(calls[t.dialogue_id]) == len(t.turns) == 4 and all(x.gold is not None for x in t.turns)
    said = {x.user.utterance for x in t.turns}
    assert not [g.response for g in gold if g.response and g.response in dumped]
    assert not [g.resolved_utterance for g in gold
                if g.resolved_utterance not in said and g.resolved_utterance in dumped]
    assert all(turn["gold"] is None for c in calls[t.dialogue_id] for turn in c["state"]["turns"])


async def test_a_session_restored_from_disk_shows_the_same_view_and_memory():
    """The rehearsal server's way (dump, load, answer on): the view is rebuilt redacted, and
    the assistant's memory is the restored session's own dict."""
    from simloop.run.session import DialogueSession, DialogueSpec
    from simloop.schema import AssistantReply, PluginRef
    from tests.helpers.data import make_scenario
    from tests.helpers.plugins import ScriptedSimulator

    spec = DialogueSpec(run_id="r", simulator=PluginRef(name="s"), assistant=PluginRef(name="a"), max_turns=10,
                        timeout_s=5)
    first = DialogueSession(make_scenario(), ScriptedSimulator(), spec)
    await first.start()
    first.view.assistant_memory["notes"] = ["turn 1"]
    await first.answer(AssistantReply(response="first answer"))
    again = DialogueSession.load(json.loads(json.dumps(first.dump())), make_scenario(), ScriptedSimulator(), spec)
    view = again.view
    assert view.assistant_memory == {"notes": ["turn 1"]} and view.assistant_memory is again.state.assistant_memory
    assert view.user.model_dump() == {"utterance": again.utterance, "rubric_id": None, "grade": None, "intent": None}
    (past,) = view.turns
    assert past.assistant.response == "first answer" and past.gold is None and past.stages == []
    assert past.user.rubric_id is None and past.user.grade is None and again.state.turns[0].user.grade == 4.0
    assert view.scenario.topic.rubric == [] and view.simulator_memory == {}
