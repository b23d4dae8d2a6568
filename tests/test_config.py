from pathlib import Path

import pytest

from simloop.config import RunConfig, config_hash, load_config
from simloop.errors import ConfigError


def test_precedence_file_env_flags(tmp_path: Path):
    f = tmp_path / "run.toml"
    f.write_text('concurrency = 3\nmax_turns = 7\nseed = 1\n[retrieval]\nk = 5\n')
    env = {"SIMLOOP_MAX_TURNS": "9", "SIMLOOP_RETRIEVAL__K": "12", "SIMLOOP_SEED": "2"}
    cfg = load_config(f, {"seed": 3}, environ=env)
    assert cfg.concurrency == 3          # file only
    assert cfg.max_turns == 9            # env beats file
    assert cfg.retrieval.k == 12         # nested env
    assert cfg.seed == 3                 # flag beats env


def test_defaults_are_the_offline_demo():
    cfg = load_config(None, {}, environ={})
    assert cfg.simulator.name == "offline" and cfg.assistant.name == "bm25_extractive"
    assert cfg.scenarios.personas_dir == Path("personas")


@pytest.mark.parametrize("text, where", [
    ("concurrency = 0\n", "concurrency"),
    ("[retrieval]\nkk = 3\n", "retrieval.kk"),
    ("max_turns = 'many'\n", "max_turns"),
])
def test_bad_file_names_file_and_field(tmp_path: Path, text: str, where: str):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(f, {}, environ={})
    assert str(f) in str(e.value) and where in str(e.value)


def test_invalid_toml_and_missing_file(tmp_path: Path):
    f = tmp_path / "x.toml"
    f.write_text("concurrency = [\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(f, {}, environ={})
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml", {}, environ={})


def test_hash_ignores_speed_but_not_content():
    a = RunConfig()
    assert config_hash(a) == config_hash(a.model_copy(update={"concurrency": 99, "run_id": "x"}))
    assert config_hash(a) != config_hash(a.model_copy(update={"max_turns": 3}))
