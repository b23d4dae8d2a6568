"""The report lists what the means hide (issue 35: a dialogue that ended `user_satisfied`
with a mean grade of 2.09 and three failed answers looked like any other): satisfied
dialogues with low grades, the lowest grades, the slowest turns, each linked to its
dialogue; and it plots how grades spread and how they go turn by turn."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

from simloop.cli import main
from simloop.evaluate.outliers import find_outliers
from simloop.evaluate.report import load_views, render_html
from simloop.evaluate.report_dialogues import MAX_DIALOGUES
from simloop.schema import PluginRef, Stage
from tests.helpers.runs import transcript, turn, write_run


def _dialogue(topic: str, grades: list[float], reason: str = "user_satisfied", latency: float = 100.0,
              threshold: float | None = None, repeat: int = 0):
    t = transcript([turn(i, grade=g, latency_ms=latency,
                         stages=[Stage(name="assistant.generate", latency_ms=latency * 0.9)])
                    for i, g in enumerate(grades, start=1)], topic=topic, reason=reason, repeat=repeat)
    if threshold is not None:
        t.simulator = PluginRef(name="offline", params={"threshold": threshold})
    return t


def _run(tmp_path: Path, extra: int = 0) -> Path:
    ts = [_dialogue(f"ok{i}", [4.0, 5.0, 4.0], repeat=i) for i in range(extra)]
    ts += [_dialogue("fine", [4.0, 4.5, 4.0]),
           _dialogue("suspect", [1.0, 2.0, 1.0, 4.36]),  # mean 2.09, three answers failed, yet satisfied
           _dialogue("lenient", [2.0, 2.0], threshold=1.5),  # passes under its own simulator's threshold
           _dialogue("gave-up", [1.0, 0.5], reason="user_gave_up"),
           _dialogue("slow", [4.0, 4.0], latency=9_000.0)]
    return write_run(tmp_path / "r", ts)


def _many(n: int):
    return [_dialogue(f"t{i}", [i / n * 5, 4.0]) for i in range(n)]


def test_the_three_lists(tmp_path: Path):
    (view,) = load_views([_run(tmp_path)])
    out = view.diag.outliers
    assert [o.dialogue_id for o in out.satisfied_low] == ["p1--suspect--0"]
    assert out.satisfied_low[0].why == "user_satisfied, mean grade 2.09, 3 of 4 answers failed (<= 3)"
    assert [o.dialogue_id for o in out.lowest] == ["p1--gave-up--0"]  # a fifth of 5 graded dialogues
    assert [o.dialogue_id for o in find_outliers(_many(30)).lowest] == [f"p1--t{i}--0" for i in range(5)]
    # only turns that stand out (over twice the median), not every run's five slowest ...
    every = find_outliers(view.transcripts)
    assert [(o.dialogue_id, o.turn) for o in every.slowest] == [("p1--slow--0", 1), ("p1--slow--0", 2)]
    assert every.slowest[0].why == "turn 1: 9,000 ms; slowest stage assistant.generate 8,100 ms"
    # ... and no start-up turn (all five dialogues started at once: their first turns waited for the start-up)
    assert [(o.dialogue_id, o.turn) for o in out.slowest] == [("p1--slow--0", 2)]


def test_html_links_each_outlier_to_its_dialogue_and_plots_grades(tmp_path: Path):
    run = _run(tmp_path, extra=MAX_DIALOGUES)  # the outliers come after the first 200 dialogues
    html = render_html(load_views([run]))
    outliers = html[html.index('<section id="outliers">'):html.index('<section id="plots">')]
    assert "run-a: satisfied with low grades (1)</h3>" in outliers
    links = re.findall(r'<a href="#([^"]+)">([^<]+)</a>', outliers)
    dialogues = html[html.index('<section id="dialogues">'):]
    assert ("dlg-0-p1--suspect--0", "p1--suspect--0") in links
    for anchor, dialogue_id in links:  # every link lands on its dialogue's row, shown past the cap too
        assert f'<details class="dlg" id="{anchor}">' in dialogues and unquote(anchor).endswith(dialogue_id)
    plots = html[html.index('<section id="plots">'):html.index('<section id="dialogues">')]
    assert "grades of the answers, as shares of each run&#x27;s graded turns" in plots
    assert "mean grade at each turn" in plots


def test_the_terminal_shows_a_short_list(tmp_path: Path, capsys):
    assert main(["report", str(_run(tmp_path)), "--out", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "run-a: outliers" in out
    assert "satisfied with low grades (1): p1--suspect--0 (2.09, 3/4 failed, user_satisfied)" in out
