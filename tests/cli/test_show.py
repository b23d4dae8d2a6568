"""`simloop show`: the overview never wraps a dialogue id (issue 35: an 80-column terminal
split each id over three lines, and a split id cannot be copied into `--dialogue`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cli import simloop_cli
from tests.helpers.runs import transcript, turn, write_run


def _show(run: Path, columns: int) -> list[str]:
    p = simloop_cli("show", run, env={**os.environ, "COLUMNS": str(columns)})
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def _run(tmp_path: Path, personas: list[str], topics: list[str]) -> tuple[Path, list[str]]:
    ts = [transcript([turn(1, grade=4.0), turn(2, grade=2.0)], persona=p, topic=t, reason=r)
          for p, t, r in zip(personas, topics, ["user_satisfied", "user_gave_up", "max_turns"])]
    return write_run(tmp_path / "r", ts), [t.dialogue_id for t in ts]


def test_demo_length_ids_fit_80_columns_whole(tmp_path: Path):
    # the longest shipped persona x topic ids, and an iKAT-from-topics one with a prefix
    run, ids = _run(tmp_path, ["dieter", "aroha", "ikat23-9-1"], ["dieter-money", "aroha-sharks", "ikat23-9-1"])
    lines = _show(run, 80)
    for dialogue_id in ids:
        row = next(ln for ln in lines if ln.startswith(dialogue_id + " "))  # whole, at the start of its row
        assert "user_" in row or "max_turns" in row  # and its cells beside it, on the same line
    assert all(len(ln) <= 80 for ln in lines), max(lines, key=len)


@pytest.mark.parametrize("columns", [40, 80])
def test_ids_longer_than_the_terminal_stay_whole(tmp_path: Path, columns: int):
    long = "a-persona-with-a-long-name-" * 2
    run, ids = _run(tmp_path, [long, "p2", "p3"], ["a-topic-with-a-long-name-as-well", "t2", "t3"])
    lines = _show(run, columns)
    for dialogue_id in ids:
        assert any(ln.startswith(dialogue_id + " ") and "2 " in ln for ln in lines), lines
    assert not any("…" in ln for ln in lines)  # no cell cut short either
