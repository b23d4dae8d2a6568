"""Bad input to `simloop serve`, `simloop rehearse` and the LLM cache, through the real CLI
in a subprocess (DESIGN §12): one line on stderr, exit 2, no traceback, nothing written."""

from __future__ import annotations

import pytest

from tests.helpers.cli import free_port, mock_llm, one_line_exit_2
from tests.helpers.cli import simloop_cli as cli


def _serve(tmp_path, *flags):
    tokens = tmp_path / "tokens"
    tokens.write_text("t=secret-token\n")
    return cli("serve", "--port", free_port(), "--tokens-file", tokens, *flags, timeout=120)


def _written(tmp_path) -> list[str]:
    """What is in ``tmp_path`` besides the inputs the test put there."""
    return sorted(p.name for p in tmp_path.iterdir() if p.name not in {"tokens", "input"})


@pytest.mark.parametrize("prefix", ["nosslash", "/a b", "/x?y"])
def test_serve_prefix_without_a_leading_slash(tmp_path, prefix):
    # It was FastAPI's AssertionError traceback, after the state file was created.
    one_line_exit_2(_serve(tmp_path, "--prefix", prefix, "--out", tmp_path / "out"), "--prefix", "'/'")
    assert _written(tmp_path) == []


def test_serve_out_naming_a_file(tmp_path):
    target = tmp_path / "input"
    target.write_text("not a folder")
    one_line_exit_2(_serve(tmp_path, "--out", target), "--out", "is a file, not a folder")
    assert target.read_text() == "not a folder"


@pytest.mark.parametrize("kind", ["text", "folder", "under-a-file"])
def test_serve_state_that_cannot_be_a_database(tmp_path, kind):
    given = tmp_path / "input"
    if kind == "folder":
        given.mkdir()
        state = given
    else:
        given.write_text("not sqlite at all\n")
        state = given / "s.sqlite" if kind == "under-a-file" else given
    want = {"text": "not an SQLite database", "folder": "a folder", "under-a-file": "is a file, not a folder"}[kind]
    one_line_exit_2(_serve(tmp_path, "--state", state, "--out", tmp_path / "out"), f"state file {state}", want)
    assert _written(tmp_path) == []


def test_serve_default_state_file_that_is_not_a_database(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "serve-state.sqlite").write_text("garbage")
    one_line_exit_2(_serve(tmp_path, "--out", out), "serve-state.sqlite", "not an SQLite database")
    assert sorted(p.name for p in out.iterdir()) == ["serve-state.sqlite"]


@pytest.mark.parametrize("flag,value,accepts", [
    ("--run-budget", "-1", "give 0"), ("--debug-budget", "-1", "give 0"),
    ("--max-response-tokens", "0", "at least 1 token"), ("--max-response-chars", "0", "at least 1 character"),
    ("--max-response-chars", "-1", "at least 1 character"),
])
def test_serve_limits_out_of_range(tmp_path, flag, value, accepts):
    one_line_exit_2(_serve(tmp_path, flag, value, "--out", tmp_path / "out"), f"{flag} {value}:", accepts)
    assert _written(tmp_path) == []


def _rehearse(tmp_path, *flags, api: str | None = None):
    api = api or f"http://127.0.0.1:{free_port()}"  # nothing listens: local inputs must fail first
    return cli("rehearse", "--api", api, "--token", "secret-token", "--assistant", "simloop.fakes.adversaries:Parrot",
               "--out", tmp_path / "out", "--run-id", "r", *flags, timeout=120)


def test_rehearse_malformed_topics_before_any_file_or_request(tmp_path):
    # It wrote run.json and the .rehearse state, and had the server start a run, first.
    topics = tmp_path / "input"
    topics.write_text('{"bad json')
    one_line_exit_2(_rehearse(tmp_path, "--topics", topics), str(topics), "not valid JSON")
    assert _written(tmp_path) == []


def test_rehearse_state_dir_naming_a_file(tmp_path):
    (tmp_path / "input").write_text("a file")
    line = one_line_exit_2(_rehearse(tmp_path, "--state-dir", tmp_path / "input"), "--state-dir", "not a folder")
    assert "unreadable rehearse state" not in line
    assert _written(tmp_path) == []


@pytest.mark.parametrize("api,want", [
    (None, "cannot reach the Sim.API server"),
    ("notaurl", "--api 'notaurl': give the server's URL, starting with http://"),
    ("http://", "cannot reach")])
def test_rehearse_api_that_is_malformed_or_does_not_answer(tmp_path, api, want):
    line = one_line_exit_2(_rehearse(tmp_path, api=api), want)
    assert line.startswith("simloop: error: ") and "secret-token" not in line
    assert _written(tmp_path) == []


@pytest.mark.parametrize("flag,value", [("--timeout", "-1"), ("--timeout", "0"), ("--dialogue-timeout", "0"),
                                        ("--max-response-tokens", "0"), ("--concurrency", "0"), ("--limit", "0")])
def test_rehearse_flags_out_of_range(tmp_path, flag, value):
    one_line_exit_2(_rehearse(tmp_path, flag, value), f"{flag} {value}:", "give")
    assert _written(tmp_path) == []


@pytest.mark.parametrize("kind", ["text", "folder"])
def test_run_cache_that_is_not_an_sqlite_file(tmp_path, kind):
    # It started the run and every dialogue ended in "simulator: DatabaseError: file is not a database".
    cache = tmp_path / "input"
    cache.mkdir() if kind == "folder" else cache.write_text("not sqlite\n")
    with mock_llm(free_port()) as url:
        p = cli("run", "--simulator", "llm", "--assistant", "simloop.fakes.adversaries:Parrot", "--base-url", url,
                "--cache", cache, "--out", tmp_path / "out", "--limit", "1", "--no-progress", timeout=120)
    one_line_exit_2(p, f"--cache {cache}", "not an SQLite database" if kind == "text" else "a folder")
    assert _written(tmp_path) == []
