"""`simloop export`: every format parsed back, filters, iKAT round trip, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import pyarrow.parquet as pq
import pytest

from simloop.cli import main
from simloop.errors import BadInputError, DataFileError
from simloop.evaluate import ExportFilter, export_run
from simloop.evaluate.export_chat import validate_chat
from simloop.schema import Behaviour, GoldTurn
from tests.helpers.data import ikat_file, write_personas
from tests.helpers.runs import PTKB, transcript, turn, write_run

PERSONA_TOML = """
id = "p1"
name = "P One"
ptkb = {ptkb}
[behaviour]
patience = 1
verbosity = 0.9
[[topics]]
id = "t1"
title = "Cello lessons"
need = "find a teacher"
[[topics.rubric]]
id = "q1"
question = "Where can I learn the cello?"
"""


def _personas(tmp_path: Path) -> Path:
    return write_personas(tmp_path / "personas", p1=PERSONA_TOML.format(ptkb=json.dumps(PTKB)))


def _dialogues():
    a = transcript([
        turn(1, ptkb=[3, 1, 2], ptkb_used=[3, 1], passages=[("d1", True), "d2", ("d3", True)], grade=4, rubric_id="q1",
             rewritten="cello Porto"),
        turn(2, ptkb=[], passages=["d4"], grade=5, rubric_id="q1"),
    ], persona="p1", topic="t1", behaviour=Behaviour(patience=1, verbosity=0.9))
    b = transcript([turn(1, ptkb=[2], passages=["d5"], grade=1)], persona="p1", topic="t1", repeat=1,
                   reason="user_gave_up")
    return [a, b]


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run-x", _dialogues(), config={"scenarios": {"personas_dir": str(_personas(tmp_path))}})


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_ikat_round_trip(run: Path):
    from simloop.inputs.ikat import load_ikat_topics

    res = export_run(run, "ikat", filt=ExportFilter(repeat=0))
    assert res.path == run / "export.json" and res.rows == 1
    data = json.loads(res.path.read_text())
    topic = data[0]
    assert list(topic) == ["number", "title", "ptkb", "turns"]
    assert topic["number"] == "t1" and topic["title"] == "Cello lessons"
    assert topic["ptkb"] == {str(i): s for i, s in enumerate(PTKB, start=1)}
    t1 = topic["turns"][0]
    assert t1["ptkb_provenance"] == [3, 1] and t1["response_provenance"] == ["d1", "d3"]  # used, not ranked 2
    assert t1["resolved_utterance"] == "cello Porto" and topic["turns"][1]["resolved_utterance"] == "question 2?"
    # read back through the iKAT loader: same utterances, provenance and turn count
    [persona] = load_ikat_topics(res.path)
    [back] = persona.topics
    src = _dialogues()[0]
    assert persona.ptkb == PTKB and len(back.gold_turns) == len(src.turns)
    assert [g.utterance for g in back.gold_turns] == [t.user.utterance for t in src.turns]
    assert [g.ptkb_provenance for g in back.gold_turns] == [[3, 1], []]
    assert [g.response_provenance for g in back.gold_turns] == [["d1", "d3"], []]


def test_ikat_export_of_a_replayed_2023_topic(tmp_path: Path):
    from simloop.inputs.ikat import load_ikat_topics

    source = ikat_file("2023", "2023_test_topics.json")
    [orig] = [p for p in load_ikat_topics(source) if p.id == "9-1"]
    gold = orig.topics[0].gold_turns[:3]
    turns = [turn(i, utterance=g.utterance, ptkb=g.ptkb_provenance, gold=g,
                  passages=[(d, True) for d in g.response_provenance]) for i, g in enumerate(gold, start=1)]
    run = write_run(tmp_path / "replay", [transcript(turns, persona="9-1", topic="9-1")],
                    config={"scenarios": {"topics": str(source)}})
    res = export_run(run, "ikat")
    [back] = load_ikat_topics(res.path)
    assert back.id == "9-1" and back.ptkb == orig.ptkb and back.topics[0].title == orig.topics[0].title
    assert [(g.turn_id, g.utterance, g.ptkb_provenance, g.response_provenance) for g in back.topics[0].gold_turns] == \
           [(g.turn_id, g.utterance, g.ptkb_provenance, g.response_provenance) for g in gold]


def test_ikat_numbers_stay_apart_for_repeats(run: Path):
    data = json.loads(export_run(run, "ikat").path.read_text())
    assert [t["number"] for t in data] == ["p1--t1--0", "p1--t1--1"]


def test_trec_and_ptkb_runs_parse_back(run: Path):
    res = export_run(run, "trec-run", filt=ExportFilter(repeat=0))
    assert res.path == run / "export.run" and res.rows == 4
    docs = list(ir_measures.read_trec_run(str(res.path)))
    assert [(d.query_id, d.doc_id) for d in docs] == [("t1_1", "d1"), ("t1_1", "d2"), ("t1_1", "d3"), ("t1_2", "d4")]
    assert all(line.split()[1] == "Q0" and line.split()[5] == "run-a" for line in res.path.read_text().splitlines())
    res = export_run(run, "ptkb-run", filt=ExportFilter(repeat=0))
    assert res.path == run / "export.ptkb.run"
    rows = [line.split() for line in res.path.read_text().splitlines()]
    assert [(r[0], r[2], r[3]) for r in rows] == [("t1_1", "3", "1"), ("t1_1", "1", "2"), ("t1_1", "2", "3")]
    scores = [float(r[4]) for r in rows]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3  # the ranking, whole, in order


def test_ptkb_run_keeps_the_order_when_scores_tie(tmp_path: Path):
    # a set classifier's ranking: chosen 3 and 1 at score 1, the rest at 0; trec_eval would
    # reorder ties by docid, so the export writes scores that fall with the rank
    t = transcript([turn(1, ptkb=[3, 1, 2, 4], ptkb_used=[3, 1])], persona="p1", topic="t1")
    for u in t.turns[0].assistant.ptkb_provenance:
        u.score = 1.0 if u.used else 0.0
    run = write_run(tmp_path / "run-t", [t], config={"scenarios": {"personas_dir": str(_personas(tmp_path))}})
    rows = [line.split() for line in export_run(run, "ptkb-run").path.read_text().splitlines()]
    assert [r[2] for r in rows] == ["3", "1", "2", "4"]
    scores = [float(r[4]) for r in rows]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 4
    docs = list(ir_measures.read_trec_run(str(run / "export.ptkb.run")))
    assert [d.doc_id for d in sorted(docs, key=lambda d: -d.score)] == ["3", "1", "2", "4"]


def test_trec_run_refuses_ambiguous_qids(run: Path):
    with pytest.raises(BadInputError, match="--repeat"):
        export_run(run, "trec-run")
    assert not (run / "export.run").exists()


def test_openai_chat_alternates(run: Path):
    res = export_run(run, "openai-chat")
    records = _jsonl(res.path)
    assert res.rows == len(records) == 2
    for rec in records:
        roles = [m["role"] for m in rec["messages"]]
        assert roles[0] == "system" and roles[1:] == ["user", "assistant"] * ((len(roles) - 1) // 2)
        assert validate_chat(rec["messages"]) is None
    system = records[0]["messages"][0]["content"]
    assert all(s in system for s in PTKB) and "quick to give up" in system and "chatty" in system
    assert records[0]["messages"][1]["content"] == "question 1?"


def test_validate_chat_rejects_broken_conversations():
    sys_msg = {"role": "system", "content": "s"}
    assert validate_chat([sys_msg, {"role": "user", "content": "u"}]) == "does not end with an assistant message"
    assert "expected 'user'" in validate_chat([sys_msg, {"role": "assistant", "content": "a"}])
    assert "empty" in validate_chat([sys_msg, {"role": "user", "content": "u"}, {"role": "assistant", "content": " "}])
    assert validate_chat([sys_msg]) == "has no turns"


def test_empty_answers_are_skipped_from_chat_data(tmp_path: Path):
    bad = transcript([turn(1, response=" ")], persona="p1", topic="t1", reason="error", by="engine")
    good = transcript([turn(1)], persona="p1", topic="t1", repeat=1)
    run = write_run(tmp_path / "r", [bad, good])  # no personas dir in run.json: cited PTKB only
    res = export_run(run, "sharegpt")
    assert res.rows == 1 and res.skipped == 1
    [rec] = _jsonl(res.path)
    assert rec["id"] == "p1--t1--1"
    assert [c["from"] for c in rec["conversations"]] == ["system", "human", "gpt"]
    assert any("cited statements only" in n for n in res.notes)


def test_parquet_one_row_per_turn(run: Path):
    res = export_run(run, "parquet")
    table = pq.read_table(res.path)
    assert res.rows == table.num_rows == 3
    rows = table.to_pylist()
    first = rows[0]
    assert (first["dialogue_id"], first["turn_index"], first["grade"], first["qid"]) == ("p1--t1--0", 1, 4.0, "t1_1")
    assert first["ptkb_indices"] == [3, 1] and first["rewritten_query"] == "cello Porto"  # the used ones
    assert first["passages"][0] == {"rank": 1, "docid": "d1", "score": 9.0, "used": True}
    assert {"run_id", "persona_id", "topic_id", "utterance", "response", "latency_ms", "prompt_tokens"} <= set(first)


def test_filters(run: Path):
    def dialogues(**kw) -> list[str]:
        res = export_run(run, "sharegpt", filt=ExportFilter(**kw))
        return [r["id"] for r in _jsonl(res.path)]

    assert dialogues(stop_reasons=["user_gave_up"]) == ["p1--t1--1"]
    assert dialogues(min_grade=4.5) == ["p1--t1--0"]  # mean of 4 and 5
    assert dialogues(min_turns=2) == ["p1--t1--0"]
    assert dialogues(topics=["t1"], repeat=1) == ["p1--t1--1"]
    assert dialogues(stop_reasons=["max_turns"]) == []  # a known reason no dialogue ended with


@pytest.mark.parametrize("flag,value,known", [
    ("--stop-reason", "satisfied", "known: user_satisfied, user_gave_up, max_turns, timeout, error"),
    ("--persona", "nobody", "known: p1)"),
    ("--topic", "t9", "known: t1)"),
])
def test_unknown_filter_values_exit_2_listing_the_known_ones(run: Path, capsys, flag, value, known):
    assert main(["export", str(run), "--format", "sharegpt", flag, value]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"unknown {flag} {value!r}" in err and known in err
    assert not (run / "export.sharegpt.jsonl").exists()


def test_min_judge_needs_and_uses_judge_scores(run: Path):
    with pytest.raises(BadInputError, match="eval .* --judge"):
        export_run(run, "sharegpt", filt=ExportFilter(min_judge=0.5))
    line = {"run_id": "r", "persona_id": "p1", "topic_id": "t1", "stop_reason": "user_satisfied", "turn_count": 1}
    lines = [{**line, "dialogue_id": "p1--t1--0", "judge": {"overall": 0.0}},
             {**line, "dialogue_id": "p1--t1--1", "judge": {"overall": None}}]
    (run / "scores.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = export_run(run, "sharegpt", filt=ExportFilter(min_judge=0.0))  # a zero score passes 0; unjudged never
    assert [r["id"] for r in _jsonl(res.path)] == ["p1--t1--0"]
    assert export_run(run, "sharegpt", filt=ExportFilter(min_judge=0.1)).rows == 0


def test_failure_leaves_nothing_half_written(tmp_path: Path):
    run = write_run(tmp_path / "r", _dialogues())  # run.json names no scenario source
    with pytest.raises(DataFileError, match="--personas"):
        export_run(run, "ikat")
    assert sorted(p.name for p in run.iterdir()) == ["dialogues.jsonl", "run.json"]


def test_cli_export_prints_rows_and_path(run: Path, tmp_path: Path, capsys):
    out = tmp_path / "chat.jsonl"
    assert main(["export", str(run), "--format", "openai-chat", "--out", str(out), "--min-turns", "2"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    # what the filters left out is counted, by flag (it said "1 dialogues from 1 dialogues")
    assert printed[-1] == str(out)
    assert printed[-2] == "1 dialogues from 1 of the run's 2 dialogues (1 filtered out: 1 by --min-turns)"
    assert len(_jsonl(out)) == 1
    assert main(["export", str(run), "--format", "ikat", "--stop-reason", "user_satisfied"]) == 0
    assert (run / "export.json").exists()
    assert main(["export", str(run), "--format", "sharegpt", "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-2] == "2 dialogues from 2 dialogues"  # nothing filtered out


def test_each_left_out_dialogue_is_counted_once_under_the_first_flag_that_drops_it(run: Path):
    res = export_run(run, "sharegpt", filt=ExportFilter(min_turns=2, min_grade=4.5, stop_reasons=["user_gave_up"]))
    # p1--t1--0 ends satisfied (--stop-reason); p1--t1--1 has one turn, mean grade 1 (--min-grade first)
    assert res.dialogues == 0 and res.read == 2 and res.filtered == {"--stop-reason": 1, "--min-grade": 1}
    assert res.summary() == ("0 dialogues from 0 of the run's 2 dialogues "
                             "(2 filtered out: 1 by --stop-reason, 1 by --min-grade)")


@pytest.mark.parametrize("argv", [
    ["--format", "csv"],
    ["--format", "ikat", "--min-turns", "-1"],
])
def test_cli_bad_input_exit_2_one_line(run: Path, argv, capsys):
    assert main(["export", str(run), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("simloop: error:")


def test_cli_bad_run_dir_exit_2_one_line(tmp_path: Path, capsys):
    assert main(["export", str(tmp_path / "missing"), "--format", "parquet"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(empty), "--format", "parquet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dialogues.jsonl" in err


def test_gold_turn_ids_name_the_qids(tmp_path: Path):
    g = GoldTurn(turn_id=7, utterance="u")
    run = write_run(tmp_path / "r", [transcript([turn(1, passages=["d1"], gold=g)], persona="0", topic="0")])
    assert export_run(run, "trec-run").path.read_text().split()[0] == "0_7"


def test_trec_run_keeps_the_runs_order_under_trec_eval(tmp_path: Path):
    # 4.711400 and 4.711399 are distinct in the run; written as 4.7114 both they would tie and
    # trec_eval would put "b" (the higher docid) first: nDCG@1 of the relevant "a" would be 0
    t = transcript([turn(1, passages=["a", "b", "c"]), turn(2, passages=["x", "y"])], persona="p1", topic="t1")
    for p, score in zip(t.turns[0].assistant.passages, (4.7114, 4.711399, 1.5)):
        p.score = score
    t.turns[1].assistant.passages[0].score = t.turns[1].assistant.passages[1].score = 2.0  # a real tie
    run = write_run(tmp_path / "run-tie", [t])
    res = export_run(run, "trec-run")
    qrels = [ir_measures.Qrel("t1_1", "a", 1), ir_measures.Qrel("t1_2", "x", 1)]
    per = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ 1], qrels,
                                                               list(ir_measures.read_trec_run(str(res.path))))}
    assert per == {"t1_1": 1.0, "t1_2": 1.0}  # what `simloop eval` scores: the run's own order
    rows = [line.split() for line in res.path.read_text().splitlines()]
    assert [r[4] for r in rows[:3]] == ["4.7114", "4.711399", "1.5"]  # falling scores kept, in full
    assert [r[4] for r in rows[3:]] == ["2.0", "1.0"]  # the tie became rank-based scores
    assert any("tie or rise" in n for n in res.notes)


@pytest.mark.parametrize("bad", ["nope", "badtoml"])
def test_a_bad_personas_flag_exits_2_naming_it(run: Path, tmp_path: Path, capsys, bad):
    """--personas given and unusable: not a quiet fall-back to cited PTKB (nor the run's own
    personas), but exit 2 naming the path; nothing written."""
    path = tmp_path / bad
    if bad == "badtoml":
        path.mkdir()
        (path / "p.toml").write_text('id = "p1\n')
    assert main(["export", str(run), "--format", "openai-chat", "--personas", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("simloop: error: --personas ") and str(path) in err
    assert not (run / "export.openai.jsonl").exists()


def test_export_notes_go_to_stderr(tmp_path: Path, capsys):
    bad = transcript([turn(1, response=" ")], persona="p1", topic="t1", reason="error", by="engine")
    run = write_run(tmp_path / "r", [bad, transcript([turn(1)], persona="p1", topic="t1", repeat=1)])
    assert main(["export", str(run), "--format", "sharegpt"]) == 0
    printed = capsys.readouterr()
    assert "note:" not in printed.out and printed.out.strip().splitlines()[-1] == str(run / "export.sharegpt.jsonl")
    assert "note: PTKB from cited statements only" in printed.err and "note: skipped p1--t1--0" in printed.err


def test_repeat_is_counted_from_0_in_help_and_filter(run: Path, capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "counted from 0" in " ".join(capsys.readouterr().out.split())
    assert export_run(run, "parquet", filt=ExportFilter(repeat=0)).dialogues == 1  # p1--t1--0, not --1


def test_a_copied_run_finds_its_sources_by_the_tails_of_their_recorded_paths(tmp_path):
    """run.json records input paths absolute; a run copied to another checkout still finds
    its personas and topic file there (export falls back to cited statements otherwise)."""
    from simloop.evaluate.summary import resolve_source

    repo, run = tmp_path / "new" / "simloop", tmp_path / "new" / "simloop" / "transcripts" / "r"
    run.mkdir(parents=True)
    (repo / "personas").mkdir()
    topics = tmp_path / "new" / "shared" / "data" / "t.json"
    topics.parent.mkdir(parents=True)
    topics.write_text("[]")
    assert resolve_source("/gone/old/simloop/personas", run) == repo / "personas"
    assert resolve_source("/gone/old/shared/data/t.json", run) == topics
    assert resolve_source("/gone/old/nothing/here.json", run) is None
    assert resolve_source(repo / "personas", run) == repo / "personas"  # present: as recorded
