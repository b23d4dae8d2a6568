"""iKAT topic files: the real 2023/2024 files, a 2025-schema sample, malformed input."""

from __future__ import annotations

import json

import pytest

from simloop.errors import DataFileError
from simloop.inputs.ikat import load_ikat_topics
from simloop.schema import Behaviour
from tests.helpers.data import ikat_file


@pytest.mark.parametrize(
    "path,conversations,turns",
    [
        (("2023", "2023_test_topics.json"), 25, 332),
        (("2023", "2023_train_topics.json"), 11, 95),
        (("2024", "2024_test_topics.json"), 17, 218),
    ],
)
def test_real_files_load_with_the_right_counts(path, conversations, turns):
    personas = load_ikat_topics(ikat_file(*path))
    assert len(personas) == conversations
    assert sum(len(p.topics[0].gold_turns) for p in personas) == turns
    for p in personas:
        assert len(p.topics) == 1 and p.topics[0].id == p.id and p.topics[0].rubric == []
        assert p.behaviour.sample(0) == Behaviour()
        for t in p.topics[0].gold_turns:
            assert all(1 <= i <= len(p.ptkb) for i in t.ptkb_provenance)
    assert len({p.id for p in personas}) == conversations


def test_2023_ids_ptkb_order_and_provenance():
    source = ikat_file("2023", "2023_train_topics.json")
    personas = {p.id: p for p in load_ikat_topics(source)}
    p = personas["1-1"]
    raw = next(c for c in json.loads(source.read_text()) if c["number"] == "1-1")
    assert p.ptkb == [raw["ptkb"][str(i)] for i in range(1, len(raw["ptkb"]) + 1)]
    topic = p.topics[0]
    assert topic.title == "Finding a university"
    first = topic.gold_turns[0]
    assert first.turn_id == 1 and first.ptkb_provenance == [5]
    assert first.utterance.startswith("I want to start my master's degree")
    for gold, turn in zip(topic.gold_turns, raw["turns"]):
        assert gold.response_provenance == turn["response_provenance"]
        assert gold.resolved_utterance == turn["resolved_utterance"] and gold.response == turn["response"]


def test_2024_int_numbers_become_string_ids_and_keep_provenance():
    personas = load_ikat_topics(ikat_file("2024", "2024_test_topics.json"))
    egypt = personas[0]
    assert egypt.id == "0" and egypt.topics[0].title == "Traveling to Egypt"
    visa = egypt.topics[0].gold_turns[1]
    assert visa.utterance == "Oh, do I need a visa?"
    assert visa.ptkb_provenance == [12]
    assert visa.response_provenance == ["clueweb22-en0023-79-17324:0"]
    total = sum(len(t.response_provenance) for p in personas for t in p.topics[0].gold_turns)
    assert total == 600  # README: 600 provenance ids in 2024


SAMPLE_2025 = [
    {
        "number": "1-1",
        "title": "Acid reflux",
        "ptkb": ["I am 34 years old.", "I enjoy apple, kiwi, and watermelon.",
                 "I spent last summer in Brazil and since then love fresh mangoes and pomegranates."],
        "responses": [
            {"turn_id": 1, "user_utterance": "What foods trigger acid reflux?",
             "resolved_utterance": "What foods trigger acid reflux?", "response": "Spicy and fatty food.",
             "relevant_ptkbs": [], "citations": ["clueweb22-en0026-73-16809:6"]},
            {"turn_id": 2, "user_utterance": "How about the fruits I mentioned before?",
             "resolved_utterance": "How are the fruits I mentioned before for acid reflux?",
             "response": "Citrus can hurt; melons are fine.",
             "relevant_ptkbs": ["I enjoy apple, kiwi, and watermelon.",
                                "I spent last summer in Brazil and since then love fresh mangoes and pomegranates."],
             "citations": ["clueweb22-en0013-80-03661:7", "clueweb22-en0002-19-16904:19"]},
        ],
    }
]


def test_2025_schema_is_converted(tmp_path):
    path = tmp_path / "2025.json"
    path.write_text(json.dumps(SAMPLE_2025))
    [p] = load_ikat_topics(path)
    assert p.id == "1-1" and p.ptkb == SAMPLE_2025[0]["ptkb"]
    turns = p.topics[0].gold_turns
    assert [t.utterance for t in turns] == ["What foods trigger acid reflux?",
                                            "How about the fruits I mentioned before?"]
    assert turns[1].ptkb_provenance == [2, 3]  # statement texts -> 1-based indices
    assert turns[1].response_provenance == ["clueweb22-en0013-80-03661:7", "clueweb22-en0002-19-16904:19"]
    assert turns[0].resolved_utterance == "What foods trigger acid reflux?"


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def _broken_2025(mutate):
    data = json.loads(json.dumps(SAMPLE_2025))
    mutate(data[0])
    return data


@pytest.mark.parametrize(
    "data,field",
    [
        ("{not json", "not valid JSON"),
        ({"number": "1"}, "JSON array"),
        ([{"title": "x", "ptkb": {"1": "I"}, "turns": []}], "'number'"),
        ([{"number": "1", "title": "x", "ptkb": {"1": "I"}}], "'turns'"),
        ([{"number": "1", "title": "x", "ptkb": {"1": "I"}, "turns": [{"turn_id": 1}]}], "'turns[0].utterance'"),
        ([{"number": "1", "title": "x", "ptkb": {"1": "I"},
           "turns": [{"turn_id": 1, "utterance": "hi", "ptkb_provenance": [4]}]}], "'turns[0].ptkb_provenance'"),
        ([{"number": "1", "title": "x", "ptkb": {"a": "I"}, "turns": []}], "'ptkb'"),
        ([{"number": "1", "title": 5, "ptkb": {"1": "I"}, "turns": []}], "'title'"),
        (_broken_2025(lambda c: c["responses"][1]["relevant_ptkbs"].append("I hate fruit.")),
         "'responses[1].relevant_ptkbs'"),
        (_broken_2025(lambda c: c["responses"][0].pop("turn_id")), "'responses[0].turn_id'"),
        (_broken_2025(lambda c: c.update(ptkb=[])), "'ptkb'"),
        (SAMPLE_2025 * 2, "'number'"),  # duplicate conversation
    ],
)
def test_malformed_files_raise_data_file_error_naming_file_and_field(tmp_path, data, field):
    path = _write(tmp_path, data)
    with pytest.raises(DataFileError) as info:
        load_ikat_topics(path)
    assert path in str(info.value) and field in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(DataFileError, match="not found"):
        load_ikat_topics(tmp_path / "nope.json")
