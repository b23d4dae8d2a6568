"""`simloop personas from-ikat`: iKAT conversations as personas with rubric questions and
reference answers, validated like hand-written ones, and run interactively end to end.

The iKAT files are read at run time from ../shared (never copied); the unit cases use
made-up conversations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simloop.cli import main
from simloop.inputs.from_ikat import IKAT_PATIENCE, personas_from_ikat, rubric_from_turns
from simloop.inputs.ikat import load_ikat_topics, load_passage_texts
from simloop.inputs.personas import load_personas
from simloop.run import read_transcripts
from simloop.schema import GoldTurn
from simloop.text import sentences, words
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ikat_file

REAL = ["2023/2023_train_topics.json", "2023/2023_test_topics.json", "2024/2024_test_topics.json"]


def _turns(*rows: tuple[str, str]) -> list[GoldTurn]:
    return [GoldTurn(turn_id=i, utterance=u, resolved_utterance=u, response=r)
            for i, (u, r) in enumerate(rows, start=1)]


def test_questions_merge_follow_ups_and_re_asks_and_keep_references():
    turns = _turns(
        ("Hi there! Can you help me plan a trip to Lisbon?", "Do you prefer the city or the coast?"),
        ("The coast, near the sea.", "Cascais and Ericeira are coastal towns near Lisbon."),
        ("Thanks for that. What is the weather like in Cascais in May?", "May in Cascais is mild, around 20 degrees."),
        # a correction
        ("Sorry, I meant: how warm is the sea in Cascais in May?", "The sea is about 16 degrees in May."),
        ("Which museums in Lisbon are open on Mondays?", "The Gulbenkian closes on Tuesdays, not Mondays."),
        ("Which museums in Lisbon are open on a Monday morning?", "The Tile Museum opens on Monday mornings."),
        ("Thanks a lot, bye!", "Enjoy your trip!"),
    )
    rubric = rubric_from_turns(turns, "Planning a trip to Lisbon")
    assert [q.id for q in rubric] == ["t1", "t3", "t5"]
    first, weather, museums = rubric
    # acknowledgement dropped; the answer to the clarifying question joins the first need
    assert first.question == "Can you help me plan a trip to Lisbon?"
    assert first.reference == "Cascais and Ericeira are coastal towns near Lisbon."  # not the clarifying question
    assert weather.question == "What is the weather like in Cascais in May?"
    assert weather.reference == "May in Cascais is mild, around 20 degrees. The sea is about 16 degrees in May."
    # a re-ask with the same content words is the same question; the reply to the goodbye is no answer
    assert museums.reference == ("The Gulbenkian closes on Tuesdays, not Mondays. "
                                 "The Tile Museum opens on Monday mornings.")


def test_different_questions_on_the_same_subject_stay_apart():
    turns = _turns(("How does solar power work?", "Panels turn light into electricity."),
                   ("Why is solar power important?", "It emits no carbon."))
    assert [q.question for q in rubric_from_turns(turns, "Solar power")] == [
        "How does solar power work?", "Why is solar power important?"]


@pytest.mark.parametrize("name", REAL, ids=lambda n: n.split("/")[1])
def test_real_topic_files_convert_and_validate_like_hand_written_personas(name: str, tmp_path: Path):
    source = ikat_file(*name.split("/"))
    out = tmp_path / "personas"
    assert main(["personas", "from-ikat", str(source), "--out", str(out)]) == 0
    loaded = {p.id: p for p in load_personas(out)}  # the hand-written personas' loader
    convs = load_ikat_topics(source)
    texts = load_passage_texts(source)
    assert bool(texts) == ("2023" in name)
    assert sorted(loaded) == sorted(c.id for c in convs)
    for conv in convs:
        p = loaded[conv.id]
        [topic] = p.topics  # one topic per conversation
        gold = conv.topics[0].gold_turns
        assert p.ptkb == conv.ptkb and topic.title == conv.topics[0].title and p.behaviour.patience == IKAT_PATIENCE
        assert 1 <= len(topic.rubric) <= len(gold) and topic.rubric[0].id == f"t{gold[0].turn_id}"
        resolved = {s for g in gold for s in sentences(g.resolved_utterance)}
        responses = " ".join(g.response for g in gold)
        # evidence: the gold responses and (2023) the texts of the passages they cite
        cited = " ".join(" ".join(texts.get(pid, "").split()) for g in gold for pid in g.response_provenance)
        for q in topic.rubric:
            assert set(sentences(q.question)) <= resolved  # made of the user's own resolved sentences
            assert q.reference is None or set(words(q.reference)) <= set(words(f"{responses} {cited}"))
        assert sum(q.reference is not None for q in topic.rubric) >= len(topic.rubric) // 2


def test_2025_schema_and_prefix(tmp_path: Path):
    src = tmp_path / "2025.json"
    src.write_text(json.dumps([{"number": "3-1", "title": "Bread", "ptkb": ["I bake at home.", "I avoid gluten."],
                                "responses": [{"turn_id": 1, "user_utterance": "How do I bake bread?",
                                               "resolved_utterance": "How do I bake gluten-free bread?",
                                               "response": "Use rice flour and psyllium.", "relevant_ptkbs": [],
                                               "citations": []}]}]))
    [p] = personas_from_ikat(src, prefix="y25-")
    assert p.id == p.topics[0].id == "y25-3-1"
    [q] = p.topics[0].rubric
    assert (q.question, q.reference) == ("How do I bake gluten-free bread?", "Use rice flour and psyllium.")


def test_bad_input_names_the_file_and_field_and_writes_nothing(tmp_path: Path, capsys):
    out = tmp_path / "out"
    bad = tmp_path / "bad.json"
    cases = [
        ('{"topics": []}', "top level"),
        ('[{"number": "1-1", "title": "t", "ptkb": {"1": "I cook."}, "turns": [{"turn_id": 1}]}]',
         "field 'turns[0].utterance' is missing"),
        ('[{"number": "1-1", "title": "t", "turns": []}]', "field 'ptkb' is missing"),
        ("id = 'maya'", "not valid JSON"),
    ]
    for text, field in cases:
        bad.write_text(text)
        assert main(["personas", "from-ikat", str(bad), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(bad) in err and field in err, err
        assert not out.exists()


def test_clash_with_existing_personas_is_refused(tmp_path: Path, capsys):
    src = tmp_path / "t.json"
    conv = {"number": "1-1", "title": "t", "ptkb": {"1": "I cook."},
            "turns": [{"turn_id": 1, "utterance": "What is a wok?", "response": "A pan."}]}
    src.write_text(json.dumps([conv]))
    out = tmp_path / "out"
    out.mkdir()
    (out / "other.toml").write_text('id = "other"\nptkb = ["x"]\n[[topics]]\nid = "1-1"\ntitle = "t"\n'
                                    '[[topics.rubric]]\nid = "q"\nquestion = "q?"\n')
    assert main(["personas", "from-ikat", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "duplicate topic id '1-1'" in err and "--prefix" in err
    assert sorted(p.name for p in out.iterdir()) == ["other.toml"]
    assert main(["personas", "from-ikat", str(src), "--out", str(out), "--prefix", "ikat-"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["ikat-1-1.toml", "other.toml"]
    assert main(["personas", "from-ikat", str(src), "--out", str(out), "--prefix", "ikat-"]) == 0  # rerun overwrites


@pytest.mark.slow
def test_interactive_run_on_converted_personas(tmp_path: Path):
    """The real stack: converted personas, the offline simulator, bm25_extractive, MiniLM, MPNet."""
    src = tmp_path / "t.json"
    turns = [{"turn_id": 1, "utterance": "What is a marathon?", "resolved_utterance": "What is a marathon race?",
              "response": "A marathon is a long-distance foot race of 42.195 kilometres."},
             {"turn_id": 2, "utterance": "Who ran the first one?", "resolved_utterance": "Who ran the first marathon?",
              "response": "Legend says the messenger Pheidippides ran from Marathon to Athens."}]
    src.write_text(json.dumps([{"number": "1-1", "title": "Running a marathon", "ptkb": {"1": "I run 30 km a week."},
                                "turns": turns}]))
    out = tmp_path / "personas"
    assert main(["personas", "from-ikat", str(src), "--out", str(out)]) == 0
    p = simloop_cli("run", "--personas", out, "--out", tmp_path, "--run-id", "ikat-live", "--no-progress", timeout=600)
    assert p.returncode == 0, p.stderr
    [t] = list(read_transcripts(tmp_path / "ikat-live"))
    assert t.stop.by == "simulator" and t.stop.reason in ("user_satisfied", "user_gave_up") and t.stop.utterance
    assert {x.user.rubric_id for x in t.turns} <= {"t1", "t2"} and t.turns[0].user.rubric_id == "t1"
    assert all(x.user.grade is not None for x in t.turns)


def test_references_carry_the_cited_passages_where_the_topic_file_has_them(tmp_path: Path):
    # DESIGN §5 evidence: gold response + the texts of the passages it cites, from the
    # <stem>_psg_text.jsonl beside the topic file (2023 ships one, 2024 does not).
    conv = {"number": "2-1", "title": "Egypt", "ptkb": {"1": "I am American."},
            "turns": [{"turn_id": 1, "utterance": "Do I need a visa for Egypt?", "resolved_utterance": "",
                       "response": "Yes, Americans need a visa.", "ptkb_provenance": [1],
                       "response_provenance": ["doc-1:0", "doc-2:3", "doc-1:0"]}]}
    src = tmp_path / "topics.json"
    src.write_text(json.dumps([conv]))
    [without] = personas_from_ikat(src)
    assert without.topics[0].rubric[0].reference == "Yes, Americans need a visa."
    long_text = " ".join(["An e-visa costs 25 dollars and is bought online."] * 300)  # 2,700 words
    lines = [{"doc_id": "doc-1", "passage_id": "0", "passage_text": "Visitors from the USA need an e-visa."},
             {"doc_id": "doc-2", "passage_id": "3", "passage_text": long_text}]
    (tmp_path / "topics_psg_text.jsonl").write_text("\n".join(json.dumps(x) for x in lines))
    [p] = personas_from_ikat(src)
    ref = p.topics[0].rubric[0].reference
    assert ref.startswith("Yes, Americans need a visa. Visitors from the USA need an e-visa. An e-visa costs")
    assert ref.count("Visitors from the USA") == 1  # a passage cited twice is read once
    from simloop.inputs.ikat import REFERENCE_PASSAGE_WORDS
    assert len(ref.split()) <= len("Yes, Americans need a visa.".split()) + REFERENCE_PASSAGE_WORDS
