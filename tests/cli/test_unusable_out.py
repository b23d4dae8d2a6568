"""An --out the OS will not let us write in is one line, exit 2, before anything is
written (issue 35: `--out /proc/x` was a raw FileNotFoundError, exit 1).  /proc passes
every permission check root makes (access() says yes), and refuses only a real attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

from simloop.cli import main
from tests.helpers.data import ROOT
from tests.helpers.runs import transcript, turn, write_run

pytestmark = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")


def _refused(capsys, argv: list[str], *needles: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not Path("/proc/x").exists()


def test_run_out_in_proc(tmp_path: Path, capsys):
    _refused(capsys, ["run", "--personas", str(ROOT / "personas"), "--limit", "1", "--no-progress",
                      "--out", "/proc/x"], "--out /proc/x: cannot create anything in /proc")


def test_from_ikat_out_in_proc(tmp_path: Path, capsys):
    topics = tmp_path / "topics.json"
    topics.write_text("[]")
    _refused(capsys, ["personas", "from-ikat", str(topics), "--out", "/proc/x"], "--out /proc/x", "/proc")


@pytest.mark.parametrize("argv", [["report", "--out", "/proc/x.html"],
                                  ["export", "--format", "sharegpt", "--out", "/proc/x.jsonl"]])
def test_report_and_export_out_in_proc(tmp_path: Path, capsys, argv):
    run = write_run(tmp_path / "r", [transcript([turn(1, grade=4.0)])])
    command, *flags = argv
    _refused(capsys, [command, str(run), *flags], "/proc/x", "cannot create anything in /proc")
    assert sorted(p.name for p in run.iterdir()) == ["dialogues.jsonl", "run.json"]
