"""The report as a reader sees it: rendered by headless Chromium (the Debian package),
every section and plot present and decoded, no console error; and the checker itself
catches a broken plot and a failed load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from simloop.evaluate.report import load_views, write_report
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.schema import GoldTurn, Stage
from tests.helpers.data import ROOT
from tests.helpers.runs import transcript, turn, write_run

sys.path.insert(0, str(ROOT / "scripts"))
import report_browser  # scripts/ is not a package

pytestmark = [pytest.mark.skipif(report_browser.chromium() is None,
                                 reason="chromium not installed (apt-get install -y chromium)"),
              pytest.mark.timeout(180)]


def _run(tmp_path: Path, run_id: str, grade: float, reason: str) -> Path:
    stages = [Stage(name="assistant.generate", model="m", prompt_tokens=100, completion_tokens=20)]
    ts = [transcript([turn(i, grade=grade, ptkb=[1, 2], stages=stages, latency_ms=40.0 * i,
                           passages=[("d1", True), "d2"], gold=GoldTurn(turn_id=i, utterance="u", ptkb_provenance=[1]))
                      for i in range(1, 4)], run_id=run_id, persona=p, topic=p, reason=reason)
          for p in ("9-1", "9-2")]
    return write_run(tmp_path / run_id, ts)


def test_every_section_and_plot_renders_without_console_errors(tmp_path: Path):
    a = _run(tmp_path, "run-a", 4.0, "user_satisfied")
    b = _run(tmp_path, "run-b", 2.0, "user_gave_up")
    qrels = tmp_path / "qrels"
    qrels.write_text("9-1_1 0 clueweb22-en0000-00-00000:0 2\n")
    write_evaluation(a, evaluate_run(a, EvalOptions(qrels=qrels)))
    memory = {"run_id": "run-b", "distances": [5, 10], "reveal_turn": 2,
              "strategies": {s: {"recall_by_distance": {"5": 0.5, "10": 0.5},
                                 "query_recall_by_distance": {"5": 1, "10": 1}} for s in ("full", "summary")}}
    (b / "memory.json").write_text(json.dumps(memory))
    html = write_report(load_views([a, b]), tmp_path / "report.html")
    png = tmp_path / "report.png"

    found = report_browser.inspect_page(html, png)

    assert found.console == []
    assert found.sections == ["runs", "compare", "reference", "passages", "stops", "outliers", "memory", "plots",
                              "dialogues"]
    assert len(found.images) == html.read_text().count("<img ") >= 5 and found.broken_images == []
    assert all(i["width"] > 100 and i["height"] > 100 for i in found.images)
    assert found.dialogues == 4 and found.title == "simloop report: run-a, run-b"
    assert report_browser.problems(found, list(found.sections)) == []
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_the_checker_sees_a_broken_plot_and_a_failed_load(tmp_path: Path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><title>t</title></head><body><section id='runs'>"
                    "<img alt='broken plot' src='data:image/png;base64,iVBORw0KGgoAAAA='>"
                    f"<img alt='missing' src='{(tmp_path / 'nope.png').as_uri()}'></section></body></html>")
    found = report_browser.inspect_page(page)
    assert found.broken_images == ["broken plot", "missing"]
    assert any("nope.png" in line or "ERR_FILE_NOT_FOUND" in line for line in found.console), found.console
    problems = report_browser.problems(found, ["runs", "plots"])
    assert "section 'plots' did not render" in problems and "plot 'broken plot' did not decode" in problems
