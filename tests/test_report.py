"""`simloop report`: one self-contained HTML file comparing runs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from eval_helpers import transcript, turn, write_run
from simloop.cli import main
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.schema import GoldTurn, Stage


def _run(tmp_path: Path, run_id: str, grades: list[float], reason: str = "user_satisfied") -> Path:
    stages = [Stage(name="assistant.generate", model="m", prompt_tokens=100, completion_tokens=20, role="assistant")]
    ts = [transcript([turn(i, grade=g, ptkb=[1], stages=stages, latency_ms=50.0 * i,
                           gold=GoldTurn(turn_id=i, utterance="u", ptkb_provenance=[1]))
                      for i, g in enumerate(grades, start=1)],
                     run_id=run_id, persona="9-1", topic="9-1", repeat=r, reason=reason)
          for r in range(2)]
    return write_run(tmp_path / run_id, ts)


def test_report_html_is_self_contained_and_names_both_runs(tmp_path: Path, capsys):
    a = _run(tmp_path, "run-alpha", [4, 5])
    b = _run(tmp_path, "run-beta", [1, 2, 3], reason="user_gave_up")
    write_evaluation(a, evaluate_run(a, EvalOptions()))  # one evaluated run, one evaluated on the fly
    memory = {"run_id": "run-beta", "distances": [5, 10, 20], "reveal_turn": 2,
              "strategies": {"full": {"recall_by_distance": {"5": 0.9, "10": 0.8, "20": 0.5}, "tokens_per_turn": 900},
                             "window": {"recall_by_distance": {"5": 0.7, "10": 0.3, "20": 0.1}, "tokens_per_turn": 300}}}
    (b / "memory.json").write_text(json.dumps(memory))

    assert main(["report", str(a), str(b)]) == 0
    out = a / "report.html"
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "run-alpha" in html and "run-beta" in html
    # self-contained: no fetched asset of any kind; the plots are inline PNGs that decode
    assert 'src="http' not in html and "<script" not in html and "<link" not in html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) >= 5 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "memory stress test" in html and "recall @ 20" in html
    assert "evaluated now (no judge)" in html and "summary.json" in html
    assert "2023 baseline" in html and "0.3434" in html
    assert not (b / "summary.json").exists()  # the report never writes into the runs it reads
    terminal = capsys.readouterr().out
    assert "runs side by side" in terminal and "run-alpha" in terminal and "memory stress test" in terminal


def test_report_out_flag_and_bad_memory_file(tmp_path: Path, capsys):
    a = _run(tmp_path, "run-one", [3])
    (a / "memory.json").write_text("{not json")
    target = tmp_path / "cmp.html"
    assert main(["report", str(a), "--out", str(target)]) == 0
    html = target.read_text()
    assert "run-one" in html and "could not be read" in html
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_report_of_same_run_twice_keeps_columns_apart(tmp_path: Path):
    a = _run(tmp_path, "run-same", [3])
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in a.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert main(["report", str(a), str(copy), "--out", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert f"run-same ({a})" in html and f"run-same ({copy})" in html
