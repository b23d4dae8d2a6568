"""What eval, report and export say about the evaluation they show: a summary.json older
than the run's transcripts (a resume since `simloop eval`), the gold it was scored against,
its turn counts, and start-up turns per session."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from eval_helpers import T0, transcript, turn, write_run
from simloop.cli import main
from simloop.evaluate.diagnostics import diagnose
from simloop.evaluate.report import load_views
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.evaluate.tables import compare_rows
from simloop.schema import GoldTurn


def _dialogue(i: int, gold: list[int] | None = (1,), grade: float = 4.0):
    g = GoldTurn(turn_id=1, utterance="u", ptkb_provenance=list(gold)) if gold is not None else None
    return transcript([turn(1, ptkb=[1, 2], grade=grade, gold=g)], persona="9-1", topic="9-1", repeat=i)


def _append(run: Path, *ts) -> None:
    with (run / "dialogues.jsonl").open("a") as fh:
        fh.writelines(t.model_dump_json() + "\n" for t in ts)


def _row(html: str, label: str) -> str:
    return html.split(f"<td>{label}</td>", 1)[1].split("</tr>", 1)[0]


def test_ptkb_judged_turns_are_summary_json_judged_turns(tmp_path: Path):
    # two turns with gold, one of them with no relevant statement: judged 2, scored 1
    run = write_run(tmp_path / "judged-turns", [_dialogue(0), _dialogue(1, gold=[])])
    write_evaluation(run, evaluate_run(run, EvalOptions()))
    summary = json.loads((run / "summary.json").read_text())["ptkb"]
    assert (summary["judged_turns"], summary["turns"]) == (2, 1)
    (view,) = load_views([run])
    rows = {r.label: r.values for r in compare_rows([view.summary], [view.diag])}
    assert rows["ptkb judged turns"] == [2] and rows["ptkb scored turns (a relevant statement)"] == [1]
