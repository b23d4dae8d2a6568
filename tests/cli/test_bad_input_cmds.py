"""Bad input to the commands around a run (show, report, export, corpus, memory, personas,
eval, index, mock-llm, list) through the real CLI in a subprocess: one line on stderr,
exit 2, no traceback, nothing written (DESIGN §12)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.cli import free_port, mock_llm, one_line_exit_2
from tests.helpers.cli import simloop_cli as cli
from tests.helpers.data import ROOT, ikat_file
from tests.helpers.runs import persona_run, read_json, transcript, turn, write_run


def cli_in(folder: Path, *args) -> object:
    """The CLI run from another folder, still on this checkout's code (outside the repo,
    ``python -m simloop`` would import whichever checkout the venv installed)."""
    return cli(*args, cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_show_a_file_is_not_a_run_directory(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    one_line_exit_2(cli("show", target), str(target), "not a run directory")


@pytest.mark.parametrize("command", [
    ["report", "{run}"],
    ["export", "{run}", "--format", "trec-run"],
    ["corpus", "wiki"],
])
def test_out_naming_an_existing_folder(tmp_path, command):
    run = persona_run(tmp_path / "runs")
    folder = tmp_path / "existing"
    folder.mkdir()
    before = _listing(run)
    argv = [str(run) if x == "{run}" else x for x in command]
    one_line_exit_2(cli(*argv, "--out", folder), str(folder), "is a folder, not a file")
    assert _listing(folder) == [] and _listing(tmp_path) == ["existing", "runs"] and _listing(run) == before


def test_corpus_wiki_empty_out(tmp_path):
    one_line_exit_2(cli_in(tmp_path, "corpus", "wiki", "--out", ""), "no file name")
    assert _listing(tmp_path) == []


def test_memory_out_naming_a_file(tmp_path):
    target = tmp_path / "afile"
    target.write_text("x")
    one_line_exit_2(cli("memory", "--out", target, "--no-progress"), str(target), "is a file, not a folder")
    assert target.read_text() == "x"


def test_memory_existing_run_id_names_what_works(tmp_path):
    (tmp_path / "mem").mkdir()
    (tmp_path / "mem" / "old").write_text("x")
    line = one_line_exit_2(cli("memory", "--out", tmp_path, "--run-id", "mem", "--no-progress"),
                           "already exists", "another --run-id")
    assert "--resume" not in line  # `simloop memory` has no --resume
    assert _listing(tmp_path) == ["mem"] and _listing(tmp_path / "mem") == ["old"]


@pytest.mark.parametrize("prefix", ["a b/", "../x", "/abs", ".hidden", "x..y"])
def test_personas_prefix_that_is_not_a_file_name_fragment(tmp_path, prefix):
    work = tmp_path / "work"
    work.mkdir()
    topics = ikat_file("2023/2023_train_topics.json")
    one_line_exit_2(cli("personas", "from-ikat", topics, "--prefix", prefix, "--out", work / "pb"),
                    f"--prefix {prefix!r}")
    assert _listing(tmp_path) == ["work"] and _listing(work) == []


@pytest.mark.parametrize("flag,value,needle", [
    ("--repeat", "5", "unknown --repeat '5' (known: 0)"),  # the run has repeat 0 only
    ("--min-grade", "9", "--min-grade 9: user grades are 0-5"),
    ("--min-grade", "3", "no dialogue of this run has a user grade"),
    ("--min-judge", "2", "--min-judge 2: normalised judge scores are 0-1"),
])
def test_export_filter_no_dialogue_could_match(tmp_path, flag, value, needle):
    run = persona_run(tmp_path)
    old = run / "export.run"
    old.write_text("an earlier export\n")
    one_line_exit_2(cli("export", run, "--format", "trec-run", flag, value), needle)
    assert old.read_text() == "an earlier export\n"


@pytest.mark.parametrize("threads", ["0", "-3"])
def test_index_build_threads_below_one(tmp_path, threads):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "d1", "contents": "a passage"}\n')
    one_line_exit_2(cli("index", "build", "--corpus", corpus, "--out", tmp_path / "ix", "--threads", threads),
                    f"--threads {threads}: must be at least 1")
    assert _listing(tmp_path) == ["c.jsonl"]


def test_mock_llm_negative_rpm_limit():
    # Refused before listening: the subprocess ends at once instead of serving.
    one_line_exit_2(cli("mock-llm", "--port", "0", "--rpm-limit", "-1", timeout=60), "--rpm-limit", "got -1")


def test_reveal_threshold_is_a_cosine(tmp_path):
    one_line_exit_2(cli("run", "--simulator", "offline", "--simulator-param", "reveal_threshold=2",
                        "--out", tmp_path, "--limit", "1", "--no-progress"), "reveal_threshold", "[-1, 1]")
    assert _listing(tmp_path) == []


def test_max_words_is_a_positive_word_count(tmp_path):
    # The offline grader's length rule: an answer over max_words cannot pass.
    one_line_exit_2(cli("run", "--simulator", "offline", "--simulator-param", "max_words=0",
                        "--out", tmp_path, "--limit", "1", "--no-progress"), "max_words", "at least 1")
    one_line_exit_2(cli("run", "--simulator", "offline", "--simulator-param", "max_words=many",
                        "--out", tmp_path, "--limit", "1", "--no-progress"), "max_words", "an integer")
    assert _listing(tmp_path) == []


def test_list_outside_the_repo_lists_the_plugins(tmp_path):
    p = cli_in(tmp_path, "list")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "bm25_extractive" in p.stdout and "offline" in p.stdout
    assert "personas: none found" in p.stdout and "--personas DIR" in p.stdout


def test_list_with_a_named_missing_persona_folder(tmp_path):
    p = cli_in(tmp_path, "list", "--personas", "nope")
    one_line_exit_2(p, "nope")
    assert p.stdout == ""  # refused before the plugin table, not after it


def _no_llm_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}


def test_eval_judge_without_an_llm(tmp_path):
    run = persona_run(tmp_path)  # its config names no endpoint: the default is the OpenAI API
    before = _listing(run)
    one_line_exit_2(cli("eval", run, "--judge", env=_no_llm_env()), "--judge needs an LLM", "--judge-base-url")
    assert _listing(run) == before


def test_eval_judge_endpoint_that_does_not_answer(tmp_path):
    run = persona_run(tmp_path)
    before = _listing(run)
    url = f"http://127.0.0.1:{free_port()}/v1"
    one_line_exit_2(cli("eval", run, "--judge", "--judge-base-url", url, "--judge-model", "m", timeout=60),
                    "LLM role 'judge'", url, "cannot connect", "check --judge-base-url")
    assert _listing(run) == before  # no summary.json of null scores


def test_eval_judge_against_the_mock_llm(tmp_path):
    run = write_run(tmp_path / "run", [transcript([turn(1), turn(2)], persona="p1")])
    with mock_llm(free_port()) as url:
        p = cli("eval", run, "--judge", "--judge-base-url", url, "--judge-model", "m", env=_no_llm_env())
    assert p.returncode == 0, p.stderr
    judge = read_json(run / "summary.json")["judge"]
    assert judge["dialogue"]["n"] == 1 and judge["overall"] is not None and not judge["errors"]


def test_memory_judge_without_an_llm(tmp_path):
    # The same check as eval's (llm.preflight.check_judge_llm): a model name alone is no endpoint.
    one_line_exit_2(cli("memory", "--judge", "--model", "m", "--out", tmp_path, "--no-progress", env=_no_llm_env()),
                    "--judge needs an LLM", "--base-url")
    assert _listing(tmp_path) == []


def test_memory_judge_endpoint_that_does_not_answer(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    one_line_exit_2(cli("memory", "--judge", "--base-url", url, "--model", "m", "--out", tmp_path, "--no-progress",
                        timeout=120), "LLM role 'judge'", url, "cannot connect")
    assert _listing(tmp_path) == []
