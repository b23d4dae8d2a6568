"""`simloop export --format ikat25-run`: every rule of the iKAT 2025 run format, checked on
what the export writes and, through ``validate_ikat25``, on hand-made broken lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simloop.cli import main
from simloop.errors import BadInputError
from simloop.evaluate import ExportFilter, RunTag, export_run
from simloop.evaluate.export_ikat25 import MAX_REFERENCES, response_words, trim_words, validate_ikat25
from simloop.inputs.ikat import load_ikat_topics
from simloop.schema import Passage, PtkbUse
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ikat_file
from tests.helpers.runs import PTKB, transcript, turn, write_run

# A made-up conversation in the 2025 schema (no 2025 file ships with the data).
TOPICS_2025 = [{
    "number": "1-1", "title": "Cello lessons",
    "ptkb": ["I live in Porto.", "I play the cello.", "I have a dog."],
    "responses": [
        {"turn_id": 1, "user_utterance": "Where can I learn the cello?",
         "resolved_utterance": "Where can I learn the cello in Porto?", "response": "Try the conservatory.",
         "relevant_ptkbs": ["I live in Porto."], "citations": ["clueweb22-en0001-02-00003:1"]},
        {"turn_id": 2, "user_utterance": "How much?", "resolved_utterance": "How much do cello lessons cost in Porto?",
         "response": "About 30 euros.", "relevant_ptkbs": [], "citations": []},
    ],
}]


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _replay_run(tmp_path: Path, source: Path, *, conversations: int | None = None, drop_last: bool = False,
                response=lambda g: f"An answer to {g.utterance}") -> Path:
    """A run directory as `simloop run --simulator replay --topics source` writes it: one
    dialogue per conversation, one turn per gold turn, provenance from the gold."""
    ts = []
    for persona in load_ikat_topics(source)[:conversations]:
        gold = persona.topics[0].gold_turns[:-1] if drop_last and not ts else persona.topics[0].gold_turns
        turns = [turn(i, utterance=g.utterance, response=response(g), gold=g, ptkb=g.ptkb_provenance or [1],
                      passages=[(d, True) for d in g.response_provenance] + ["clueweb22-en0000-00-00000:0"])
                 for i, g in enumerate(gold, start=1)]
        ts.append(transcript(turns, persona=persona.id, topic=persona.id))
    return write_run(tmp_path / f"replay-{source.stem}", ts, config={"scenarios": {"topics": str(source)}})


def _topic_files(tmp_path: Path) -> list[Path]:
    y2025 = tmp_path / "2025_topics.json"
    y2025.write_text(json.dumps(TOPICS_2025))
    return [ikat_file("2023", "2023_train_topics.json"), ikat_file("2024", "2024_test_topics.json"), y2025]


def test_replays_of_2023_2024_2025_topic_files_export_cleanly(tmp_path: Path):
    files = _topic_files(tmp_path)
    for source in files:
        run = _replay_run(tmp_path, source)
        res = export_run(run, "ikat25-run", tag=RunTag(team_id="uva", run_id="bm25-run", run_type="manual"))
        topics = load_ikat_topics(source)
        want = [f"{p.id}_{g.turn_id}" for p in topics for g in p.topics[0].gold_turns]
        lines = res.path.read_text().splitlines()
        assert res.path == run / "export.ikat25.jsonl" and res.rows == len(lines) == len(want)
        assert validate_ikat25(lines, want).ok
        rows = [json.loads(x) for x in lines]
        assert [r["turn_id"] for r in rows] == want  # one line per turn, in topic-file order
        metadata = '{"team_id": "uva", "run_id": "bm25-run", "run_type": "manual"}'
        assert {json.dumps(r["metadata"]) for r in rows} == {metadata}
        first = rows[0]["responses"][0]
        assert first["rank"] == 1 and first["text"].startswith("An answer to")
        assert set(first["citations"]) <= set(rows[0]["references"])


def test_defaults_statements_and_citations(tmp_path: Path):
    source = _topic_files(tmp_path)[-1]
    run = _replay_run(tmp_path, source)
    [row, _] = _lines(export_run(run, "ikat25-run").path)
    assert row["metadata"] == {"team_id": "simloop", "run_id": "run-a", "run_type": "automatic"}
    assert row["turn_id"] == "1-1_1"
    # statement texts of the PTKB (2025 style), passage ids as the index has them
    assert row["responses"][0]["ptkb_provenance"] == [PTKB[0]]  # the statement the assistant used
    assert list(row["references"]) == ["clueweb22-en0001-02-00003:1", "clueweb22-en0000-00-00000:0"]
    assert row["responses"][0]["citations"] == {"clueweb22-en0001-02-00003:1": 9.0}


def test_only_used_statements_go_in(tmp_path: Path):
    source = _topic_files(tmp_path)[-1]
    g = load_ikat_topics(source)[0].topics[0].gold_turns
    ranked = [PtkbUse(index=2, statement="I play the cello.", score=0.9, used=True),
              PtkbUse(index=1, statement="I live in Porto.", score=0.5, used=False),
              PtkbUse(index=3, statement="I have a dog.", score=0.1)]  # written before `used`: counts as used
    turns = [turn(1, gold=g[0]), turn(2, gold=g[1])]
    turns[0].assistant.ptkb_provenance = ranked
    run = write_run(tmp_path / "r", [transcript(turns, persona="1-1", topic="1-1")],
                    config={"scenarios": {"topics": str(source)}})
    row = _lines(export_run(run, "ikat25-run").path)[0]
    assert row["responses"][0]["ptkb_provenance"] == ["I play the cello.", "I have a dog."]


def test_long_responses_are_trimmed_from_the_end_and_said(tmp_path: Path):
    source = _topic_files(tmp_path)[-1]
    long = " ".join(f"Sentence {i} has exactly six words." for i in range(60))  # 360 words
    run = _replay_run(tmp_path, source, response=lambda g: long)
    res = export_run(run, "ikat25-run")
    texts = [r["responses"][0]["text"] for r in _lines(res.path)]
    # whole sentences
    assert all(response_words(t) == 246 and long.startswith(t) and t.endswith("words.") for t in texts)
    assert any("trimmed 2 response(s)" in n for n in res.notes)


def test_word_count_is_nfkc_then_whitespace():
    assert response_words("caf\u00e9 \ufb01ne") == 2
    assert response_words("a\u00a8b") == 2  # NFKC turns the diaeresis into a space plus a combining mark
    one_long_sentence = "word " * 300
    cut = trim_words(one_long_sentence.strip())
    assert response_words(cut) == 250 and cut == " ".join(["word"] * 250)
    nfkc = " ".join(["x\u00a8y"] * 200)  # 200 whitespace words, 400 after NFKC
    assert response_words(trim_words(nfkc)) <= 250 and response_words(trim_words(nfkc)) >= 249


def test_references_deduplicated_capped_and_best_first(tmp_path: Path):
    source = _topic_files(tmp_path)[-1]
    g = load_ikat_topics(source)[0].topics[0].gold_turns
    t1 = turn(1, gold=g[0])
    # 1,005 passages, a repeated id, scores out of rank order (a fused list), the last one cited
    ps = [Passage(rank=r, docid=f"doc{r % 1003}", score=float(r % 7), used=(r == 1002)) for r in range(1, 1006)]
    t1.assistant.passages = ps
    t = transcript([t1, turn(2, gold=g[1], passages=["a", "b"])], persona="1-1", topic="1-1")
    run = write_run(tmp_path / "r", [t], config={"scenarios": {"topics": str(source)}})
    res = export_run(run, "ikat25-run")
    row, row2 = _lines(res.path)
    refs = list(row["references"].items())
    assert len(refs) == MAX_REFERENCES and len({k for k, _ in refs}) == MAX_REFERENCES
    assert [k for k, _ in refs[:3]] == ["doc1", "doc2", "doc3"]  # rank order kept
    assert all(a[1] >= b[1] for a, b in zip(refs, refs[1:]))  # scores never increase
    assert row["responses"][0]["citations"] == {}  # the cited passage fell beyond the cap
    assert list(row2["references"].values()) == [9.0, 8.0]  # in-order scores pass through
    assert any("out of rank order" in n for n in res.notes) and any("best 1000" in n for n in res.notes)


def test_validator_finds_every_broken_rule():
    good = {"metadata": {"team_id": "t", "run_id": "r", "run_type": "automatic"}, "turn_id": "1-1_1",
            "responses": [{"rank": 1, "text": "ok", "citations": {"clueweb22-en0001-02-00003:1": 2.0},
                           "ptkb_provenance": []}],
            "references": {"clueweb22-en0001-02-00003:1": 2.0, "clueweb22-en0001-02-00003:2": 1.0}}
    line = json.dumps(good)
    assert validate_ikat25([line], ["1-1_1"]).errors == []

    def errors(mutate=None, text=None, expected=("1-1_1",)) -> str:
        entry = json.loads(line)
        if mutate:
            mutate(entry)
        return " | ".join(validate_ikat25([text or json.dumps(entry)], list(expected)).errors)

    assert "run_type" in errors(lambda e: e["metadata"].update(run_type="interactive"))
    assert "team_id" in errors(lambda e: e["metadata"].pop("team_id"))
    assert "ptkb_provenance" in errors(lambda e: e["responses"][0].pop("ptkb_provenance"))
    assert "citations" in errors(lambda e: e["responses"][0].pop("citations"))
    assert "not in references" in errors(lambda e: e["responses"][0]["citations"].update(other=1.0))
    assert "best first" in errors(lambda e: e.update(references={"a": 1.0, "b": 2.0}))
    assert "at most 1000" in errors(lambda e: e.update(references={f"d{i}": 1.0 for i in range(1001)}))
    assert "words" in errors(lambda e: e["responses"][0].update(text="w " * 251))
    assert "words" in errors(lambda e: e["responses"].append({**e["responses"][0], "rank": 2, "text": "w " * 250}))
    twice = line.replace('"references": {', '"references": {"clueweb22-en0001-02-00003:2": 3.0, ')
    assert "duplicate key" in errors(text=twice)
    assert "have no line" in errors(expected=("1-1_1", "1-1_2"))
    assert "not in the topic file" in errors(expected=())
    assert "repeats line 1" in " ".join(validate_ikat25([line, line], ["1-1_1"]).errors)
    assert validate_ikat25([json.dumps({**good, "references": {"d": 1.0}, "responses": [
        {**good["responses"][0], "citations": {}}]})], ["1-1_1"]).warnings  # not ClueWeb: a warning only


def test_incomplete_or_repeated_replays_are_refused(tmp_path: Path):
    source = _topic_files(tmp_path)[-1]
    run = _replay_run(tmp_path, source, drop_last=True)
    with pytest.raises(BadInputError, match="1 of 2 turns .* no answer .*first: 1-1_2, its dialogue ended early"):
        export_run(run, "ikat25-run")
    g = load_ikat_topics(source)[0].topics[0].gold_turns
    twice = [transcript([turn(1, gold=g[0]), turn(2, gold=g[1])], persona="1-1", topic="1-1", repeat=r) for r in (0, 1)]
    run = write_run(tmp_path / "twice", twice, config={"scenarios": {"topics": str(source)}})
    with pytest.raises(BadInputError, match="--repeat K"):
        export_run(run, "ikat25-run")
    assert export_run(run, "ikat25-run", filt=ExportFilter(repeat=1)).rows == 2
    assert not (tmp_path / "replay-2025_topics" / "export.ikat25.jsonl").exists()


def test_cli_not_a_replay_and_bad_flags_exit_2_one_line(tmp_path: Path, capsys):
    personas_run = write_run(tmp_path / "personas-run", [transcript([turn(1)])],
                             config={"scenarios": {"personas_dir": "p"}})
    source = _topic_files(tmp_path)[-1]
    replay = _replay_run(tmp_path, source)
    cases = [
        ([str(personas_run), "--format", "ikat25-run"], "not a replay of an iKAT topic file"),
        ([str(replay), "--format", "ikat25-run", "--run-type", "interactive"], "automatic, manual, generation-only"),
        ([str(replay), "--format", "ikat25-run", "--team-id", " "], "--team-id"),
    ]
    for argv, message in cases:
        assert main(["export", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in personas_run.iterdir()) == ["dialogues.jsonl", "run.json"]
    assert main(["export", str(replay), "--format", "ikat25-run", "--team-id", "uva", "--run-id", "r1"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == str(replay / "export.ikat25.jsonl") and "2 turns from 1 dialogues" in out[-2]
    assert _lines(replay / "export.ikat25.jsonl")[0]["metadata"]["run_id"] == "r1"


def test_a_replay_limited_to_part_of_the_topic_file_says_so(tmp_path: Path):
    """`run --limit 2` replays 2 conversations: resuming or dropping filters brings no more,
    so the refusal says the run was limited and needs a full replay (end to end)."""
    source = ikat_file("2024", "2024_test_topics.json")
    run = simloop_cli("run", "--simulator", "replay", "--topics", source, "--limit", "2", "--out", tmp_path,
                      "--run-id", "l2", "--no-progress")
    assert run.returncode == 0, run.stderr
    p = simloop_cli("export", tmp_path / "l2", "--format", "ikat25-run")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "covers only 2 of the topic file's 17 conversations" in p.stderr and "scenarios.limit = 2" in p.stderr
    assert "full replay" in p.stderr and "--retry-errors" not in p.stderr and "filters" not in p.stderr
    assert not (tmp_path / "l2" / "export.ikat25.jsonl").exists()
