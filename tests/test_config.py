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
    # Read by the embedder, the LLM layer, the JVM, serve and the scripts, not by a run: a
    # run must not refuse them, and the config needs no list of them (settings.py declares them).
    from simloop.settings import PROCESS_SETTINGS, SCRIPT_SETTINGS

    env = {"SIMLOOP_EMBED_THREADS": "2", "SIMLOOP_TORCH_THREADS": "2", "SIMLOOP_LLM_HTTP": "httpx",
           "SIMLOOP_JVM_OPTIONS": "-Xmx1g", "SIMLOOP_DEMO_VECTORS": "0", "SIMLOOP_EMBED_RUNTIME": "numpy",
           "SIMLOOP_EVENT_LOOP": "asyncio", "SIMLOOP_CACHE": "/tmp/c", "SIMLOOP_SERVE_TOKENS": "team=t",
           "SIMLOOP_IKAT_DATA": "/data", "SIMLOOP_TEST_CACHE": "/tmp/t", "SIMLOOP_TEST_WORKERS": "4"}
    assert set(env) == set(PROCESS_SETTINGS) | set(SCRIPT_SETTINGS)
    assert load_config(None, {}, environ=env) == load_config(None, {}, environ={})


@pytest.mark.parametrize("name, said", [
    ("SIMLOOP_EMBED_THREADZ", "SIMLOOP_EMBED_THREADZ: neither a run setting (a config field: SIMLOOP_CONCURRENCY, "),
    ("SIMLOOP_RETRIEVAL__KK", "SIMLOOP_RETRIEVAL__KK: [retrieval] has no field 'kk'"),
    ("SIMLOOP_LLM__DEFAULT__MODLE", "SIMLOOP_LLM__DEFAULT__MODLE: [llm.default] has no field 'modle'"),
])
def test_an_unknown_variable_is_one_line_naming_it_and_never_its_value(name: str, said: str):
    with pytest.raises(ConfigError) as info:
        load_config(None, {}, environ={name: "sk-secret-value"})
    assert str(info.value).startswith(said) and "sk-secret-value" not in str(info.value)
    assert "\n" not in str(info.value)


def test_variables_inside_a_mapping_field_are_the_mappings_to_check():
    # A plugin's params and the LLM role overrides are mappings: their keys are not fields.
    env = {"SIMLOOP_ASSISTANT__NAME": "genaius", "SIMLOOP_ASSISTANT__PARAMS__K": "20",
           "SIMLOOP_LLM__ROLES__JUDGE__MODEL": "j"}
    cfg = load_config(None, {}, environ=env)
    assert cfg.assistant.params == {"k": 20} and cfg.llm.resolve("judge").model == "j"


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


# ----------------------------------------------------------------------------- no key in a URL (simloop/urls.py)

KEY = "sk-AUDIT-SECRET-123"
KEYED_URLS = [
    f"http://u:{KEY}@127.0.0.1:9/v1",  # a password
    f"http://{KEY}@127.0.0.1:9/v1",  # a bare user: where some clients put a token
    f"http://127.0.0.1:9/v1?api-key={KEY}",  # Azure style
    f"http://127.0.0.1:9/v1?api-version=2024-02-01&API_KEY={KEY}",
    f"https://h/v1?apikey={KEY}", f"https://h/v1?key={KEY}", f"https://h/v1?token={KEY}",
    f"https://h/v1?access_token={KEY}", f"https://h/v1?sig={KEY}", f"https://h/v1?Signature={KEY}",
    f"https://h/v1?password={KEY}", f"https://h/v1?secret={KEY}", f"https://h/v1?subscription-key={KEY}",
    f"u:{KEY}@127.0.0.1:9/v1",  # no scheme: still checked
]
PLAIN_URLS = ["http://127.0.0.1:8089/v1", "https://api.openai.com/v1", "http://localhost:11434/v1/",
              "https://x.openai.azure.com/openai/deployments/gpt?api-version=2024-02-01", "https://h/v1?monkey=1"]


@pytest.mark.parametrize("url", KEYED_URLS)
def test_a_url_with_a_key_is_refused_without_repeating_it(url):
    from simloop.urls import check_url

    with pytest.raises(ValueError) as info:
        check_url(url, "OPENAI_API_KEY", "--base-url")
    message = str(info.value)
    assert KEY not in message and "\n" not in message
    assert message.startswith("--base-url: the URL carries ") and message.endswith("put the key in OPENAI_API_KEY")


@pytest.mark.parametrize("url", PLAIN_URLS)
def test_an_ordinary_url_passes_and_is_shown_unchanged(url):
    from simloop.urls import check_url, redact_urls

    assert check_url(url, "OPENAI_API_KEY") == url
    assert redact_urls(f"LLM role 'judge' at {url}: cannot connect") == f"LLM role 'judge' at {url}: cannot connect"


@pytest.mark.parametrize("text, shown", [
    (f"at http://u:{KEY}@127.0.0.1:9/v1: cannot connect", "at http://***@127.0.0.1:9/v1: cannot connect"),
    (f"GET http://{KEY}@h/v1/models \"HTTP/1.1 200 OK\"", "GET http://***@h/v1/models \"HTTP/1.1 200 OK\""),
    (f"(POST https://h/v1?api-version=1&api-key={KEY}#top).", "(POST https://h/v1?api-version=1&api-key=***#top)."),
    (f"https://h/v1?Token={KEY};sig={KEY}&x=2 and http://ok/v1", "https://h/v1?Token=***;sig=***&x=2 and http://ok/v1"),
])
def test_redaction_masks_user_info_and_secret_query_values(text, shown):
    from simloop.urls import redact_urls

    assert redact_urls(text) == shown


def test_log_lines_are_redacted():
    import logging

    from simloop.urls import RedactURLs

    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, 'HTTP Request: %s %s "%s"',
                               ("GET", f"http://u:{KEY}@h/v1/models", "HTTP/1.1 200 OK"), None)
    assert RedactURLs().filter(record)
    assert record.getMessage() == 'HTTP Request: GET http://***@h/v1/models "HTTP/1.1 200 OK"'


@pytest.mark.parametrize("url", [KEYED_URLS[0], KEYED_URLS[2]])
def test_every_way_to_give_a_base_url_refuses_a_key(tmp_path: Path, url: str):
    from simloop.cli.flags import RUN_FLAGS, config_from_flags

    f = tmp_path / "run.toml"
    for toml in (f'[llm.default]\nbase_url = "{url}"\n', f'[llm.roles.judge]\nbase_url = "{url}"\n'):
        f.write_text(toml)
        with pytest.raises(ConfigError, match="base_url: the URL carries") as info:
            load_config(f, {}, environ={})
        assert KEY not in str(info.value)
    with pytest.raises(ConfigError, match="llm.default.base_url: the URL carries") as info:
        load_config(None, {}, environ={"SIMLOOP_LLM__DEFAULT__BASE_URL": url})
    assert KEY not in str(info.value)
    with pytest.raises(ConfigError, match="^--base-url: the URL carries") as info:
        config_from_flags(_run_args("--base-url", url), RUN_FLAGS, environ={})
    assert KEY not in str(info.value) and "OPENAI_API_KEY" in str(info.value) and "api_key_env" in str(info.value)


def test_a_key_in_openai_base_url_is_refused_too(monkeypatch):
    role = load_config(None, {}, environ={}).llm.resolve("simulator")
    monkeypatch.setenv("OPENAI_BASE_URL", KEYED_URLS[0])
    with pytest.raises(ConfigError, match="^OPENAI_BASE_URL: the URL carries a password") as info:
        role.endpoint()
    assert KEY not in str(info.value)
    monkeypatch.setenv("OPENAI_BASE_URL", PLAIN_URLS[0])
    assert role.endpoint() == PLAIN_URLS[0]

