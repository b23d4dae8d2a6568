"""`simloop run` / `--resume` / `memory` input the run could not use (audit 15): refused
before anything is written (exit 2, one line, no traceback), never silently ignored, and
a run resumable from any folder.  Through the real CLI in subprocesses, on real files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import one_line_exit_2, simloop_cli
from tests.helpers.data import ROOT
from tests.helpers.resume_plugins import ASSISTANT, SIM

# A two-turn iKAT 2023 topic file (the schema replay reads; real files are 10x larger).
TOPICS = [{"number": "1-1", "title": "t", "ptkb": {"1": "I live in Leiden."}, "turns": [
    {"turn_id": i, "utterance": f"question {i}?", "resolved_utterance": f"question {i}?", "response": "an answer.",
     "ptkb_provenance": [1], "response_provenance": []} for i in (1, 2)]}]


def cli_in(folder: Path, *args, **env) -> object:
    """The CLI run from ``folder``, on this checkout's code and test plugins."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return simloop_cli(*args, cwd=folder, env={**os.environ, "PYTHONPATH": path, **env})


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def work(tmp_path) -> Path:
    """A folder with a copy of the demo personas and a small topic file, nothing else."""
    shutil.copytree(ROOT / "personas", tmp_path / "personas")
    (tmp_path / "topics.json").write_text(json.dumps(TOPICS))
    return tmp_path


def test_replay_without_topics_is_refused_before_the_run(work):
    line = one_line_exit_2(cli_in(work, "run", "--simulator", "replay", "--out", "o"), "--topics FILE",
                           "replay", "have none (first: aroha-sharks)")
    assert "personas" in line and listing(work) == ["personas", "topics.json"]


def test_behaviour_with_replay_is_refused(work):
    one_line_exit_2(cli_in(work, "run", "--simulator", "replay", "--topics", "topics.json", "--behaviour",
                           "patience=1", "--out", "o"), "--behaviour patience", "would change nothing")
    assert listing(work) == ["personas", "topics.json"]


def test_personas_beside_topics_is_refused(work):
    one_line_exit_2(cli_in(work, "run", "--simulator", "replay", "--topics", "topics.json", "--personas", "personas",
                           "--out", "o"), "--personas personas: not read when a topic file is given")
    assert listing(work) == ["personas", "topics.json"]


def test_config_file_personas_dir_beside_topics_is_one_warning(work):
    (work / "run.toml").write_text('[scenarios]\npersonas_dir = "personas"\n')
    p = cli_in(work, "run", "run.toml", "--simulator", "replay", "--topics", "topics.json", "--out", "o",
               "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "simloop: warning: scenarios.personas_dir" in p.stderr and "is not read" in p.stderr
    assert p.stderr.count("warning") == 1


@pytest.mark.parametrize("flags", [["--model", "m"], ["--base-url", "http://127.0.0.1:9/v1"], ["--rpm", "5"],
                                   ["--cache", "afile"]])
def test_llm_flags_on_a_run_without_llm_are_refused(work, flags):
    one_line_exit_2(cli_in(work, "run", "--simulator", SIM, "--assistant", ASSISTANT, "--out", "o", *flags),
                    f"{flags[0]}: neither the simulator", "calls an LLM")
    assert listing(work) == ["personas", "topics.json"]


@pytest.mark.parametrize("command", [["run", "--limit", "1"], ["memory", "--no-progress"]])
def test_default_personas_outside_a_checkout_say_what_to_do(tmp_path, command):
    one_line_exit_2(cli_in(tmp_path, *command), f"{tmp_path / 'personas'}: no such persona file or folder",
                    "pass --personas DIR or --topics FILE", "simloop checkout's personas/")
    assert listing(tmp_path) == []


def test_memory_assistant_param_without_assistant(tmp_path):
    one_line_exit_2(cli_in(tmp_path, "memory", "--assistant-param", "k=3", "--personas", ROOT / "personas"),
                    "--assistant-param needs --assistant NAME")
    assert listing(tmp_path) == []


def test_bad_demo_vectors_setting(tmp_path):
    one_line_exit_2(cli_in(tmp_path, "list", SIMLOOP_DEMO_VECTORS="bogus"), "SIMLOOP_DEMO_VECTORS='bogus'",
                    "expected 0")


def test_wording(work):
    one_line_exit_2(cli_in(work, "run", "--simulator", "simapi", "--out", "o"), "simloop rehearse --api URL")
    one_line_exit_2(cli_in(work, "run", "--persona", "zzz", "--out", "o"), "unknown --persona 'zzz'",
                    "known: aroha, dieter")
    for command, choice in (("index", "build"), ("corpus", "wiki"), ("personas", "from-ikat")):
        line = one_line_exit_2(cli_in(work, command), f"required: {{{choice}}}")
        assert "_cmd" not in line
    one_line_exit_2(cli_in(work, "personas", "from-ikat", "topics.json", "--out", ""), "--out '': an empty path")
    run = work / "r"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema_version": "1.0", "run_id": "r"}))
    one_line_exit_2(cli_in(work, "show", run), "not a simloop run manifest: config: Field required")
    assert listing(work) == ["personas", "r", "topics.json"] and listing(run) == ["run.json"]


def test_resume_from_another_folder_and_nothing_left(work):
    """run.json records the input paths absolute; a path spelled otherwise on resume compares
    by where it points; a resume with nothing to do says so and shows the whole run."""
    start, elsewhere = work / "start", work / "elsewhere"
    start.mkdir(), elsewhere.mkdir()
    shutil.move(work / "personas", start / "personas")
    argv = ["run", "--simulator", SIM, "--assistant", ASSISTANT, "--personas", "personas", "--limit", "2",
            "--max-turns", "1", "--no-progress"]
    p = cli_in(start, *argv, "--out", "../rel", "--run-id", "r2")
    assert p.returncode == 0, p.stderr
    run_dir = work / "rel" / "r2"
    recorded = json.loads((run_dir / "run.json").read_text())["config"]["scenarios"]["personas_dir"]
    assert recorded == str(start / "personas")
    lines = (run_dir / "dialogues.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "dialogues.jsonl").write_text(lines[0])

    p = cli_in(elsewhere, "run", "--resume", run_dir, "--personas", "../start/personas", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "1 recorded, 1 to go" in p.stderr and "whole run: 2 dialogues" in p.stdout
    assert len((run_dir / "dialogues.jsonl").read_text().splitlines()) == 2

    p = cli_in(elsewhere, "run", "--resume", run_dir, "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "nothing to do: 2 dialogues already recorded" in p.stdout and "dialogues     0" not in p.stdout
    assert p.stdout.splitlines()[-1] == str(run_dir) and listing(elsewhere) == []
