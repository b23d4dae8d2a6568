"""What eval, report and export say about the evaluation they show: a summary.json older
than the run's transcripts (a resume since `simloop eval`), the gold it was scored against,
its turn counts, and start-up turns per session."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from simloop.cli import main
from simloop.evaluate.diagnostics import diagnose
from simloop.evaluate.report import load_views
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.evaluate.tables import compare_rows
from simloop.schema import GoldTurn
from tests.helpers.runs import T0, transcript, turn, write_run


def _dialogue(i: int, gold: list[int] | None = (1,), grade: float = 4.0):
    g = GoldTurn(turn_id=1, utterance="u", ptkb_provenance=list(gold)) if gold is not None else None
    return transcript([turn(1, ptkb=[1, 2], grade=grade, gold=g)], persona="9-1", topic="9-1", repeat=i)


def _append(run: Path, *ts) -> None:
    with (run / "dialogues.jsonl").open("a") as fh:
        fh.writelines(t.model_dump_json() + "\n" for t in ts)


def _row(html: str, label: str) -> str:
    return html.split(f"<td>{label}</td>", 1)[1].split("</tr>", 1)[0]


def test_report_scores_again_a_summary_older_than_the_transcripts(tmp_path: Path, capsys):
    run = write_run(tmp_path / "stale", [_dialogue(0)])
    qrels = tmp_path / "ptkb_rel_nist"
    qrels.write_text("9-1_1 0 2 1\n")
    assert main(["eval", str(run), "--ptkb-qrels", str(qrels)]) == 0
    _append(run, *(_dialogue(i) for i in range(1, 6)))  # what a --resume adds
    capsys.readouterr()

    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert "summary.json is out of date (it evaluated 1 dialogue(s), dialogues.jsonl now holds 6)" in err
    html = (run / "report.html").read_text()
    assert "<td class=num>6</td>" in _row(html, "dialogues")  # the side-by-side table counts all six
    assert "summary.json out of date" in html and "out of date" in html.split('<section id="compare">')[0]
    # scored again against the gold file the last `simloop eval` used, not the topic file
    assert "ptkb_rel_nist" in _row(html, "ptkb gold") and "<td class=num>0.6309</td>" in _row(html, "ptkb nDCG@3")
    assert json.loads((run / "summary.json").read_text())["stats"]["dialogues"] == 1  # nothing written


def test_a_changed_dialogue_makes_the_summary_stale_too(tmp_path: Path, capsys):
    # --retry-errors replaces dialogues: the count stays, the file does not
    run = write_run(tmp_path / "retried", [_dialogue(0, grade=1.0), _dialogue(1)])
    write_evaluation(run, evaluate_run(run, EvalOptions()))
    (run / "dialogues.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in (_dialogue(0), _dialogue(1))))
    (view,) = load_views([run])
    assert view.stale and "dialogues.jsonl changed" in view.stale and view.summary.stats.grades.mean == 4.0
    write_evaluation(run, evaluate_run(run, EvalOptions()))
    (view,) = load_views([run])
    assert view.stale is None and not view.evaluated_now


def test_export_min_judge_refuses_scores_older_than_the_run(tmp_path: Path, capsys):
    run = write_run(tmp_path / "judged", [_dialogue(0), _dialogue(1)])
    write_evaluation(run, evaluate_run(run, EvalOptions()))
    line = {"run_id": "run-a", "persona_id": "9-1", "topic_id": "9-1", "stop_reason": "user_satisfied",
            "turn_count": 1, "judge": {"overall": 0.9}}
    (run / "scores.jsonl").write_text("".join(json.dumps({**line, "dialogue_id": f"9-1--9-1--{i}"}) + "\n"
                                              for i in range(2)))
    assert main(["export", str(run), "--format", "sharegpt", "--min-judge", "0.5"]) == 0
    _append(run, _dialogue(2))
    capsys.readouterr()
    assert main(["export", str(run), "--format", "sharegpt", "--min-judge", "0.5", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "scores.jsonl is out of date" in err and f"simloop eval {run} --judge" in err
    assert not (tmp_path / "x").exists()
    (run / "summary.json").unlink()  # scores.jsonl alone: a dialogue without scores tells
    assert main(["export", str(run), "--format", "sharegpt", "--min-judge", "0.5", "--out", str(tmp_path / "x")]) == 2
    assert "1 dialogue(s) of the run have no scores, e.g. 9-1--9-1--2" in capsys.readouterr().err


def test_ptkb_judged_turns_are_summary_json_judged_turns(tmp_path: Path):
    # two turns with gold, one of them with no relevant statement: judged 2, scored 1
    run = write_run(tmp_path / "judged-turns", [_dialogue(0), _dialogue(1, gold=[])])
    write_evaluation(run, evaluate_run(run, EvalOptions()))
    summary = json.loads((run / "summary.json").read_text())["ptkb"]
    assert (summary["judged_turns"], summary["turns"]) == (2, 1)
    (view,) = load_views([run])
    rows = {r.label: r.values for r in compare_rows([view.summary], [view.diag])}
    assert rows["ptkb judged turns"] == [2] and rows["ptkb scored turns (a relevant statement)"] == [1]


def test_eval_and_report_name_the_gold(tmp_path: Path, capsys):
    topic_gold = write_run(tmp_path / "topic-gold", [_dialogue(0)],
                           config={"scenarios": {"topics": "2023_test_topics.json"}})
    assert main(["eval", str(topic_gold)]) == 0
    out = capsys.readouterr().out
    assert "gold" in out and "topic file 2023_test_topics.json" in out
    assert "scored against the NIST PTKB qrels, this run against topic file 2023_test_topics.json" in out
    nist = write_run(tmp_path / "nist-gold", [_dialogue(0)])
    qrels = tmp_path / "ptkb_rel_nist"
    qrels.write_text("9-1_1 0 1 1\n")
    assert main(["eval", str(nist), "--ptkb-qrels", str(qrels)]) == 0
    assert "this run against ptkb_rel_nist" in capsys.readouterr().out
    assert json.loads((nist / "summary.json").read_text())["ptkb"]["gold"] == "ptkb_rel_nist"

    assert main(["report", str(topic_gold), str(nist), "--out", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "topic file 2023_test_topics.json" in _row(html, "ptkb gold") and "ptkb_rel_nist" in _row(html, "ptkb gold")
    assert "PTKB metrics were scored against different gold" in html
    assert "this run against ptkb_rel_nist" in html.split('<section id="reference">')[1]


def test_each_session_has_its_start_up_turns(tmp_path: Path):
    # a run interrupted after its first dialogue and resumed an hour later: both sessions
    # load the index and models again, so both first turns are start-up turns
    first = transcript([turn(1, latency_ms=30_000.0), turn(2, latency_ms=100.0)], persona="p0", seconds=31.0)
    resumed = [transcript([turn(1, latency_ms=30_000.0 if i == 0 else 100.0), turn(2, latency_ms=100.0)],
                          persona=f"p{i + 1}", seconds=31.0 if i == 0 else 1.0) for i in range(3)]
    start = T0 + timedelta(hours=1)
    for i, t in enumerate(resumed):  # one at a time, each as the previous ends
        t.started_at = start + timedelta(seconds=31 + i - 1 if i else 0)
        t.ended_at = t.started_at + timedelta(seconds=31.0 if i == 0 else 1.0)
    d = diagnose([first, *resumed])
    assert d.startup_turns == [30_000.0, 30_000.0] and max(d.warm_turns) == 100.0
    run = write_run(tmp_path / "resumed", [first, *resumed])
    html = (tmp_path / "r.html")
    assert main(["report", str(run), "--out", str(html)]) == 0
    text = html.read_text()
    assert "<td class=num>2</td>" in _row(text, "start-up turns (excluded)")
    assert "dialogue latency p50 ms (start-up wait excluded)" in text
    assert "summary.json and `simloop eval` count" in text
