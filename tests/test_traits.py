"""Behaviour traits that matter (issue 11 item 4): ranges drawn per scenario, --behaviour for a
whole run, clear bad-input lines, and a trait-sensitivity test through the real engine
(public API: runner, recorder, MiniLM grader, template voice; the assistant that asks back
is the test plugin ``fakes.adversaries:Asker``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import simloop
from simloop.errors import DataFileError
from simloop.inputs.personas import load_personas
from simloop.simulators.cues import mentions_statement
from simloop.traits import Behaviour, BehaviourSpec, check_trait
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT, write_personas

ASKER = "simloop.fakes.adversaries:Asker"
PERSONA = """id = "ana"
ptkb = ["I live in Porto.", "I play the cello in an orchestra.", "My sister is a nurse.", "I am vegetarian."]
[behaviour]
{behaviour}
[[topics]]
id = "ana-cello"
title = "Learning the cello"
[[topics.rubric]]
id = "q1"
question = "How long does it take to learn to play the cello?"
[[topics.rubric]]
id = "q2"
question = "What size of cello does an adult need?"
[[topics.rubric]]
id = "q3"
question = "How much does a beginner cello cost?"
[[topics.rubric]]
id = "q4"
question = "How often should a cello be restrung?"
"""


def write_persona(folder: Path, behaviour: str = "", pid: str = "ana") -> Path:
    text = PERSONA.replace('"ana"', f'"{pid}"').replace('"ana-cello"', f'"{pid}-cello"')
    return write_personas(folder, **{pid: text.format(behaviour=behaviour)}) / f"{pid}.toml"


# ------------------------------------------------------------------------------ ranges


def test_a_range_is_drawn_per_scenario_from_its_seed():
    spec = BehaviourSpec(patience=[2, 5], cooperativeness=[0.2, 0.9], reveal=["relevant", "eager"])
    drawn = [spec.sample(seed) for seed in range(60)]
    assert drawn[7] == spec.sample(7)  # a pure function of the seed
    assert {b.patience for b in drawn} == {2, 3, 4, 5}
    assert all(0.2 <= b.cooperativeness <= 0.9 for b in drawn) and len({b.cooperativeness for b in drawn}) > 30
    assert {b.reveal for b in drawn} == {"relevant", "eager"}
    assert {b.verbosity for b in drawn} == {0.5}  # a plain value stays as it is
    assert BehaviourSpec(patience=4).sample(1) == Behaviour(patience=4)


def test_a_spec_without_ranges_is_a_user_and_one_with_ranges_must_be_drawn():
    from simloop.schema import Persona, Scenario, Topic

    topic = Topic(id="t", title="T", rubric=[{"id": "q", "question": "Why?"}])
    fixed = Persona(id="p", ptkb=["I sing."], behaviour={"patience": 2}, topics=[topic])
    sc = Scenario(dialogue_id="d", persona=fixed, topic=topic, behaviour=fixed.behaviour, seed=1)
    assert sc.behaviour == Behaviour(patience=2)
    ranged = fixed.model_copy(update={"behaviour": BehaviourSpec(patience=[1, 3])})
    with pytest.raises(ValueError, match="patience given as a range"):
        Scenario(dialogue_id="d", persona=ranged, topic=topic, behaviour=ranged.behaviour, seed=1)


def test_a_behaviour_override_changes_the_config_hash_and_none_keeps_the_old_one():
    import hashlib

    from simloop.config import _NOT_HASHED, RunConfig, config_hash

    plain = RunConfig()
    before = plain.model_dump(mode="json", exclude=_NOT_HASHED)  # a run made before the field existed
    del before["scenarios"]["behaviour"]
    assert config_hash(plain) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    assert config_hash(plain) != config_hash(RunConfig.model_validate({"scenarios": {"behaviour": {"patience": 1}}}))


def test_run_overrides_replace_the_personas_traits():
    spec = BehaviourSpec(patience=[2, 5], verbosity=0.9)
    assert spec.with_overrides({"patience": 1}).sample(3) == Behaviour(patience=1, verbosity=0.9)


@pytest.mark.parametrize("name,value,expected", [
    ("patience", 21, "patience: an integer 0-20"),
    ("patience", 2.5, "patience: an integer 0-20"),
    ("cooperativeness", [0.5, 1.2], "cooperativeness: a number 0-1"),
    ("patience", [5, 2], "range [5, 2] is inverted"),
    ("reveal", "sometimes", "reveal: one of never, relevant, eager"),
    ("mood", 1, "unknown behaviour trait 'mood'; traits: patience, cooperativeness"),
])
def test_bad_values_name_the_trait_and_its_range(name, value, expected):
    with pytest.raises(ValueError) as info:
        check_trait(name, value)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_an_inverted_range_in_a_persona_names_file_and_field(tmp_path):
    path = write_persona(tmp_path, "patience = [5, 2]")
    with pytest.raises(DataFileError) as info:
        load_personas(tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: behaviour.patience: ") and "inverted" in msg and "\n" not in msg


def test_persona_ranges_load_and_scenarios_record_the_drawn_value(tmp_path):
    from simloop.config import RunConfig
    from simloop.run.scenarios import iter_scenarios

    write_persona(tmp_path, "patience = [1, 6]\nreveal = [\"never\", \"eager\"]")
    [persona] = load_personas(tmp_path)
    assert persona.behaviour.patience == [1, 6] and persona.behaviour.ranged == ["patience", "reveal"]
    cfg = RunConfig.model_validate({"scenarios": {"personas_dir": str(tmp_path), "repeat": 40}})
    drawn = [s.behaviour for s in iter_scenarios(cfg, [persona])]
    assert {b.patience for b in drawn} == set(range(1, 7)) and {b.reveal for b in drawn} == {"never", "eager"}
    cfg = cfg.model_copy(update={"scenarios": cfg.scenarios.model_copy(update={"behaviour": {"patience": 0}})})
    assert {s.behaviour.patience for s in iter_scenarios(cfg, [persona])} == {0}


# ------------------------------------------------------------------------------ the CLI


@pytest.mark.parametrize("flag,expected", [
    ("patience=99", "--behaviour patience=99: 99 is out of range (patience: an integer 0-20"),
    ("mood=grumpy", "--behaviour mood=grumpy: unknown behaviour trait 'mood'; traits: patience"),
    ("patience=[4,1]", "--behaviour patience=[4,1]: range [4, 1] is inverted"),
])
def test_bad_behaviour_flag_exits_2_with_one_line(tmp_path, flag, expected):
    proc = simloop_cli("run", "--behaviour", flag, "--out", tmp_path, "--no-progress", timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not any(tmp_path.iterdir())


def test_inverted_persona_range_exits_2_naming_the_file(tmp_path):
    path = write_persona(tmp_path / "personas", "cooperativeness = [0.9, 0.1]")
    proc = simloop_cli("run", "--personas", tmp_path / "personas", "--out", tmp_path / "out", "--no-progress",
                       timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"{path}: behaviour.cooperativeness:" in line and "inverted" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_behaviour_flag_range_is_drawn_recorded_and_binds(tmp_path):
    """`simloop run --behaviour patience=[0,4] --behaviour cooperativeness=1` against the Asker: each
    dialogue records its drawn patience, and its user gives up after exactly that many rounds + 1."""
    personas = tmp_path / "personas"
    write_persona(personas)
    proc = simloop_cli("run", "--personas", personas, "--assistant", ASKER, "--behaviour", "patience=[0,4]",
                       "--behaviour", "cooperativeness=1", "--repeat", "8", "--out", tmp_path, "--run-id", "r",
                       "--no-progress", timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ts = list(simloop.read_transcripts(tmp_path / "r"))
    assert len(ts) == 8 and len({t.scenario.behaviour.patience for t in ts}) > 1
    for t in ts:
        b = t.scenario.behaviour
        assert 0 <= b.patience <= 4 and b.cooperativeness == 1.0
        assert t.stop.reason == "user_gave_up" and len(t.turns) == b.patience + 1, (b, t.stop.detail)
    manifest = json.loads((tmp_path / "r" / "run.json").read_text())
    assert manifest["config"]["scenarios"]["behaviour"] == {"patience": [0, 4], "cooperativeness": 1}


# ------------------------------------------------------------------------------ sensitivity


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory) -> Path:
    """Two shipped personas (all their topics), so the runs stay small."""
    folder = tmp_path_factory.mktemp("personas")
    for f in sorted((ROOT / "personas").glob("*.toml"))[:2]:
        shutil.copy(f, folder / f.name)
    return folder


def _run(folder: Path, out: Path, assistant: str, **behaviour) -> list:
    run = simloop.run({"scenarios": {"personas_dir": str(folder), "behaviour": behaviour},
                       "assistant": {"name": assistant}, "out": str(out), "progress": False, "concurrency": 8})
    ts = list(simloop.read_transcripts(run.dir))
    assert ts and all(t.error is None for t in ts)
    return ts


def _user_lines(ts: list) -> list[str]:
    return [turn.user.utterance for t in ts for turn in t.turns]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


@pytest.mark.slow
def test_each_trait_changes_measured_behaviour(demo_folder, tmp_path):
    base = {"cooperativeness": 1.0, "verbosity": 0.5, "language_skill": 1.0, "reveal": "relevant"}
    # patience: clarification rounds count against it, so against an assistant that only asks
    # back the patient user stays longer -- exactly patience + 1 turns (or the policy's bound).
    short = _run(demo_folder, tmp_path / "p1", ASKER, **{**base, "patience": 1})
    long = _run(demo_folder, tmp_path / "p5", ASKER, **{**base, "patience": 5})
    assert all(len(t.turns) == 2 and t.stop.reason == "user_gave_up" for t in short)
    assert all(len(t.turns) == 6 or "clarification rounds" not in t.stop.detail for t in long)
    assert _mean([len(t.turns) for t in long]) >= 5.0
    # cooperativeness: against the asker, the cooperative user answers (and tells a fact), the other ignores.
    coop, rude = long, _run(demo_folder, tmp_path / "c0", ASKER, **{**base, "patience": 5, "cooperativeness": 0.0})
    def share(ts: list, intent: str) -> float:  # of the turns after the first
        return _mean([turn.user.intent == intent for t in ts for turn in t.turns[1:]])

    assert share(coop, "answer_clarification") > 0.5 and share(rude, "answer_clarification") == 0.0
    assert share(rude, "ignore_clarification") > 0.5 and share(coop, "ignore_clarification") == 0.0
    ptkb = {p.id: p.ptkb for p in load_personas(demo_folder)}

    def told(ts: list) -> int:  # later turns that state a persona fact
        return sum(any(mentions_statement(turn.user.utterance, f) for f in ptkb[t.scenario.persona_id])
                   for t in ts for turn in t.turns[1:])

    assert told(coop) > told(rude)
    # reveal: eager states a persona fact in every first turn, relevant only when one fits, never none.
    first = {}
    for mode in ("never", "relevant", "eager"):
        ts = _run(demo_folder, tmp_path / f"r-{mode}", ASKER, **{**base, "patience": 0, "reveal": mode})
        first[mode] = _mean([any(mentions_statement(t.turns[0].user.utterance, f) for f in ptkb[t.scenario.persona_id])
                             for t in ts])
    assert first["never"] == 0.0 and first["eager"] == 1.0 and first["relevant"] < first["eager"], first
    # verbosity and language skill: chatty users write more; low skill writes lower-case, vaguer text.
    terse = _run(demo_folder, tmp_path / "v0", ASKER, **{**base, "patience": 3, "verbosity": 0.0})
    chatty = _run(demo_folder, tmp_path / "v1", ASKER, **{**base, "patience": 3, "verbosity": 1.0})
    words = lambda ts: _mean([len(u.split()) for u in _user_lines(ts)])  # noqa: E731
    assert words(chatty) > 1.3 * words(terse)
    poor = _run(demo_folder, tmp_path / "s0", ASKER, **{**base, "patience": 3, "language_skill": 0.2})
    capitals = lambda ts: _mean([any(c.isupper() for c in u) for u in _user_lines(ts)])  # noqa: E731
    assert capitals(poor) < 0.2 < capitals(terse)
