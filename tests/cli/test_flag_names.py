"""Messages name the flag the user typed, not the config field it sets (issue 35:
`--timeout -5` said `dialogue_timeout_s`).  Flags become config in one place
(cli/flags.py), so every command that builds a run config reads alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from simloop.cli import main


def _one_line_2(capsys, argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    return lines[0]


@pytest.mark.parametrize("args, said, field", [
    (["--timeout", "-5"], "--timeout -5: Input should be greater than 0", "dialogue_timeout_s"),
    (["--concurrency", "0"], "--concurrency 0: Input should be greater than or equal to 1", "concurrency:"),
    (["--limit", "0"], "--limit 0: Input should be greater than or equal to 1", "scenarios.limit"),
    (["--repeat", "0"], "--repeat 0: Input should be greater than or equal to 1", "scenarios.repeat"),
    (["--max-turns", "5000"], "--max-turns 5000: Input should be less than or equal to 1000", "max_turns"),
    (["--k", "0"], "--k 0: Input should be greater than or equal to 1", "retrieval.k"),
    (["--rpm", "-1"], "--rpm -1: Input should be greater than 0", "llm.default.rpm"),
    (["--out", ""], "--out '': an empty path", "config: out"),
])
def test_run_names_the_flag_not_the_field(tmp_path: Path, capsys, args, said, field):
    line = _one_line_2(capsys, ["run", "--no-progress", "--out", str(tmp_path / "o"), *args])
    assert said in line and field not in line
    assert not any(tmp_path.iterdir())  # refused before anything is written


@pytest.mark.parametrize("argv, said, field", [
    (["memory", "--timeout", "-5"], "--timeout -5: Input should be greater than 0", "dialogue_timeout_s"),
    (["serve", "--max-turns", "0"], "--max-turns 0: Input should be greater than or equal to 1", "max_turns"),
])
def test_other_commands_that_take_run_flags_name_them_too(tmp_path: Path, capsys, argv, said, field):
    line = _one_line_2(capsys, [*argv, "--out", str(tmp_path / "o")])
    assert said in line and field not in line


def test_a_config_file_value_is_still_named_by_file_and_field(tmp_path: Path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("dialogue_timeout_s = -5\n")
    line = _one_line_2(capsys, ["run", str(cfg), "--no-progress", "--out", str(tmp_path / "o")])
    assert f"{cfg}: dialogue_timeout_s: Input should be greater than 0" in line
