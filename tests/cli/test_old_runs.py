"""A run directory written before the closing line and error sources existed (the farewell
was a turn the assistant answered, ``stop`` had no ``utterance``, ``error`` no ``source``)
still reads with `show`, `eval` and `report`."""

from __future__ import annotations

import json
from pathlib import Path

from simloop.cli import main
from simloop.run import read_transcripts

_TURN = {"index": 1, "user": {"utterance": "What is a marathon?", "rubric_id": "q1", "grade": 4.0, "intent": "ask"},
         "assistant": {"response": "A 42 km race.", "passages": [{"rank": 1, "docid": "Marathon", "score": 9.1,
                                                                   "used": True}],
                       "ptkb_provenance": [{"index": 1, "statement": "I run.", "score": 0.7}],
                       "context": {"strategy": "none", "tokens": 0}},
         "stages": [{"name": "retrieve", "latency_ms": 2.0}], "latency_ms": 5.0}
_FAREWELL = {"index": 2, "user": {"utterance": "Thanks, bye!", "intent": "farewell"},
             "assistant": {"response": "Passages about pensions.", "context": {"strategy": "none", "tokens": 0}},
             "stages": [], "latency_ms": 3.0}
_COMMON = {"schema_version": "1.0", "run_id": "old", "simulator": {"name": "offline", "params": {}},
           "assistant": {"name": "bm25_extractive", "params": {}},
           "started_at": "2025-06-01T10:00:00Z", "ended_at": "2025-06-01T10:00:02Z",
           "usage": {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "retries": 0}}


def _old_run(root: Path) -> Path:
    run = root / "old"
    run.mkdir()
    scenario = {"persona_id": "p1", "topic_id": "t1", "seed": 1,
                "behaviour": {"patience": 3, "cooperativeness": 0.8, "language_skill": 1.0, "verbosity": 0.5,
                              "reveal": "relevant"}}
    lines = [
        {**_COMMON, "dialogue_id": "p1--t1--0", "scenario": scenario, "turns": [_TURN, _FAREWELL],
         "stop": {"reason": "user_satisfied", "by": "simulator", "detail": "answered 1/1"}},
        {**_COMMON, "dialogue_id": "p1--t2--0", "scenario": {**scenario, "topic_id": "t2"}, "turns": [],
         "stop": {"reason": "error", "by": "engine", "detail": "ValueError: boom"},
         "error": {"type": "ValueError", "message": "boom"}},
    ]
    (run / "dialogues.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run / "run.json").write_text(json.dumps({
        "schema_version": "1.0", "run_id": "old", "config": {}, "config_hash": "0" * 16,
        "simulator": {"name": "offline", "params": {}}, "assistant": {"name": "bm25_extractive", "params": {}},
        "versions": {}, "started_at": "2025-06-01T10:00:00Z", "finished_at": "2025-06-01T10:01:00Z",
        "status": "finished", "counts": {"scenarios": 2, "dialogues": 2}}))
    return run


def test_an_old_run_still_shows_evaluates_and_reports(tmp_path, capsys):
    run = _old_run(tmp_path)
    ok, failed = list(read_transcripts(run))
    assert ok.stop.utterance is None and failed.error.source is None  # absent fields read as null
    assert ok.turns[0].assistant.ptkb_provenance[0].used is True  # before `used`: what was listed was used
    assert main(["show", str(run)]) == 0
    assert main(["show", str(run), "--dialogue", "p1--t1--0"]) == 0
    assert "Thanks, bye!" in capsys.readouterr().out  # the old farewell turn is shown as it was
    assert main(["eval", str(run)]) == 0
    stats = json.loads((run / "summary.json").read_text())["stats"]
    assert stats["dialogues"] == 2 and stats["turns"]["total"] == 2 and stats["stop_reasons"]["error"] == 1
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 0
    assert "old" in (tmp_path / "r.html").read_text()
