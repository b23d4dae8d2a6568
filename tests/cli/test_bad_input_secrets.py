"""A secret inside a URL (an LLM base URL, the Sim.API server, a remote assistant, the judge)
through the real CLI: refused before any file with one line that never repeats it (it
reached run.json, the preflight error and -v's log lines)."""

from __future__ import annotations

import os

import pytest

from tests.helpers.cli import free_port, one_line_exit_2
from tests.helpers.cli import simloop_cli as cli
from tests.helpers.runs import persona_run

AUDIT_KEY = "sk-AUDIT-SECRET-123"


@pytest.mark.parametrize("form", ["u:{key}@", "{key}@", "?api-key={key}"])
@pytest.mark.parametrize("where, named", [
    ("--base-url", "--base-url: "), ("config", "{config}: llm.roles.simulator: base_url: "),
    ("OPENAI_BASE_URL", "OPENAI_BASE_URL: "),
    ("SIMLOOP_LLM__DEFAULT__BASE_URL", "SIMLOOP_* environment / flags: llm.default.base_url: "),
])
def test_a_key_in_an_llm_url_is_refused_before_any_file_and_never_shown(tmp_path, form, where, named):
    # It reached run.json ("base_url": "http://u:sk-...@..."), the preflight error and -v's log lines.
    host = f"127.0.0.1:{free_port()}"  # nothing listens there: the refusal comes first
    url = (f"http://{host}/v1" + form if form.startswith("?") else f"http://{form}{host}/v1").format(key=AUDIT_KEY)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    flags: tuple = ("--base-url", url)
    if where == "config":
        config = tmp_path / "run.toml"
        config.write_text(f'[llm.roles.simulator]\nbase_url = "{url}"\n')
        flags = (config,)
    elif where != "--base-url":
        env[where], flags = url, ()
    out = tmp_path / "out"
    p = cli("-v", "run", *flags, "--simulator", "llm", "--assistant", "genaius", "--out", out, "--limit", "1",
            "--no-progress", env=env)
    line = one_line_exit_2(p, "the URL carries", "OPENAI_API_KEY", "api_key_env")
    assert line.startswith(f"simloop: error: {named.format(config=tmp_path / 'run.toml')}the URL carries ")
    assert AUDIT_KEY not in p.stderr + p.stdout
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ("rehearse", "--api", f"http://team:{AUDIT_KEY}@127.0.0.1:9", "--token", "t", "--assistant", "bm25_extractive"),
    ("rehearse", "--api", f"127.0.0.1:9/?token={AUDIT_KEY}", "--token", "t", "--assistant", "bm25_extractive"),
    ("run", "--assistant", "remote_http", "--assistant-param", f"url=http://127.0.0.1:9/turn?access_token={AUDIT_KEY}"),
])
def test_a_key_in_a_sim_api_or_remote_assistant_url_is_refused(tmp_path, args):
    p = cli("-v", *args, "--out", tmp_path / "out", "--limit", "1")
    line = one_line_exit_2(p, "the URL carries", "token-env" if args[0] == "rehearse" else "token_env")
    assert AUDIT_KEY not in p.stderr + p.stdout
    assert ("--api: " if args[0] == "rehearse" else "url: ") in line
    assert not any(tmp_path.iterdir())


def test_a_key_in_the_judge_url_is_refused_before_scoring(tmp_path):
    run = persona_run(tmp_path)
    p = cli("eval", run, "--judge", "--judge-base-url", f"http://127.0.0.1:9/v1?api-key={AUDIT_KEY}",
            "--judge-model", "m")
    one_line_exit_2(p, "--judge-base-url: the URL carries the query parameter 'api-key'", "OPENAI_API_KEY")
    assert AUDIT_KEY not in p.stderr + p.stdout
    assert not (run / "summary.json").exists() and not (run / "scores.jsonl").exists()
