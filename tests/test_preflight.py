"""The preflight of a run that calls a model (llm/preflight.py), through real subprocesses
against ``simloop mock-llm``; what it refuses is in test_bad_input.py."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import free_port, mock_llm


def test_a_run_that_calls_a_model_imports_openai_while_preparing(tmp_path):
    # Imported on the first call instead, openai held the event loop for 0.5-1 s while every
    # dialogue waited (scripts/bench, agents section).  An offline run still never imports it.
    script = (
        "import sys\n"
        "from simloop.config import RunConfig\n"
        "from simloop.run.runner import prepare_run\n"
        "cfg = RunConfig.model_validate({'out': sys.argv[1], 'simulator': {'name': sys.argv[2]},\n"
        "    'assistant': {'name': 'simloop.fakes.adversaries:Parrot'}, 'llm': {'default': {'base_url': sys.argv[3]}}})\n"
        "prepare_run(cfg).recorder.close()\n"
        "print('openai' in sys.modules)\n")
    with mock_llm(free_port()) as url:
        seen = {}
        for simulator in ("llm", "offline"):
            p = subprocess.run([sys.executable, "-c", script, str(tmp_path / simulator), simulator, url],
                               capture_output=True, text=True, timeout=120,
                               env={**os.environ, "OPENAI_API_KEY": "sk-prepare-test"})
            assert p.returncode == 0, p.stderr
            seen[simulator] = p.stdout.strip().splitlines()[-1]
    assert seen == {"llm": "True", "offline": "False"}
