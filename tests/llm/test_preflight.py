"""The preflight of a run that calls a model (llm/preflight.py), through real subprocesses
against ``simloop mock-llm``; what it refuses of the config is in test_bad_input.py, what its
probe refuses of the server is here (and, in-process, in test_probe.py)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from simloop.run import read_manifest
from tests.helpers.cli import free_port, mock_llm, one_line_exit_2, simloop_cli


def test_a_run_that_calls_a_model_imports_openai_while_preparing(tmp_path):
    # Imported on the first call instead, openai held the event loop for 0.5-1 s while every
    # dialogue waited (scripts/bench, agents section).  An offline run still never imports it.
    script = (
        "import sys\n"
        "from simloop.config import RunConfig\n"
        "from simloop.run.runner import prepare_run\n"
        "cfg = RunConfig.model_validate({'out': sys.argv[1], 'simulator': {'name': sys.argv[2]},\n"
        "    'assistant': {'name': 'simloop.fakes.adversaries:Parrot'},\n"
        "    'llm': {'default': {'base_url': sys.argv[3]}}})\n"
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


def test_a_plain_http_endpoint_is_checked_without_loading_the_ca_bundle(monkeypatch):
    # Loading the bundle cost 50-100 ms of CPU in front of every run against a local server.
    import simloop.llm.http  # noqa: F401  what check_endpoints imports last: aiohttp makes contexts at import
    from simloop.errors import ConfigError
    from simloop.llm.config import LLMConfig
    from simloop.llm.preflight import check_endpoints

    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    bundles = []
    real = ssl.create_default_context
    with mock_llm(free_port()) as url:  # (its readiness probe, urllib, makes a context of its own)
        monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: bundles.append(k) or real(*a, **k))
        check_endpoints(LLMConfig.model_validate({"default": {"base_url": url}}), ["assistant"])
    assert bundles == []
    # https still verifies: the bundle is loaded (nobody listens there, so the check fails)
    https = LLMConfig.model_validate({"default": {"base_url": f"https://127.0.0.1:{free_port()}/v1"}})
    with pytest.raises(ConfigError, match="cannot connect"):
        check_endpoints(https, ["assistant"])
    assert bundles


@pytest.mark.parametrize("form", ["http://u:{key}@{host}/v1", "http://{host}/v1?api-key={key}"])
def test_a_preflight_failure_never_shows_a_key_in_the_url(form):
    # Such a URL is refused when the config is validated (tests/cli/test_bad_input.py); this is the
    # second line of defence, for one that got past it (built without validation here).
    import httpx

    from simloop.errors import ConfigError
    from simloop.llm.config import LLMRole
    from simloop.llm.preflight import check_role

    key = "sk-AUDIT-SECRET-123"
    role = LLMRole.model_construct(base_url=form.format(key=key, host=f"127.0.0.1:{free_port()}"))
    with httpx.Client(timeout=5) as client, pytest.raises(ConfigError, match="cannot connect") as info:
        check_role("simulator", role, client)
    assert key not in str(info.value) and "***" in str(info.value)


# ----------------------------------------------------------------------------- what the probe refuses, end to end

LLM_RUN = ("run", "--simulator", "llm", "--assistant", "simloop.fakes.adversaries:Parrot", "--model", "mock-model",
           "--max-turns", "2", "--concurrency", "1")


@pytest.mark.parametrize("flags, needles", [
    (("--profile", "vllm", "--model", "served"), ("no model 'mock-model'", "it offers: served")),
    (("--refuse", "response_format", "--no-json"), ("cannot produce JSON",)),
    (("--profile", "llama-server", "--context-window", "300"), ("max_tokens 512 leaves no room", "300 tokens")),
])
def test_bad_llm_input_exits_2_before_anything_is_written(tmp_path, flags, needles):
    with mock_llm(free_port(), *flags) as url:
        p = simloop_cli(*LLM_RUN, "--base-url", url, "--out", tmp_path / "runs", timeout=120)
    one_line_exit_2(p, *needles)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_prompt_too_long_stops_new_dialogues_and_a_resume_runs_them_once_it_fits(tmp_path):
    port = free_port()
    with mock_llm(port, "--profile", "llama-cpp-python", "--context-window", "64") as url:
        p = simloop_cli(*LLM_RUN, "--base-url", url, "--limit", "3", "--out", tmp_path, timeout=120)
    assert p.returncode == 1, p.stderr
    run_dir = Path(p.stdout.strip().splitlines()[-1])
    [line] = (run_dir / "dialogues.jsonl").read_text().splitlines()  # the first dialogue only
    error = json.loads(line)["error"]
    assert error["source"] == "llm" and error["type"] == "ContextOverflowError"
    assert "simulator" in error["message"] and "context window of 64 tokens" in error["message"]
    assert "stopped starting dialogues" in p.stderr and "--resume" in p.stderr
    [caps] = read_manifest(run_dir).llm.capabilities
    assert (caps.structured, caps.learnt.structured, caps.probe_requests) == ("json_object", "probe", 2)
    assert (caps.context_window, caps.learnt.context_window) == (64, "refusal") and set(caps.overflows) == {"simulator"}
    # The server restarted with its default window (2048): the resume runs what is left and what failed.
    with mock_llm(port, "--profile", "llama-cpp-python"):
        again = simloop_cli("run", "--resume", run_dir, "--retry-errors", timeout=120)
    assert again.returncode == 0, again.stderr
    manifest = read_manifest(run_dir)
    assert manifest.counts["dialogues"] == 3 and manifest.counts["errors"] == 0
    [caps] = manifest.llm.capabilities  # this session's findings replace the last one's
    assert caps.context_window is None and caps.overflows == {} and caps.structured == "json_object"


# ----------------------------------------------------------------------------- a busy server is not a down one


class _SlowListing:
    """A real HTTP server on 127.0.0.1 whose ``GET /models`` answers after ``delay_s``, as
    llama-cpp-python's does while it finishes a generation."""

    def __init__(self, delay_s: float):
        import http.server
        import threading
        import time

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                time.sleep(delay_s)
                body = b'{"object": "list", "data": [{"id": "mock-model", "object": "model"}]}'
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up waiting: that is the case under test
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_a_server_that_connects_but_answers_slowly_passes_within_the_roles_timeout(monkeypatch):
    import httpx

    from simloop.errors import ConfigError
    from simloop.llm import preflight
    from simloop.llm.config import LLMRole

    monkeypatch.setattr(preflight, "PREFLIGHT_TIMEOUT_S", 0.2)  # the connection bound, scaled down
    # the client as check_endpoints builds it: the connection bound is its default timeout
    with _SlowListing(delay_s=0.6) as url, httpx.Client(timeout=preflight.PREFLIGHT_TIMEOUT_S) as client:
        listing = preflight.check_role("simulator", LLMRole(base_url=url, timeout_s=5.0), client)
        assert listing["data"][0]["id"] == "mock-model"  # busy longer than a connection may take: still there
        with pytest.raises(ConfigError, match=r"connected, but no answer to GET /models within 0.3 s") as info:
            preflight.check_role("simulator", LLMRole(base_url=url, timeout_s=0.3), client)
    assert "start the server" in str(info.value)
