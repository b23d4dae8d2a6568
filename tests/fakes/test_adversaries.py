"""Adversarial assistants (issue 11 item 2): the offline user is never satisfied by a parrot,
an off-topic answerer or an assistant that only asks back, while bm25_extractive still
satisfies most users.  End to end through the real CLI, index, MiniLM, MPNet and personas/."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from simloop.fakes.adversaries import (
    Asker,
    KeywordDump,
    Negated,
    OffTopic,
    Parrot,
    Shuffled,
    clarifying_question,
    restate,
    topic_phrase,
)
from simloop.run import read_manifest, read_transcripts
from simloop.run.plugins import Assistant
from simloop.run.view import ask, assistant_view
from simloop.schema import Behaviour, DialogueState, Persona, RubricQuestion, Scenario, Topic, UserTurn
from simloop.text import sentences
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT, make_scenario

ADVERSARIES = ["Parrot", "OffTopic", "Asker", "KeywordDump"]


def test_restatements_are_seeded_varied_and_carry_the_question():
    q = "How long does it take to learn to play the violin?"
    assert restate(q, random.Random(3)) == restate(q, random.Random(3))
    variants = {restate(q, random.Random(seed)) for seed in range(12)}
    assert len(variants) >= 8
    assert all("learn" in v and "violin" in v for v in variants)
    assert topic_phrase(q) == "it take to learn to play the violin"
    assert topic_phrase("I'm planning a trip. Can you tell me where my visa comes from?") == "your visa comes from"


def test_clarifying_questions_only_ask():
    q = "What are the side effects of ibuprofen?"
    for seed in range(12):
        text = clarifying_question(q, random.Random(seed))
        assert text.endswith("?")
        statements = [s for s in sentences(text) if not s.endswith("?")]
        assert all(len(s.split()) <= 8 for s in statements), text  # at most a polite opener


def _scenario(title: str, question: str) -> Scenario:
    topic = Topic(id="t", title=title, rubric=[RubricQuestion(id="q1", question=question)])
    persona = Persona(id="p", name="P", ptkb=["I live in Porto."], behaviour=Behaviour(), topics=[topic])
    return Scenario(dialogue_id="d", persona=persona, topic=topic, behaviour=persona.behaviour, seed=5)


def test_the_off_topic_subject_shares_no_word_with_what_the_user_said():
    # on the view an assistant is given (no topic in it): the utterances are all it can avoid
    from simloop.fakes.adversaries import OFF_SUBJECTS
    from simloop.run.view import add_turn, ask, assistant_view
    from simloop.schema import AssistantTurn, DialogueState, Turn, UserTurn

    for subject in OFF_SUBJECTS:
        word, other = subject.split()[0], subject.split()[-1]
        view = assistant_view(DialogueState(dialogue_id="d", scenario=_scenario(f"The {word}", "Who?")))
        add_turn(view, Turn(index=1, user=UserTurn(utterance=f"Tell me about the {word}."),
                            assistant=AssistantTurn(response="Sure.")))
        ask(view, UserTurn(utterance=f"And the {other}?"))
        for _ in range(5):
            chosen = OffTopic(None).subject(view)
            assert word not in chosen and other not in chosen


def test_adversaries_are_assistants():
    for cls in (Parrot, OffTopic, Asker, KeywordDump, Shuffled):
        assert isinstance(cls(None), Assistant)


def _run(tmp_path: Path, assistant: str, limit: int = 6) -> list:
    """The first topic of each demo persona, up to ``limit`` dialogues (suite time);
    scripts/bench_grader.py runs all 41 demo dialogues per assistant."""
    from simloop.inputs.personas import load_personas

    topics = [a for p in load_personas(ROOT / "personas") for a in ("--topic", p.topics[0].id)]
    proc = simloop_cli("run", "--assistant", assistant, "--concurrency", "16", "--no-progress", "--out", tmp_path,
                       "--run-id", "r", "--limit", limit, *topics, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(read_transcripts(tmp_path / "r"))


def _satisfied(transcripts: list) -> float:
    assert transcripts and all(t.error is None for t in transcripts)
    return sum(t.stop.reason == "user_satisfied" for t in transcripts) / len(transcripts)


@pytest.mark.slow
@pytest.mark.parametrize("name", ADVERSARIES)
def test_no_adversary_satisfies_the_offline_user(tmp_path, name):
    transcripts = _run(tmp_path, f"simloop.fakes.adversaries:{name}")
    assert len(transcripts) == 6
    assert _satisfied(transcripts) <= 0.05
    grades = [turn.user.grade for t in transcripts for turn in t.turns if turn.user.grade is not None]
    assert grades and sum(g > 3.0 for g in grades) / len(grades) <= 0.02


@pytest.mark.slow
def test_shuffled_answers_rarely_pass(tmp_path):
    # The word-order cap catches ~88% of shuffled answers (README), not all: a user may
    # still be satisfied now and then, where real answers satisfy most (9 of 10 before the
    # cap, shuffled answers 8 of 10 in the audit).
    transcripts = _run(tmp_path, "simloop.fakes.adversaries:Shuffled")
    grades = [turn.user.grade for t in transcripts for turn in t.turns if turn.user.grade is not None]
    assert _satisfied(transcripts) <= 0.2
    assert grades and sum(g > 3.0 for g in grades) / len(grades) <= 0.25, grades


@pytest.mark.slow
def test_bm25_extractive_still_satisfies_most_users(demo_run):
    # Its long extractive answers make this the costliest run (7 of the first 10 and 29 of
    # all 41 demo dialogues ended satisfied when this test was written).  The run is the demo
    # on the same six first topics, shared with test_e2e_demo.py (conftest.py: demo_run).
    assert demo_run.returncode == 0, demo_run.stderr[-2000:]
    assert read_manifest(demo_run.run_dir).assistant.name == "bm25_extractive"
    transcripts = list(read_transcripts(demo_run.run_dir))
    assert len(transcripts) == 6 and _satisfied(transcripts) >= 0.5


async def test_the_negated_adversary_negates_another_assistants_answers():
    negated = Negated(None, inner="tests.helpers.plugins:EchoAssistant")
    assert isinstance(negated, Assistant)
    view = assistant_view(DialogueState(dialogue_id="d", scenario=make_scenario()))
    ask(view, UserTurn(utterance="the museum is open on 3 days."))
    reply = await negated.respond(view)
    assert reply.response == "About the museum is not open on 6 days."
    assert [p.docid for p in reply.passages] == ["doc-1"]  # the rest of the reply is the inner assistant's
    with pytest.raises(ValueError):
        Negated(None, inner="tests.helpers.plugins:EchoAssistant", style="sarcastic")
