"""A replay over part of its 2023 topic file is marked partial beside the official 2023
runs, which were scored over all of it (issue 35: a `--limit 3` replay's nDCG@3 of 0.8585
stood beside the best run's 0.7254 without a word about 3 of 25 conversations)."""

from __future__ import annotations

import json
from pathlib import Path

from simloop.cli import main
from simloop.evaluate.report import load_views, render_html
from simloop.evaluate.summary import EvalOptions, evaluate_run
from simloop.schema import GoldTurn
from tests.helpers.runs import transcript, turn, write_run


def _topic_file(path: Path, conversations: int) -> Path:
    """A 2023-shaped topic file (one entry per conversation)."""
    path.write_text(json.dumps([{"number": f"{n}-1", "title": "t", "ptkb": {"1": "I run."}, "turns": []}
                                for n in range(1, conversations + 1)]))
    return path


def _replay(root: Path, name: str, topics: Path, conversations: int) -> Path:
    ts = [transcript([turn(1, ptkb=[1], gold=GoldTurn(turn_id=1, utterance="u", ptkb_provenance=[1]))],
                     persona=f"{n}-1", topic=f"{n}-1") for n in range(1, conversations + 1)]
    return write_run(root / name, ts, config={"scenarios": {"topics": str(topics)}})


def test_a_replay_of_3_of_25_conversations_is_marked_partial(tmp_path: Path, capsys):
    run = _replay(tmp_path, "limited", _topic_file(tmp_path / "topics.json", 25), 3)
    ref = evaluate_run(run, EvalOptions()).summary.ptkb_reference
    assert ref is not None and (ref.conversations, ref.conversations_total) == (3, 25)
    assert ref.partial() == ("partial: only 3 of the topic file's 25 conversations were scored; "
                             "the official runs were scored over all of them")

    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert "PARTIAL: ONLY 3 OF THE TOPIC FILE'S 25 CONVERSATIONS WERE SCORED" in out  # the table's title
    assert "PTKB vs the official 2023 runs: partial: only 3 of the topic file's 25" in out
    assert json.loads((run / "summary.json").read_text())["ptkb_reference"]["conversations_total"] == 25
    html = render_html(load_views([run]))
    reference = html[html.index('<section id="reference">'):]
    assert "PARTIAL: ONLY 3 OF THE TOPIC FILE&#x27;S 25" in reference and "<td>3 of 25</td>" in reference


def test_a_replay_of_the_whole_topic_file_is_not_marked(tmp_path: Path, capsys):
    run = _replay(tmp_path, "whole", _topic_file(tmp_path / "topics.json", 4), 4)
    ref = evaluate_run(run, EvalOptions()).summary.ptkb_reference
    assert ref is not None and (ref.conversations, ref.conversations_total) == (4, 4) and ref.partial() is None
    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert "2023 best" in out and "partial" not in out.lower()
