"""A run directory of another schema version (issue 35: a "3.0" run read as dialogues with
no turns, exit 0): another major version is refused by name, one line, exit 2, in every
command that reads runs; a newer minor version is read with a warning that names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simloop.cli import main
from tests.helpers.cli import simloop_cli
from tests.helpers.runs import transcript, turn, write_run


def _run_of_version(root: Path, version: str, moved_turns: bool) -> Path:
    """A finished run whose records say ``version``; ``moved_turns``: its dialogues keep
    their turns under another key, as a schema that renamed the field would."""
    run = write_run(root / f"v{version}", [transcript([turn(1, grade=4.0), turn(2, grade=2.0)], repeat=r)
                                           for r in range(3)])
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "schema_version": version}))
    lines = []
    for raw in (run / "dialogues.jsonl").read_text().splitlines():
        line = {**json.loads(raw), "schema_version": version}
        if moved_turns:
            line["exchanges"] = line.pop("turns")
        lines.append(json.dumps(line) + "\n")
    (run / "dialogues.jsonl").write_text("".join(lines))
    return run


@pytest.mark.parametrize("command", [["show"], ["eval"], ["report"], ["export", "--format", "sharegpt"]])
def test_another_major_version_is_refused_by_name(tmp_path: Path, capsys, command):
    run = _run_of_version(tmp_path, "3.0", moved_turns=True)
    before = sorted(p.name for p in run.iterdir())
    name, *flags = command
    code = main([name, str(run), *flags])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert f"{run}/run.json: schema_version '3.0' is not one this simloop reads (1.x" in lines[0]
    assert sorted(p.name for p in run.iterdir()) == before  # nothing written beside it


def test_resume_refuses_another_major_version(tmp_path: Path, capsys):
    run = _run_of_version(tmp_path, "3.0", moved_turns=True)
    assert main(["run", "--resume", str(run), "--no-progress"]) == 2
    assert "schema_version '3.0'" in capsys.readouterr().err


def test_a_line_of_another_major_version_is_refused_even_under_a_known_run_json(tmp_path: Path, capsys):
    run = _run_of_version(tmp_path, "3.0", moved_turns=True)
    manifest = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**manifest, "schema_version": "1.0"}))
    assert main(["show", str(run)]) == 2
    assert f"{run}/dialogues.jsonl:1: schema_version '3.0'" in capsys.readouterr().err


def test_a_newer_minor_version_reads_with_a_warning_that_names_it(tmp_path: Path):
    run = _run_of_version(tmp_path, "1.4", moved_turns=False)
    for command in (["eval"], ["show"]):
        p = simloop_cli(*command, run)
        assert p.returncode == 0, p.stderr
        assert f"simloop: warning: {run}/run.json: schema_version 1.4 is newer than this simloop's 1.0" in p.stderr
        newer = [ln for ln in p.stderr.splitlines() if "dialogues.jsonl:1: schema_version 1.4 is newer" in ln]
        assert len(newer) == 1 and "rejected" not in newer[0], p.stderr  # said once, and not as a corrupt line
    assert json.loads((run / "summary.json").read_text())["stats"]["turns"]["total"] == 6  # read, turns and all
