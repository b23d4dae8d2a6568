"""Bad input: one line on stderr, exit 2, no traceback, nothing half-written."""

from pathlib import Path

from simloop.cli import main
from tests.helpers.data import write_personas

PERSONA = """id = "{pid}"
name = "X"
ptkb = ["I like tea.", "I live in Oslo."]
[[topics]]
id = "{pid}-t"
title = "Tea"
[[topics.rubric]]
id = "q1"
question = "What is tea?"
"""


def _personas(tmp_path: Path) -> Path:
    return write_personas(tmp_path / "personas", ann=PERSONA.format(pid="ann"))


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.err


def _assert_one_line(err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err


def test_unknown_assistant_lists_known_ones(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = _run(capsys, "run", "--personas", str(_personas(tmp_path)), "--assistant", "nope", "--out", str(out),
                     "--no-progress")
    assert code == 2 and "unknown assistant 'nope'" in err and "bm25_extractive" in err
    _assert_one_line(err)
    assert not out.exists()


def test_malformed_persona_names_file_and_field(tmp_path, capsys):
    d = _personas(tmp_path)
    (d / "bob.toml").write_text('id = "bob"\nptkb = []\n')
    out = tmp_path / "out"
    code, err = _run(capsys, "run", "--personas", str(d), "--out", str(out), "--no-progress")
    assert code == 2 and "bob.toml" in err and "ptkb" in err
    _assert_one_line(err)
    assert not out.exists()


def test_missing_index_says_how_to_build(tmp_path, capsys):
    out = tmp_path / "out"
    code, err = _run(capsys, "run", "--personas", str(_personas(tmp_path)), "--index", str(tmp_path / "noidx"),
                     "--out", str(out), "--no-progress")
    assert code == 2 and "simloop index build" in err
    _assert_one_line(err)
    assert not out.exists()


def test_bad_config_file(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text("concurrency = -1\n")
    code, err = _run(capsys, "run", str(cfg), "--out", str(tmp_path / "out"), "--no-progress")
    assert code == 2 and "c.toml" in err and "concurrency" in err
    _assert_one_line(err)


def test_show_missing_run_dir(tmp_path, capsys):
    code, err = _run(capsys, "show", str(tmp_path / "missing"))
    assert code == 2 and "not a run directory (no such folder)" in err
    _assert_one_line(err)


def test_resume_of_a_non_run(tmp_path, capsys):
    code, err = _run(capsys, "run", "--resume", str(tmp_path))
    assert code == 2
    _assert_one_line(err)


def test_bad_param_syntax(tmp_path, capsys):
    code, err = _run(capsys, "run", "--assistant-param", "novalue", "--out", str(tmp_path / "o"))
    assert code == 2 and "KEY=VALUE" in err


def test_an_unforeseen_os_error_is_one_line_and_exit_1(capsys, monkeypatch, tmp_path):
    # The command's own checks did not see it coming (here: a folder it may not read).
    import simloop.cli.show as show

    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x"))

    monkeypatch.setattr(show, "cmd_show", denied)
    code, err = _run(capsys, "show", str(tmp_path))
    assert code == 1 and err.strip() == f"simloop: PermissionError: {tmp_path / 'x'}: Permission denied"


def test_verbose_is_accepted_after_the_command_too():
    from simloop.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["-v", "list"]).verbose is True
    assert parser.parse_args(["list", "-v"]).verbose is True
    assert parser.parse_args(["index", "build", "--corpus", "c", "--out", "o", "--verbose"]).verbose is True
    assert parser.parse_args(["list"]).verbose is False


def test_a_corrupt_line_reads_alike_in_show_eval_and_export(tmp_path):
    """One format for the same warning, whichever command reads the run (audit 15)."""
    from tests.helpers.cli import simloop_cli

    proc = simloop_cli("run", "--limit", "1", "--max-turns", "1", "--no-progress", "--out", tmp_path, "--run-id", "r")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = tmp_path / "r"
    with open(run / "dialogues.jsonl", "a") as f:
        f.write("{bad json\n")
    lines = []
    for args in (["show", run], ["eval", run], ["export", run, "--format", "sharegpt", "--out", tmp_path / "x.jsonl"]):
        proc = simloop_cli(*args)
        lines.append(next(ln for ln in proc.stderr.splitlines() if "corrupt line" in ln))
    assert all(ln.startswith(f"simloop: warning: {run}/dialogues.jsonl:2: corrupt line skipped") for ln in lines), lines
