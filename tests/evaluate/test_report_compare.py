"""`simloop report A B`: only differences that mean better or worse are coloured (issue 35:
counts were coloured, and so were the deltas of runs over different topics).  Shares of
the dialogues stand in for counts; runs over different scenarios get a warning line and no
colour at all."""

from __future__ import annotations

import re
from pathlib import Path

from rich.text import Text

from simloop.cli import main
from simloop.evaluate.report import load_views, render_html, scenario_warning
from simloop.evaluate.tables import compare_rows, rich_compare
from simloop.schema import Stage
from tests.helpers.runs import transcript, turn, write_run

_LLM = [Stage(name="assistant.generate", model="m", prompt_tokens=10, completion_tokens=5, retries=1,
              cost_usd=0.01)]


def _run(root: Path, name: str, topics: list[str], grade: float, reason: str = "user_satisfied") -> Path:
    ts = [transcript([turn(1, grade=grade, stages=_LLM), turn(2, grade=grade, stages=_LLM)], run_id=name,
                     topic=t, reason=reason) for t in topics]
    ts.append(transcript([turn(1, grade=1.0)], run_id=name, topic=topics[0], repeat=1, reason="error",
                         error=("RuntimeError", "boom")))
    return write_run(root / name, ts)


def _compare_section(html: str) -> str:
    return html[html.index('<section id="compare">'):html.index("</section>", html.index('<section id="compare">'))]


def test_counts_have_no_colour_and_shares_stand_beside_them(tmp_path: Path):
    a = _run(tmp_path, "a", ["t1", "t2", "t3"], 4.0)
    b = _run(tmp_path, "b", ["t1", "t2", "t3"], 2.0, reason="user_gave_up")
    views = load_views([a, b])
    rows = {r.label: r for r in compare_rows([v.summary for v in views], [v.diag for v in views])}
    for count in ("dialogues", "turns mean", "LLM calls", "retries", "cost USD", "start-up turns (excluded)"):
        assert rows[count].better == 0, count
    for share, better in (("stopped: user_satisfied", 1), ("stopped: user_gave_up", -1),
                          ("dialogues with errors", -1)):
        assert rows[share].better == better and rows[share].counts is not None, share
    assert rows["dialogues with errors"].cells() == ["25.0% (1)", "25.0% (1)"]
    assert rows["retries per LLM call"].values == [1.0, 1.0] and rows["cost USD per dialogue"].better == -1
    compare = _compare_section(render_html(views))
    assert scenario_warning(views) is None and "warn" not in compare
    coloured = re.findall(r'<tr><td>([^<]+)</td>(?:(?!</tr>).)*<td class="delta (gain|loss)">', compare)
    assert {label for label, _ in coloured} <= {"mean user grade", "stopped: user_satisfied",
                                               "stopped: user_gave_up"}, coloured
    assert ("mean user grade", "loss") in coloured and ("stopped: user_gave_up", "loss") in coloured


def test_runs_over_different_scenarios_are_warned_about_and_not_coloured(tmp_path: Path, capsys):
    full = _run(tmp_path, "full", ["t1", "t2", "t3", "t4"], 4.0)
    limited = _run(tmp_path, "limited", ["t1"], 5.0)  # as `--limit 1` would
    views = load_views([full, limited])
    said = scenario_warning(views)
    assert said is not None and "(full: 4 persona x topic pairs; limited: 1, 1 of them in full)" in said
    compare = _compare_section(render_html(views))
    assert 'class="note warn">The runs cover different scenarios' in compare
    assert "delta gain" not in compare and "delta loss" not in compare
    table = rich_compare([v.name for v in views], [v.summary for v in views], [v.diag for v in views], colour=False)
    deltas = [cell for col in table.columns[3:] for cell in col._cells]
    assert deltas and all(isinstance(c, Text) and not c.style for c in deltas)

    assert main(["report", str(full), str(limited), "--out", str(tmp_path / "r.html")]) == 0
    err = capsys.readouterr().err
    assert "simloop: warning: the runs cover different scenarios" in err and "none is coloured" in err


def test_the_same_scenarios_repeated_more_often_compare_without_a_warning(tmp_path: Path):
    once = _run(tmp_path, "once", ["t1", "t2"], 4.0)
    twice = write_run(tmp_path / "twice", [transcript([turn(1, grade=3.0)], run_id="twice", topic=t, repeat=r)
                                           for t in ("t1", "t2") for r in range(2)])
    assert scenario_warning(load_views([once, twice])) is None  # repeats are more samples of the same scenarios
