"""``simloop validate`` at its edges: bad input is one line and exit 2; a run records the
card of its simulator configuration in run.json and ``report`` shows it."""

from __future__ import annotations

from simloop.config import RunConfig
from simloop.evaluate.report import load_view, render_html, validity_line
from simloop.loop import run as run_loop
from simloop.run import Context, execute, load_plugin, prepare_run, read_manifest
from simloop.validity.card import ValidityCard, criterion, store_card, summarise
from simloop.validity.measure import simulator_config
from tests.helpers.cli import one_line_exit_2, simloop_cli
from tests.helpers.data import ROOT


def test_no_ikat_data_is_one_line_exit_2_saying_where_it_looked(tmp_path):
    p = simloop_cli("validate", "--data", tmp_path / "nowhere", "--out", tmp_path / "v.json", timeout=120)
    line = one_line_exit_2(p, "iKAT data not found", str(tmp_path / "nowhere"), "--data DIR", "SIMLOOP_IKAT_DATA")
    assert "2023_train_topics.json" in line
    assert not (tmp_path / "v.json").exists()  # nothing half-written


def test_a_sample_below_one_is_one_line_exit_2(tmp_path):
    p = simloop_cli("validate", "--sample", "0", "--out", tmp_path / "v.json", timeout=120)
    one_line_exit_2(p, "--sample 0")
    assert not (tmp_path / "v.json").exists()


def _cfg(tmp_path) -> RunConfig:
    return RunConfig.model_validate({
        "out": str(tmp_path / "runs"), "run_id": "r", "progress": False,
        "scenarios": {"personas_dir": str(ROOT / "personas"), "limit": 2},
        "simulator": {"name": "tests.helpers.plugins:ScriptedSimulator", "params": {"grade": 5.0}},
        "assistant": {"name": "tests.helpers.plugins:EchoAssistant"}})


def test_run_records_an_existing_card_and_report_shows_it(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMLOOP_CACHE", str(tmp_path / "cache"))
    cfg = _cfg(tmp_path)
    sim = simulator_config(cfg, load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, Context(cfg)))
    crit = [criterion("grader_auc_true_vs_restated", "grader", 0.5, (0.4, 0.6), 9, "turns", 0.9, "higher", "m"),
            criterion("voice_distinct2", "voice", 0.7, (0.6, 0.8), 9, "dialogues", 0.55, "higher", "m")]
    card = ValidityCard(simulator=sim, sample=9, seed=11, resamples=100, criteria=crit,
                        summary=summarise(crit, sim, 9))
    written, cached = store_card(card, tmp_path / "validity.json")
    assert cached.is_file() and cached.is_relative_to(tmp_path / "cache")

    prep = prepare_run(cfg)
    run_loop(execute(prep))
    recorded = read_manifest(prep.run_dir).validity
    assert recorded is not None and recorded == written.summary
    assert (recorded.grader, recorded.voice) == ("not valid", "valid")
    assert recorded.failing == ["grader_auc_true_vs_restated"]

    view = load_view(prep.run_dir)
    line = validity_line(view.validity)
    assert "grader not valid" in line and "grader_auc_true_vs_restated" in line and str(cached) in line
    assert "grader not valid" in render_html([view])


def test_a_run_of_another_configuration_records_none(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMLOOP_CACHE", str(tmp_path / "cache"))
    cfg = _cfg(tmp_path)
    other = cfg.model_copy(update={"simulator": cfg.simulator.model_copy(update={"params": {"grade": 1.0}})})
    sim = simulator_config(other, load_plugin("simulator", other.simulator.name, other.simulator.params,
                                              Context(other)))
    card = ValidityCard(simulator=sim, sample=None, seed=11, resamples=10, criteria=[],
                        summary=summarise([], sim, None))
    store_card(card, tmp_path / "validity.json")
    prep = prepare_run(cfg)
    run_loop(execute(prep))
    assert read_manifest(prep.run_dir).validity is None
    assert "no card" in validity_line(load_view(prep.run_dir).validity)
