"""Bad input through the real CLI in a subprocess (DESIGN §12): one line on stderr, exit 2,
no traceback, nothing written; and exit 1 when a run's dialogues mostly fail."""

from __future__ import annotations

import json
import os
import socket
from contextlib import closing
from pathlib import Path

import pytest

from simloop.run import read_manifest
from tests.helpers.cli import free_port, mock_llm, one_line_exit_2
from tests.helpers.cli import simloop_cli as cli
from tests.helpers.data import ROOT, ikat_file
from tests.helpers.runs import persona_run


def test_out_pointing_at_a_file(tmp_path):
    target = tmp_path / "afile"
    target.write_text("not a folder")
    one_line_exit_2(cli("run", "--out", target, "--limit", "1", "--no-progress"), "is a file, not a folder")
    assert target.read_text() == "not a folder"


def test_assistant_param_without_assistant(tmp_path):
    one_line_exit_2(cli("run", "--assistant-param", "k=5", "--out", tmp_path, "--limit", "1"),
                    "--assistant-param needs --assistant NAME")
    assert not any(tmp_path.iterdir())


def test_export_unknown_stop_reason(tmp_path):
    run = persona_run(tmp_path)
    out = tmp_path / "x.json"
    one_line_exit_2(cli("export", run, "--format", "openai-chat", "--stop-reason", "bogus", "--out", out),
                    "bogus", "user_satisfied")
    assert not out.exists()


def test_ptkb_qrels_that_match_no_turn_of_a_persona_run(tmp_path):
    run = persona_run(tmp_path)
    qrels = tmp_path / "ptkb.qrels"
    qrels.write_text("9-1_3 0 2 1\n9-1_3 0 4 0\n")
    one_line_exit_2(cli("eval", run, "--ptkb-qrels", qrels), "ptkb.qrels", "9-1_3", "replay")
    assert not (run / "summary.json").exists() and not (run / "scores.jsonl").exists()


def test_offline_simulator_on_ikat_topics_points_to_replay_and_from_ikat(tmp_path):
    topics = ikat_file("2023", "2023_train_topics.json")
    one_line_exit_2(cli("run", "--topics", topics, "--out", tmp_path, "--limit", "1"),
                    "no rubric questions", "--simulator replay", "personas from-ikat")
    assert not any(tmp_path.iterdir())


def test_preflight_names_role_url_and_error_before_any_file(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    line = one_line_exit_2(cli("run", "--simulator", "llm", "--base-url", dead, "--out", tmp_path, "--limit", "1"),
                           "'simulator'", dead, "cannot connect")
    assert "sk-" not in line
    assert not any(tmp_path.iterdir())


def test_preflight_404_says_the_url_is_not_an_openai_api(tmp_path):
    port = free_port()
    with mock_llm(port) as url:
        wrong = url.removesuffix("/v1") + "/nope"
        one_line_exit_2(cli("run", "--assistant", "genaius", "--base-url", wrong, "--out", tmp_path, "--limit", "1"),
                        "'assistant.", wrong, "404")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("share", [(), ("--max-error-share", "1")])  # all failing is 1 whatever the share
def test_every_dialogue_failing_exits_1_with_the_commonest_error_and_the_retry_command(tmp_path, share):
    port = free_port()
    # The user's first LLM call fails, so the assistant is never asked: Parrot, which needs no
    # search index, spares the run a JVM boot (~9 s of CPU) that would add nothing here.
    with mock_llm(port, "--fault-rate", "1.0", "--faults", "500") as url:
        p = cli("run", "--simulator", "llm", "--assistant", "simloop.fakes.adversaries:Parrot", "--base-url", url,
                "--out", tmp_path, "--run-id", "f", "--limit", "2", "--no-progress",
                "--simulator-param", "grader=embedding", *share,
                env={**os.environ, "SIMLOOP_LLM__DEFAULT__MAX_ATTEMPTS": "1"})
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert "2 of 2 dialogues ended in an error (every one)" in p.stderr and "llm: LLMStatusError" in p.stderr
    assert f"simloop run --resume {tmp_path / 'f'} --retry-errors" in p.stderr
    assert p.stdout.strip().splitlines()[-1] == str(tmp_path / "f")  # the run directory stays the last line
    assert read_manifest(tmp_path / "f").counts["errors"] == 2


def test_resume_with_other_flags_names_the_flags(tmp_path):
    run = persona_run(tmp_path)
    line = one_line_exit_2(cli("run", "--resume", run, "--limit", "5", "--max-turns", "3"),
                           "--limit (run: unset, now: 5)", "--max-turns (run: 30, now: 3)")
    assert "scenarios.limit" not in line and "max_turns" not in line
    assert "keeps its config" in line
    assert json.loads((run / "run.json").read_text())["status"] == "finished"  # untouched


def test_resume_with_another_config_file_names_the_fields(tmp_path):
    run = persona_run(tmp_path)
    other = tmp_path / "other.toml"
    other.write_text("seed = 7\n[retrieval]\nk = 3\n")
    one_line_exit_2(cli("run", other, "--resume", run), "seed (run: 0, now: 7)", "retrieval.k")


def test_retry_errors_without_resume(tmp_path):
    one_line_exit_2(cli("run", "--retry-errors", "--out", tmp_path), "--retry-errors goes with --resume")


@pytest.mark.parametrize("flags", [(), ("--max-body", "100")])
def test_serve_on_a_busy_port_is_one_line_and_leaves_no_file(tmp_path, flags):
    with closing(socket.socket()) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = cli("serve", "--port", port, "--token", "t=secret-token", "--out", tmp_path, *flags, timeout=120)
    want = "already in use" if not flags else "--max-body 100"
    line = one_line_exit_2(p, want)
    assert "secret-token" not in line
    assert not (tmp_path / "serve-state.sqlite").exists() and not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, needle", [
    (("run", "--concurrency", "abc"), "simloop run: error: argument --concurrency: invalid int value: 'abc'"),
    (("run", "--backend", "foo"), "invalid choice: 'foo'"),
    (("index", "build", "--threads", "x"), "simloop index build: error: argument --threads"),
    (("run", "--no-such-flag"), "simloop run: error: unrecognized arguments: --no-such-flag (see: simloop run --help)"),
    (("index", "build", "--corpus", "c", "--out", "o", "--zz"),
     "simloop index build: error: unrecognized arguments: --zz"),
])
def test_a_flag_argparse_rejects_is_one_line_not_the_usage(args, needle):
    line = one_line_exit_2(cli(*args, timeout=120), needle)
    assert line.endswith("--help)") and "usage:" not in line


@pytest.mark.parametrize("args, needle", [
    (("--timeout", "inf"), "--timeout inf: Input should be a finite number"),
    (("--max-error-share", "nan"), "--max-error-share nan: Input should be a finite number"),
    (("--run-id", ""), "--run-id '': String should have at least 1 character"),
    (("--address", "ray://127.0.0.1:1"), "error: --address is for --backend ray"),
])
def test_run_settings_that_would_be_ignored_or_meaningless_are_refused(tmp_path, args, needle):
    # Each was accepted before: inf and nan as limits, '' as "make up an id", an address without Ray.
    one_line_exit_2(cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress", *args, timeout=120), needle)
    assert not any(tmp_path.iterdir())


def test_mock_llm_on_a_busy_port_says_so_as_serve_does():
    with closing(socket.socket()) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = cli("mock-llm", "--port", port, timeout=120)
    line = one_line_exit_2(p, f"mock-llm: cannot listen on 127.0.0.1:{port}: already in use")
    assert "pick another --port" in line


@pytest.mark.parametrize("command", ["serve", "mock-llm"])
@pytest.mark.parametrize("port", [65536, -1])
def test_a_port_out_of_range_is_one_line(tmp_path, command, port):
    # It was an OverflowError traceback from bind (and for serve -1 a complaint about the host).
    extra = ("--token", "t=secret-token", "--out", tmp_path) if command == "serve" else ()
    one_line_exit_2(cli(command, "--port", port, *extra, timeout=120), str(port), "0-65535")
    assert not any(tmp_path.iterdir())


def test_serve_with_an_llm_user_whose_endpoint_is_down(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    p = cli("serve", "--port", free_port(), "--token", "t=secret-token", "--out", tmp_path, "--simulator", "llm",
            "--base-url", dead, timeout=120)
    one_line_exit_2(p, "'simulator'", dead, "cannot connect")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("var, value, expected", [
    ("SIMLOOP_LLM_HTTP", "curl", "wire, aiohttp, openai-aiohttp, httpx"),
    ("SIMLOOP_EMBED_RUNTIME", "torch", "onnx, numpy"),
])
def test_a_bad_choice_variable_is_refused_before_anything_is_written(tmp_path, var, value, expected):
    env = {**os.environ, var: value}
    line = one_line_exit_2(cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress", env=env),
                           f"{var}={value!r}: expected one of {expected}")
    assert line.startswith("simloop: error: ")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("var, value", [("SIMLOOP_EMBED_THREADS", "abc"), ("SIMLOOP_TORCH_THREADS", "0")])
def test_a_bad_thread_count_variable_is_refused_before_anything_is_written(tmp_path, var, value):
    # It was a ValueError traceback from the embedder, after the run folder existed.
    env = {k: v for k, v in os.environ.items() if k not in ("SIMLOOP_EMBED_THREADS", "SIMLOOP_TORCH_THREADS")}
    p = cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress", env={**env, var: value})
    line = one_line_exit_2(p, f"{var}={value!r}: expected a whole number, at least 1")
    assert line.startswith("simloop: error: ")
    assert list(tmp_path.iterdir()) == []



# --------------------------------------------------------------------------- paths, encodings, plugin specs
def _edited_run(tmp_path: Path, edit) -> Path:
    run = persona_run(tmp_path)
    data = json.loads((run / "run.json").read_text())
    edit(data["config"])
    (run / "run.json").write_text(json.dumps(data))
    return run


@pytest.mark.parametrize("edit, needles", [
    (lambda c: c.update(max_turns="lots"), ("run.json: config.max_turns:", "valid integer")),
    (lambda c: c.update(frobnicate=1), ("run.json: config.frobnicate:", "Extra inputs are not permitted")),
])
def test_resume_of_a_run_whose_config_no_longer_validates(tmp_path, edit, needles):
    # It was a 28-line pydantic traceback, exit 1 (an edited run.json, or another simloop version's).
    run = _edited_run(tmp_path, edit)
    before = (run / "run.json").read_bytes()
    line = one_line_exit_2(cli("run", "--resume", run), str(run / "run.json"), *needles)
    assert "cannot resume" in line
    assert (run / "run.json").read_bytes() == before
    assert cli("show", run).returncode == 0  # reading such a run still works


def test_a_config_file_that_is_not_utf8(tmp_path):
    config = tmp_path / "run.toml"
    config.write_bytes(b"\xff\xfeseed = 1\n")
    one_line_exit_2(cli("run", config, "--out", tmp_path / "out"), str(config), "not UTF-8 text (byte 0)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]


def _folder_for(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir(parents=True)
    return tmp_path / name


@pytest.mark.parametrize("case", ["config", "resume-file", "dialogues-run", "dialogues-show", "dialogues-eval",
                                  "manifest", "qrels", "topics"])
def test_a_path_of_the_wrong_kind_is_one_line(tmp_path, case):
    # Each was exit 1 with IsADirectoryError / NotADirectoryError (or "no such file" for a folder).
    run = persona_run(tmp_path / "runs")
    if case == "config":
        path = _folder_for(tmp_path, "run.toml")
        args, needles = ("run", path, "--out", tmp_path / "out"), (str(path), "is a folder, not a file")
    elif case == "resume-file":
        path = tmp_path / "afile"
        path.write_text("x")
        args, needles = ("run", "--resume", path), (str(path), "not a run directory (it is a file)")
    elif case.startswith("dialogues"):
        (run / "dialogues.jsonl").unlink()
        path = _folder_for(run, "dialogues.jsonl")
        args = {"dialogues-run": ("run", "--resume", run), "dialogues-show": ("show", run),
                "dialogues-eval": ("eval", run)}[case]
        needles = (str(path), "is a folder, not a file")
    elif case == "manifest":
        (run / "run.json").unlink()
        path = _folder_for(run, "run.json")
        args, needles = ("run", "--resume", run), (str(path), "is a folder, not a file")
    elif case == "qrels":
        path = _folder_for(tmp_path, "qrels")
        args, needles = ("eval", run, "--qrels", path), (f"--qrels {path}", "is a folder, not a file")
    else:
        path = _folder_for(tmp_path, "topics.json")
        args, needles = ("run", "--simulator", "replay", "--topics", path, "--out", tmp_path / "out"), \
            (str(path), "is a folder, not a file")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    one_line_exit_2(cli(*args), *needles)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("spec, source, needle", [
    (":", None, "':': give a registered name or module:attr (both parts)"),
    ("boom_at_import:X", "raise RuntimeError('boom at import')\n",
     "cannot import assistant module 'boom_at_import': RuntimeError: boom at import"),
    ("broken_syntax:X", "def (\n", "cannot import assistant module 'broken_syntax': SyntaxError: invalid syntax"),
])
def test_an_assistant_module_that_cannot_be_imported(tmp_path, spec, source, needle):
    # ':' was a ValueError traceback; a module raising at import, or not parsing, a 40-line one.
    if source is not None:
        (tmp_path / f"{spec.partition(':')[0]}.py").write_text(source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    one_line_exit_2(cli("run", "--assistant", spec, "--out", tmp_path / "out", env=env), needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [("run", "--limit", "1"), ("memory",)])
def test_an_empty_out_is_refused_not_the_current_folder(tmp_path, command):
    # It wrote the run into the current folder, exit 0 (`--run-id ''` was refused already).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = cli(*command, "--out", "", "--no-progress", cwd=tmp_path, env=env)
    one_line_exit_2(p, "--out '': an empty path", "'.' for the current folder")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the search backend's environment
def _run_env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "SIMLOOP_JVM_OPTIONS"}, **extra}


@pytest.mark.parametrize("options, needle", [
    ("-Xmx1k", "Too small maximum heap"),  # the JVM ended the process itself: exit 1, run.json 'running'
    ("-Xbogus", "Unrecognized option: -Xbogus"),  # exit 1, run.json 'failed'
])
def test_jvm_options_java_refuses_are_found_before_the_run_folder(tmp_path, options, needle):
    p = cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress",
            env=_run_env(SIMLOOP_JVM_OPTIONS=options))
    one_line_exit_2(p, f"SIMLOOP_JVM_OPTIONS='{options}': Java does not start with these options", needle)
    assert list(tmp_path.iterdir()) == []


def test_a_cache_that_is_a_file_is_found_before_the_run_folder(tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("x")
    p = cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress", env=_run_env(SIMLOOP_CACHE=str(cache)))
    one_line_exit_2(p, f"SIMLOOP_CACHE={cache}", "is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_damaged_index_is_one_line_without_the_java_stack_trace(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "segments_1").write_bytes(b"junk")
    p = cli("run", "--out", tmp_path / "out", "--limit", "1", "--no-progress", "--index", index, env=_run_env())
    line = one_line_exit_2(p, f"{index}: Lucene cannot open this index", "rebuild it")
    assert "org.apache" not in line and ".java:" not in p.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


# --------------------------------------------------------------------------- minor
def test_a_config_error_inside_llm_roles_names_the_config_file(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[llm.roles.simulator]\napi_key = "sk-secret-value"\n')
    line = one_line_exit_2(cli("run", config, "--out", tmp_path / "out"),
                           f"{config}: llm.roles.simulator: unknown key 'api_key'")
    assert "sk-secret-value" not in line


def test_a_run_id_outside_ascii_says_ascii(tmp_path):
    one_line_exit_2(cli("run", "--run-id", "ünï", "--out", tmp_path, "--limit", "1", "--no-progress"),
                    "run id 'ünï': use ASCII letters")
    assert list(tmp_path.iterdir()) == []


def test_a_missing_relative_topic_file_names_the_config_file(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[scenarios]\ntopics = "nope/topics.json"\n')
    one_line_exit_2(cli("run", config, "--simulator", "replay", "--out", tmp_path / "out"),
                    f"{config}: scenarios.topics: nope/topics.json not found",
                    f"relative to the current folder, {ROOT}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]
