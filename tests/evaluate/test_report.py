"""`simloop report`: one self-contained HTML file to diagnose and compare runs."""

from __future__ import annotations

import base64
import json
import re
from datetime import timedelta
from pathlib import Path

from simloop.cli import main
from simloop.evaluate.diagnostics import diagnose
from simloop.evaluate.report import load_views, render_html
from simloop.evaluate.summary import EvalOptions, evaluate_run, write_evaluation
from simloop.evaluate.tables import compare_rows, signed
from simloop.memory.offline import MODEL_NAME as OFFLINE_SUMMARISER
from simloop.schema import GoldTurn, Stage
from tests.helpers.runs import T0, transcript, turn, write_run

MEMORY = {"run_id": "run-beta", "distances": [5, 10, 20], "reveal_turn": 2,
          "strategies": {"full": {"recall_by_distance": {"5": 0.9, "10": 0.8, "20": 0.5}, "tokens_per_turn": 900,
                                  "query_recall_by_distance": {"5": 1.0, "10": 1.0, "20": 1.0}},
                         "summary": {"recall_by_distance": {"5": 0.9, "10": 0.8, "20": 0.5}, "tokens_per_turn": 30,
                                     "query_recall_by_distance": {"5": 1.0, "10": 0.75, "20": 0.5},
                                     "memory_models": [OFFLINE_SUMMARISER]},
                         "window": {"recall_by_distance": {"5": 0.7, "10": 0.3, "20": 0.1}, "tokens_per_turn": 300,
                                    "query_recall_by_distance": {"5": 0.0, "10": 0.0, "20": 0.0}}}}


def _run(tmp_path: Path, run_id: str, grades: list[float], reason: str = "user_satisfied", llm: bool = True) -> Path:
    stages = [Stage(name="assistant.generate", model="m", prompt_tokens=100, completion_tokens=20, role="assistant")]
    ts = [transcript([turn(i, grade=g, ptkb=[1], stages=stages if llm else [], latency_ms=50.0 * i,
                           passages=[("d1", True), "d2"], gold=GoldTurn(turn_id=i, utterance="u", ptkb_provenance=[1]))
                      for i, g in enumerate(grades, start=1)],
                     run_id=run_id, persona="9-1", topic="9-1", repeat=r, reason=reason)
          for r in range(2)]
    return write_run(tmp_path / run_id, ts)


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(i) for i in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def test_report_html_is_self_contained_and_names_both_runs(tmp_path: Path, capsys):
    a = _run(tmp_path, "run-alpha", [4, 5])
    b = _run(tmp_path, "run-beta", [1, 2, 3], reason="user_gave_up")
    write_evaluation(a, evaluate_run(a, EvalOptions()))  # one evaluated run, one evaluated on the fly
    (b / "memory.json").write_text(json.dumps(MEMORY))

    assert main(["report", str(a), str(b)]) == 0
    html = (a / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "run-alpha" in html and "run-beta" in html
    # self-contained: no fetched asset of any kind; the plots are inline PNGs that decode
    assert 'src="http' not in html and "<script" not in html and "<link" not in html
    images = _images(html)
    assert len(images) >= 5 and all(i[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    for sid in ("runs", "compare", "reference", "stops", "memory", "plots", "dialogues"):
        assert f'<section id="{sid}">' in html
    assert "evaluated now (no judge)" in html and "summary.json" in html
    assert "2023 baseline" in html and "0.3434" in html
    assert not (b / "summary.json").exists()  # the report never writes into the runs it reads
    terminal = capsys.readouterr().out
    assert "runs side by side" in terminal and "run-alpha" in terminal and "memory stress test" in terminal


def test_memory_section_has_fact_kept_in_query_and_marks_the_stand_in(tmp_path: Path):
    b = _run(tmp_path, "run-beta", [3])
    (b / "memory.json").write_text(json.dumps(MEMORY))
    html = render_html(load_views([b]))
    memory = html[html.index('<section id="memory">'):html.index('<section id="plots">')]
    assert "fact kept in query @ 20" in memory and "recall @ 5" in memory
    assert "summary (offline stand-in)" in memory and "full (offline stand-in)" not in memory
    assert re.search(r"<td>window</td><td>300</td>(<td>[^<]*</td>){3}<td>0.0000</td>", memory)
    assert 'alt="memory recall and fact kept in query' in memory


def test_memory_test_interrupted_before_a_strategy_finished_is_a_note(tmp_path: Path, capsys):
    b = _run(tmp_path, "run-beta", [3])
    (b / "memory.json").write_text(json.dumps({**MEMORY, "status": "interrupted", "strategies": {}, "probes": []}))
    assert main(["report", str(b)]) == 0
    html = (b / "report.html").read_text()
    assert '<section id="memory">' not in html
    assert "memory.json has no results: the memory test was interrupted before a strategy finished" in html
    assert "memory.json has no results" in capsys.readouterr().out


def test_comparing_two_runs_shows_signed_differences(tmp_path: Path, capsys):
    a = _run(tmp_path, "run-a", [4, 5])
    b = _run(tmp_path, "run-b", [1, 2, 3], reason="user_gave_up")
    views = load_views([a, b])
    rows = {r.label: r for r in compare_rows([v.summary for v in views], [v.diag for v in views])}
    assert rows["mean user grade"].deltas() == [2.0 - 4.5]
    # how dialogues ended compares as shares of each run's dialogues, the count beside it
    gave_up, satisfied = rows["stopped: user_gave_up"], rows["stopped: user_satisfied"]
    assert gave_up.values == [0.0, 1.0] and gave_up.counts == [0, 2] and satisfied.deltas() == [-1.0]
    assert gave_up.cells() == ["0.0% (0)", "100.0% (2)"] and gave_up.delta_cells() == ["+100.0 pp"]
    assert signed(-2.5) == "\u22122.5" and signed(0.25) == "+0.2500" and signed(3) == "+3"
    assert signed(0) == "±0" and signed(None) == "-"
    html = render_html(views)
    assert "\u0394 run-b \u2212 run-a" in html
    assert '<td class="delta loss">\u22122.5</td>' in html  # lower grade: worse
    assert '<td class="delta loss">+100.0 pp</td>' in html  # a larger share given up: worse
    assert '<td class="delta ">+1.0000</td>' in html  # one more turn per dialogue: neither better nor worse
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "c.html")]) == 0
    assert "\u22122.5" in capsys.readouterr().out  # the terminal table carries the same signs


def test_offline_runs_have_no_llm_rows_and_stand_ins_are_no_llm_calls(tmp_path: Path):
    stand_in = Stage(name="memory.summary", model=OFFLINE_SUMMARISER, prompt_tokens=300, completion_tokens=40)
    ts = [transcript([turn(1, stages=[stand_in]), turn(2, stages=[stand_in])])]
    run = write_run(tmp_path / "offline", ts)
    ev = evaluate_run(run, EvalOptions())
    assert ev.summary.stats.llm_calls == 0 and ev.summary.stats.tokens_per_turn.mean == 0
    labels = [r.label for r in compare_rows([ev.summary])]
    assert not [x for x in labels if "LLM" in x or "token" in x or "cost" in x]
    llm = _run(tmp_path, "llm", [4])
    views = load_views([run, llm])
    labels = [r.label for r in compare_rows([v.summary for v in views], [v.diag for v in views])]
    assert "LLM calls" in labels and "LLM tokens per turn" in labels  # shown once any run has calls


def test_start_up_turns_are_left_out_of_latency(tmp_path: Path):
    # three dialogues start together and wait 66 s for the first turn; one starts later, in
    # the slot the first to end frees (as the engine starts it)
    slow = [transcript([turn(1, latency_ms=66_000.0), turn(2, latency_ms=100.0), turn(3, latency_ms=120.0)],
                       persona=f"p{i}", seconds=70.0) for i in range(3)]
    late = transcript([turn(1, latency_ms=90.0), turn(2, latency_ms=110.0)], persona="p9", seconds=1.0)
    late.started_at, late.ended_at = T0 + timedelta(seconds=70), T0 + timedelta(seconds=71)
    d = diagnose([*slow, late])
    assert len(d.startup_turns) == 3 and d.startup_max == 66_000.0
    assert d.turn_latency["p99"] == 120.0 and sorted(d.warm_turns) == [90.0, 100, 100, 100, 110, 120, 120, 120]
    assert d.dialogue_latency["p99"] < 10_000  # a start-up dialogue counts its first turn as a typical one
    run = write_run(tmp_path / "cold", [*slow, late])
    html = render_html(load_views([run]))
    assert "turn latency p99 ms (start-up excluded)</td><td class=num>120</td>" in html
    assert "start-up turns (excluded)</td><td class=num>3</td>" in html
    assert "3 start-up turns left out (up to 66.0 s)" in html  # the latency plot's caption
    assert "66,000" not in html.split('<section id="dialogues">')[0]  # no table shows it as a latency


def test_passage_coverage_note_and_stop_reasons_per_persona_and_topic(tmp_path: Path):
    ts = [transcript([turn(1, passages=["wiki_a"])], persona="maya", topic="maya-run"),
          transcript([turn(1)], persona="maya", topic="maya-dog", reason="user_gave_up"),
          transcript([turn(1)], persona="zoe", topic="zoe-run", reason="max_turns", by="engine")]
    run = write_run(tmp_path / "r", ts)
    qrels = tmp_path / "qrels.trec"
    qrels.write_text("maya-run_1 0 clueweb22-en0001-00-00000:1 2\n")
    write_evaluation(run, evaluate_run(run, EvalOptions(qrels=qrels)))
    html = render_html(load_views([run]))
    passages = html[html.index('<section id="passages">'):html.index('<section id="stops">')]
    assert "1 of the run&#x27;s 3 turns are in the qrels; 0 of those" in passages and 'class="note"' in passages
    stops = html[html.index('<section id="stops">'):html.index('<section id="plots">')]
    assert "by persona" in stops and "by topic" in stops
    # least satisfied first: zoe (0 of 1), then maya (1 of 2)
    assert stops.index("<td>zoe</td>") < stops.index("<td>maya</td>")
    assert "<th>mean grade</th><th>user_satisfied</th><th>user_gave_up</th><th>max_turns</th>" in stops


def test_every_dialogue_opens_onto_its_turns(tmp_path: Path):
    stages = [Stage(name="assistant.generate", model="m", prompt_tokens=100, completion_tokens=20)]
    ts = [transcript([turn(i, grade=g, ptkb=[1, 3], stages=stages, passages=[("d1", True), "d2"],
                           gold=GoldTurn(turn_id=i, utterance="u", ptkb_provenance=[1]))
                      for i, g in enumerate([4, 2], start=1)], persona="9-1", topic="9-1", repeat=r) for r in range(2)]
    ts[0].stop.utterance = "Thanks, that is all I needed."
    ts[0].turns[0].assistant.ptkb_provenance[1].used = False  # ranked, not relied on
    html = render_html(load_views([write_run(tmp_path / "run-a", ts)]))
    dialogues = html[html.index('<section id="dialogues">'):]
    assert dialogues.count('<details class="dlg"') == 2
    first = dialogues[dialogues.index('<details class="dlg"'):dialogues.index("</details>")]
    assert "9-1--9-1--0" in first and "user_satisfied" in first
    for text in ("question 1?", "answer 1.", "d1", "✓", "grade 4.00", "grade 2.00", "gold: 1", "assistant.generate",
                 "Thanks, that is all I needed.", "closing line"):
        assert text in first, text
    assert '<li class="used">#1 <span class="dim">1.0000</span> I am vegetarian.</li>' in first
    assert '<li class="dim">#3 <span class="dim">0.9000</span> I play the cello.</li>' in first


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
