"""A grade the LLM cannot deliver is an infrastructure error, never user behaviour: the real
CLI and the openai client over HTTP against ``simloop mock-llm`` answering bad JSON."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cli import free_port, mock_llm, simloop_cli
from tests.helpers.data import ROOT

pytestmark = pytest.mark.slow  # subprocess runs, MiniLM (the template voice's persona facts)


def _run(url: str, out: Path, *extra: str):
    env = {**os.environ, "OPENAI_API_KEY": "sk-grade-faults"}
    return simloop_cli("run", "--personas", ROOT / "personas", "--simulator", "llm",
                       "--simulator-param", "voice=template", "--assistant", "simloop.fakes.adversaries:Parrot",
                       "--base-url", url, "--model", "mock-model", "--max-turns", "12", "--limit", "4",
                       "--out", out, "--run-id", "badgrades", "--no-progress", *extra, env=env)


def _lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "dialogues.jsonl").read_text().splitlines()]


def test_failed_grading_is_an_llm_error_that_retry_errors_reruns(tmp_path):
    port, run = free_port(), tmp_path / "badgrades"
    # Every answer is invalid JSON: each grade's first answer and its one repair fail.
    with mock_llm(port, "--fault-rate", "1.0", "--faults", "badjson") as url:
        p = _run(url, tmp_path)
    ts = _lines(run)
    assert len(ts) == 4
    # Before: max_turns / user_gave_up with error null (the failed grades played as the
    # user asking for clarification), or a "simulator" DialogueError --retry-errors skips.
    ended = [(t["stop"]["reason"], (t["error"] or {}).get("source"), (t["error"] or {}).get("type")) for t in ts]
    assert ended == [("error", "llm", "StructuredOutputError")] * 4
    assert all(turn["user"]["intent"] != "clarify" for t in ts for turn in t["turns"])
    counts = json.loads((run / "run.json").read_text())["counts"]
    assert counts["errors.infrastructure"] == 4
    # README, exit codes: every dialogue ended in an error -> 1, naming the retry command.
    assert p.returncode == 1, p.stderr
    assert "StructuredOutputError" in p.stderr and "--retry-errors" in p.stderr

    with mock_llm(port) as url:  # the endpoint is healthy again
        p = simloop_cli("run", "--resume", run, "--retry-errors", "--no-progress",
                        env={**os.environ, "OPENAI_API_KEY": "sk-grade-faults"})
    assert p.returncode == 0, p.stderr
    ts = _lines(run)
    assert len(ts) == 4 and all(t["error"] is None for t in ts)
    assert json.loads((run / "run.json").read_text())["counts"]["retried"] == 4
