"""Plugin parameters (issue 12): wrong types and ranges are one line and exit 2, and the
run's ``retrieval.k`` / ``--k`` is honoured by every assistant or rejected by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from simloop.cli import main
from simloop.config import RunConfig
from simloop.errors import BadInputError
from simloop.run import read_manifest, read_transcripts
from simloop.run.plugins import Context, available, effective_params, load_plugin, resolve
from tests.helpers.cli import simloop_cli
from tests.helpers.data import ROOT


def _bad_run(capsys, tmp_path: Path, *flags: str) -> str:
    out = tmp_path / "out"
    code = main(["run", "--personas", str(ROOT / "personas"), "--limit", "1", "--out", str(out), "--no-progress",
                 "--simulator", "offline", "--assistant", "bm25_extractive",
                 *flags])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert not out.exists()  # nothing half-written
    return lines[0]


@pytest.mark.parametrize("flags, names", [
    (("--simulator-param", "threshold=abc"), ("threshold", "a number")),
    (("--simulator-param", "retries=2.5"), ("retries", "an integer")),
    (("--assistant-param", "k=ten"), ("k", "an integer")),
    (("--assistant-param", "ptkb_threshold=[1]"), ("ptkb_threshold", "a number")),
    (("--assistant-param", "colour=red"), ("colour", "max_words")),  # unknown: the known ones listed
])
def test_a_parameter_of_the_wrong_type_names_itself_and_what_it_takes(capsys, tmp_path, flags, names):
    line = _bad_run(capsys, tmp_path, *flags)
    assert all(n in line for n in names), line
    assert "not supported between" not in line  # the old TypeError text


@pytest.mark.parametrize("flags, name", [
    (("--simulator-param", "threshold=7"), "threshold"),
    (("--simulator-param", "retries=0"), "retries"),
    (("--assistant-param", "k=0"), "k >= 1"),
    (("--assistant-param", "max_words=3"), "max_words"),
])
def test_a_parameter_out_of_range_names_itself(capsys, tmp_path, flags, name):
    assert name in _bad_run(capsys, tmp_path, *flags)


def test_a_string_that_parses_as_the_type_is_accepted():
    sim = load_plugin("simulator", "offline", {"threshold": "2.5"}, Context(RunConfig()))
    assert sim.threshold == 2.5 and isinstance(sim.threshold, float)


# ----------------------------------------------------------------------------- retrieval.k


def _ctx(k: int | None) -> Context:
    return Context(RunConfig.model_validate({"retrieval": {"k": k}}))


def _takes_k(name: str) -> bool:
    import inspect

    return "k" in inspect.signature(resolve("assistant", name)).parameters


def test_every_assistant_honours_or_rejects_the_run_k():
    names = available("assistant")
    assert {"bm25_extractive", "genaius", "acms", "remote_http"} <= set(names)
    for name in names:
        params = {"url": "http://127.0.0.1:9/"} if name == "remote_http" else {}
        if _takes_k(name):
            agent = load_plugin("assistant", name, params, _ctx(7))
            assert agent.k == 7, name
            assert effective_params(agent, params)["k"] == 7, name  # run.json records what it ran with
        else:
            with pytest.raises(BadInputError, match="--k / retrieval.k") as info:
                load_plugin("assistant", name, params, _ctx(7))
            depth = getattr(resolve("assistant", name), "DEPTH_PARAM", None)
            assert (depth or "leave --k") in str(info.value), name


def test_without_a_run_k_each_assistant_keeps_its_own_depth():
    assert load_plugin("assistant", "bm25_extractive", {}, _ctx(None)).k == 10
    assert load_plugin("assistant", "genaius", {}, _ctx(None)).k == 20
    assert load_plugin("assistant", "genaius", {"k": 4}, _ctx(None)).k == 4
    assert load_plugin("assistant", "genaius", {"k": 4}, _ctx(4)).k == 4  # the same value twice is fine


def test_a_run_k_that_disagrees_with_the_assistant_k_is_rejected():
    with pytest.raises(BadInputError, match="give one"):
        load_plugin("assistant", "bm25_extractive", {"k": 5}, _ctx(7))


def test_iiuot_names_candidates_when_the_run_k_exceeds_them(capsys, tmp_path):
    line = _bad_run(capsys, tmp_path, "--assistant", "iiuot", "--k", "80")
    assert "candidates" in line


@pytest.mark.slow
def test_a_run_with_k_retrieves_that_many_passages(tmp_path):
    """End to end: the real CLI, index and MiniLM; every turn lists --k passages."""
    p = simloop_cli("run", "--limit", "1", "--max-turns", "2", "--k", "3", "--out", tmp_path, "--run-id", "k3",
                    "--no-progress", timeout=600)
    assert p.returncode == 0, p.stderr
    turns = [t for tr in read_transcripts(tmp_path / "k3") for t in tr.turns]
    assert turns and all(len(t.assistant.passages) == 3 for t in turns)
    manifest = read_manifest(tmp_path / "k3")
    assert manifest.assistant.params["k"] == 3 and manifest.config["retrieval"]["k"] == 3
