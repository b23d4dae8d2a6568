"""`simloop llm-server` through the real CLI: bad input, the URL on the first line, stopping
on real signals with nothing left running (DESIGN §11, §12)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.helpers.cli import one_line_exit_2
from tests.helpers.cli import simloop_cli as cli
from tests.helpers.data import ROOT
from tests.helpers.llm_server import llm_server


def _gone(pid: int, within_s: float = 30.0) -> bool:
    """Has process ``pid`` ended (or become a zombie nobody reaps)?"""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.2)
    return False


def test_an_unknown_model_is_one_line_naming_the_known_ones():
    one_line_exit_2(cli("llm-server", "--model", "gemma3"), "gemma3", "known: smollm2")


def test_bad_threads_and_timeout_are_one_line_each():
    one_line_exit_2(cli("llm-server", "--threads", "0"), "--threads")
    one_line_exit_2(cli("llm-server", "--ready-timeout", "0"), "--ready-timeout")


def test_without_the_extra_it_names_the_install_command():
    """As in a venv without simloop[local-llm]: llama_cpp cannot be found."""
    code = ("import sys; sys.modules['llama_cpp'] = None; from simloop.cli import main; "
            "sys.exit(main(['llm-server']))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    line = one_line_exit_2(p, "llama-cpp-python", "pip install 'simloop[local-llm]'")
    assert p.stdout == "", line


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_then_stops_on_a_signal_with_nothing_left(sig):
    with llm_server("--threads", "1") as srv:
        assert srv.url.startswith("http://127.0.0.1:") and srv.url.endswith("/v1")
        with urllib.request.urlopen(f"{srv.url}/models", timeout=30) as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["smollm2"]
        server = srv.server_pid()
        assert server is not None
        srv.proc.send_signal(sig)
        assert srv.proc.wait(timeout=60) == 130
        assert _gone(server)
        rest = srv.proc.stdout.read() if srv.proc.stdout else ""
        assert rest == ""  # the URL was the only line of stdout
        assert "Traceback" not in srv.errors() and "stopped" in srv.errors()


@pytest.mark.slow
def test_a_given_port_is_used_and_a_busy_one_refused():
    from tests.helpers.cli import free_port

    port = free_port()
    with llm_server("--port", str(port), "--threads", "1") as srv:
        assert srv.url == f"http://127.0.0.1:{port}/v1"
        one_line_exit_2(cli("llm-server", "--port", port), f"127.0.0.1:{port}", "already in use")


@pytest.mark.slow
def test_the_server_does_not_outlive_a_killed_launcher():
    """SIGKILL gives the launcher no chance to stop its child: the kernel does (Linux)."""
    with llm_server("--threads", "1") as srv:
        server = srv.server_pid()
        assert server is not None
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(timeout=30)
        assert _gone(server)
