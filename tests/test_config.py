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


def test_process_settings_are_not_read_as_run_config():
    # Read by the embedder, the LLM layer and the JVM, not by a run: a run must not refuse them.
    env = {"SIMLOOP_EMBED_THREADS": "2", "SIMLOOP_TORCH_THREADS": "2", "SIMLOOP_LLM_HTTP": "httpx",
           "SIMLOOP_JVM_OPTIONS": "-Xmx1g", "SIMLOOP_DEMO_VECTORS": "0", "SIMLOOP_EMBED_RUNTIME": "numpy"}
    assert load_config(None, {}, environ=env) == load_config(None, {}, environ={})
    with pytest.raises(ConfigError):  # while an unknown one is refused
        load_config(None, {}, environ={"SIMLOOP_EMBED_THREADZ": "2"})


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


# ----------------------------------------------------------------------------- flags -> config (simloop/cli/flags.py)


def _run_args(*argv: str):
    from simloop.cli import build_parser

    return build_parser().parse_args(["run", *argv])


def test_flags_beat_file_and_environment(tmp_path: Path):
    from simloop.cli.flags import RUN_FLAGS, config_from_flags

    f = tmp_path / "run.toml"
    f.write_text('concurrency = 3\nseed = 1\n[llm]\ncache = "c.sqlite"\n[assistant]\nname = "genaius"\n')
    a = _run_args("--seed", "5", "--no-cache", "--assistant-param", "k=20", "--no-progress", "--persona", "maya")
    cfg = config_from_flags(a, RUN_FLAGS, config=f, environ={"SIMLOOP_SEED": "2", "SIMLOOP_MAX_TURNS": "9"})
    assert (cfg.concurrency, cfg.max_turns, cfg.seed) == (3, 9, 5)  # file < env < flags
    assert cfg.llm.cache is None and cfg.progress is False  # --no-cache clears what the file set
    assert cfg.assistant.name == "genaius" and cfg.assistant.params == {"k": 20}
    assert cfg.scenarios.persona_ids == ["maya"]
    untouched = config_from_flags(_run_args(), RUN_FLAGS, config=f, environ={})
    assert untouched.llm.cache == Path("c.sqlite") and untouched.progress is True and untouched.seed == 1


def test_base_url_and_model_reach_every_role_without_mutating_anything(tmp_path: Path):
    from simloop.cli.flags import RUN_FLAGS, config_from_flags

    f = tmp_path / "run.toml"
    f.write_text('[llm.roles.judge]\nmodel = "big-judge"\nbase_url = "http://judge:1/v1"\n'
                 '[llm.roles.assistant.rewrite]\ntemperature = 0.0\n')
    plain = config_from_flags(_run_args(), RUN_FLAGS, config=f, environ={})
    cfg = config_from_flags(_run_args("--base-url", "http://127.0.0.1:9/v1", "--model", "m"), RUN_FLAGS,
                            config=f, environ={})
    for role in ("simulator", "judge", "assistant.rewrite"):
        resolved = cfg.llm.resolve(role)
        assert (resolved.base_url, resolved.model) == ("http://127.0.0.1:9/v1", "m")
    assert cfg.llm.resolve("assistant.rewrite").temperature == 0.0  # other settings kept
    assert plain.llm.resolve("judge").model == "big-judge"  # the config without the flags is its own object
    with pytest.raises(ValueError):  # validated configs are frozen: nobody rewrites a role in place
        cfg.llm.roles["judge"].model = "x"  # type: ignore[misc]


def test_resume_takes_only_speed_flags(tmp_path: Path):
    from simloop.cli.flags import RUN_FLAGS, config_from_flags

    base = load_config(None, {"seed": 4, "llm": {"roles": {"judge": {"model": "j"}}}}, environ={})
    speed = {d: RUN_FLAGS[d] for d in ("concurrency", "progress")}
    cfg = config_from_flags(_run_args("--concurrency", "2", "--seed", "9"), speed, base=base)
    assert (cfg.concurrency, cfg.seed) == (2, 4) and config_hash(cfg) == config_hash(base)


def test_role_override_keys_match_the_role_settings():
    from simloop.llm.config import LLMRole, LLMRoleOverride

    assert set(LLMRoleOverride.model_fields) == set(LLMRole.model_fields)
