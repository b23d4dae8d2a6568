"""Commands whose every LLM call failed exit 1 with one line naming the commonest error and
how to retry, even when no dialogue ended in an error (issue 33, DESIGN §12).

The assistant here is ``bm25_extractive`` with the ``summary`` memory: its only LLM calls
are the summaries, and a failed summary keeps the turns verbatim, so every dialogue ends
well while nothing the model should have written was written."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.cli import free_port, mock_llm
from tests.helpers.cli import simloop_cli as cli

pytestmark = pytest.mark.slow  # each boots the JVM for BM25

# One attempt per call: the refusals are the point, not the retries.
ENV = {**os.environ, "SIMLOOP_LLM__DEFAULT__MAX_ATTEMPTS": "1"}


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if "LLM calls failed" in ln]


def _config(tmp_path, url: str) -> str:
    """A run config: the LLM endpoint for the summaries (flags would be refused: the
    assistant does not name the summary role among its LLM roles)."""
    path = tmp_path / "run.toml"
    path.write_text(f'[assistant]\nname = "bm25_extractive"\nparams = {{memory = "summary"}}\n'
                    f'[llm.default]\nbase_url = "{url}"\nmodel = "m"\nmax_attempts = 1\n')
    return str(path)


def test_run_exits_1_when_every_llm_call_failed_though_no_dialogue_did(tmp_path):
    with mock_llm(free_port(), "--fault-rate", "1", "--faults", "500") as url:
        p = cli("run", _config(tmp_path, url), "--limit", "2", "--max-turns", "3", "--out", tmp_path / "runs",
                "--no-progress")
    assert p.returncode == 1, p.stderr
    run_dir = p.stdout.strip().splitlines()[-1]
    lines = [json.loads(x) for x in open(os.path.join(run_dir, "dialogues.jsonl"))]
    assert lines and all(t["error"] is None for t in lines)  # the dialogues themselves ended well
    [line] = _error_lines(p.stderr)
    assert "every one of the" in line and "HTTP 500" in line and "check the endpoint" in line
    assert "Traceback" not in p.stderr


def test_run_exits_0_when_some_llm_calls_answer(tmp_path):
    with mock_llm(free_port(), "--fault-rate", "0.5", "--faults", "500", "--seed", "3") as url:
        p = cli("run", _config(tmp_path, url), "--limit", "2", "--max-turns", "4", "--out", tmp_path / "runs",
                "--no-progress")
    assert p.returncode == 0, p.stderr
    assert not _error_lines(p.stderr)


def test_memory_exits_1_when_every_llm_call_failed(tmp_path):
    with mock_llm(free_port(), "--fault-rate", "1", "--faults", "500") as url:
        p = cli("memory", "--strategies", "summary", "--distances", "2", "--base-url", url, "--model", "m",
                "--out", tmp_path, "--no-progress", env=ENV, timeout=600)
    assert p.returncode == 1, p.stderr
    [line] = _error_lines(p.stderr)
    assert "HTTP 500" in line and "simloop memory again" in line
    assert os.path.exists(os.path.join(p.stdout.strip().splitlines()[-1], "memory.json"))


def test_the_advice_points_at_the_model_when_the_server_answered_badly():
    from simloop.cli.outcome import what_to_check

    botched = what_to_check("StructuredOutputError: judge (m at http://127.0.0.1:1/v1): output does not match "
                            "DialogueVerdict after one repair", "--judge-base-url/--judge-model")
    assert "stronger model" in botched and "--judge-base-url" not in botched
    down = what_to_check("LLMStatusError: judge: HTTP 500", "--judge-base-url/--judge-model")
    assert "check the endpoint (--judge-base-url/--judge-model" in down
