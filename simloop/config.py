"""RunConfig: one validated object for a run (DESIGN §10.4).

Precedence, lowest first: defaults < TOML file < ``SIMLOOP_*`` environment < CLI flags.
Environment names map onto fields with ``__`` for nesting, e.g. ``SIMLOOP_CONCURRENCY=32``
or ``SIMLOOP_RETRIEVAL__K=20``.  Values are parsed as JSON when possible ("32" → 32).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from .errors import ConfigError, first_error
from .files import read_toml
from .llm import LLMConfig
from .search import RetrievalConfig
from .settings import PROCESS_SETTINGS, is_setting
from .traits import check_trait

__all__ = ["PluginSpec", "ScenarioSelection", "RunConfig", "load_config", "validate_config", "apply_overrides",
           "merge_trees", "config_hash", "config_diff", "describe_validation_error", "with_absolute_paths"]

ENV_PREFIX = "SIMLOOP_"
# Fields that change how fast or where a run goes, not what it produces: excluded from the
# config hash so a run can be resumed with another concurrency or output folder.
_NOT_HASHED = {"concurrency", "out", "run_id", "backend", "progress", "ray_address", "max_error_share"}


class _Section(BaseModel):
    # hide_input_in_errors: a key pasted where a variable name belongs must never be echoed.
    # allow_inf_nan=False: no setting means anything at inf or nan (a nan even passes le=1).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, allow_inf_nan=False)


class PluginSpec(_Section):
    """``[simulator]`` / ``[assistant]``: a plugin name and the parameters it is built with."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class ScenarioSelection(_Section):
    """Which persona × topic pairs to run."""

    personas_dir: Path = Field(Path("personas"), description="folder of persona TOML files")
    topics: Path | None = Field(None, description="an iKAT topic file (2023/2024/2025 schema) instead of personas")
    persona_ids: list[str] = Field(default_factory=list, description="only these personas (empty = all)")
    topic_ids: list[str] = Field(default_factory=list, description="only these topics (empty = all)")
    limit: int | None = Field(None, ge=1, description="run at most this many scenarios")
    repeat: int = Field(1, ge=1, description="run each scenario N times with different seeds")
    behaviour: dict[str, Any] = Field(default_factory=dict, description="behaviour traits for every scenario of the "
                                      "run (a value or a [low, high] range each), in place of the personas' own")

    @field_validator("behaviour")
    @classmethod
    def _known_traits(cls, value: dict[str, Any]) -> dict[str, Any]:
        return {k: check_trait(k, v) for k, v in value.items()}


class RunConfig(_Section):
    """Everything a run needs (DESIGN §11): TOML file < ``SIMLOOP_*`` environment < flags."""

    run_id: str | None = Field(None, min_length=1, description="unset: a new id from the time")
    out: Path = Path("transcripts")
    seed: int = 0
    scenarios: ScenarioSelection = Field(default_factory=ScenarioSelection)
    simulator: PluginSpec = Field(default_factory=lambda: PluginSpec(name="offline"))
    assistant: PluginSpec = Field(default_factory=lambda: PluginSpec(name="bm25_extractive"))
    concurrency: int = Field(8, ge=1, le=100_000, description="dialogues running at once")
    max_turns: int = Field(30, ge=1, le=1000, description="safety cap on turns per dialogue (the rubric policy "
                           "ends sooner; iKAT replays reach 21)")
    dialogue_timeout_s: float = Field(600.0, gt=0, description="wall-clock limit per dialogue")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    backend: Literal["local", "ray"] = "local"
    ray_address: str | None = None
    progress: bool = True
    max_error_share: float = Field(0.5, ge=0, le=1,
                                   description="exit 1 when more than this share of dialogues ended in an error")

    @field_validator("out", mode="before")
    @classmethod
    def _out_named(cls, value: Any) -> Any:
        # Path("") is the current folder: an empty --out (an unset shell variable) would
        # write the run there without a word.  "." still says so on purpose.
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty path; give a folder for run directories ('.' for the current folder)")
        return value

    @field_validator("ray_address")
    @classmethod
    def _address_needs_ray(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("backend") != "ray":  # nothing silently ignored
            raise ValueError("--address is for --backend ray (backend = 'ray')")
        return value


def merge_trees(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, nested mappings merged key by key (neither is changed)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_trees(out[key], value)
        else:
            out[key] = value
    return out


def _env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``SIMLOOP_*`` run settings of ``environ`` as a nested tree.  Process settings
    (``settings.py``) are not read here; a name that is neither is a ConfigError."""
    layer: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or is_setting(name):
            continue
        path = name[len(ENV_PREFIX) :].lower().split("__")
        _check_env_name(name, path)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = layer
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return layer


def _check_env_name(name: str, path: list[str]) -> None:
    """``path`` names RunConfig fields, section by section, as far as they are sections
    (a mapping's keys, such as a plugin's params, are the mapping's to check).  The error
    names the variable, never its value (it may hold a key)."""
    model: type[BaseModel] | None = RunConfig
    for depth, part in enumerate(path):
        if model is None:
            return
        field = model.model_fields.get(part)
        if field is None and depth == 0:
            raise ConfigError(f"{name}: neither a run setting (a config field: SIMLOOP_CONCURRENCY, "
                              f"SIMLOOP_RETRIEVAL__K, ...) nor a process setting ({', '.join(PROCESS_SETTINGS)})")
        if field is None:
            raise ConfigError(f"{name}: [{'.'.join(path[:depth])}] has no field {part!r}")
        kind = field.annotation
        model = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def describe_validation_error(source: str, exc: ValidationError, within: str = "") -> str:
    """One line: the source, the first failing field path (under ``within``, e.g. ``config``
    for the config inside run.json), and what is wrong."""
    where, msg = first_error(exc)
    where = ".".join(p for p in (within, where) if p)
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{source}: {where or '(top level)'}: {msg}{more}"


def load_config(
    path: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunConfig:
    """Build the RunConfig from file, environment and CLI overrides (nested dicts)."""
    given: dict[str, Any] = read_toml(path, "config file", error=ConfigError) if path else {}
    env = _env_layer(os.environ if environ is None else environ)
    data = merge_trees(merge_trees(given, env), overrides or {})
    source = str(path) if path else "config"
    if env and not path:
        source = "SIMLOOP_* environment / flags"
    cfg = validate_config(data, source)
    if path:
        _check_named_paths(path, given, cfg)
    return cfg


def _check_named_paths(path: Path, given: Mapping[str, Any], cfg: RunConfig) -> None:
    """A topic file or persona folder the config file names (and nothing overrides) that is
    not there: the line names the file and the field, since a relative path is read from
    the current folder, not the file's (the loader alone could only name the path)."""
    for key in ("topics", "personas_dir"):
        named = (given.get("scenarios") or {}).get(key)
        value = getattr(cfg.scenarios, key)
        if isinstance(named, str) and value == Path(named) and not value.exists():
            whence = "" if value.is_absolute() else f" (relative to the current folder, {Path.cwd()})"
            raise ConfigError(f"{path}: scenarios.{key}: {named} not found{whence}")


def validate_config(data: Mapping[str, Any], source: str = "config") -> RunConfig:
    """A RunConfig, or one ConfigError line naming ``source`` and the first bad field."""
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(source, exc)) from None
    except ConfigError as exc:  # a validator's own line ("llm.roles.x: ..."): say where it came from
        raise ConfigError(f"{source}: {exc}") from None


def apply_overrides(cfg: RunConfig, overrides: Mapping[str, Any], source: str = "flags") -> RunConfig:
    """A new config: ``cfg`` with nested ``overrides`` on top, validated again (what was
    left at its default stays so: ``model_fields_set`` keeps meaning "given")."""
    return validate_config(merge_trees(cfg.model_dump(exclude_unset=True), overrides), source)


def with_absolute_paths(cfg: RunConfig) -> RunConfig:
    """``cfg`` with its input paths (persona folder, topic file, index, LLM cache) made
    absolute against the current folder, resolved.  A new run records them so (run.json),
    so that ``--resume`` and a Ray worker read the same files from any folder, and a path
    given again on resume compares by where it points, not how it is spelled."""
    sel, ret, llm = cfg.scenarios, cfg.retrieval, cfg.llm
    return cfg.model_copy(update={
        "scenarios": sel.model_copy(update={"personas_dir": sel.personas_dir.resolve(),
                                            "topics": sel.topics and sel.topics.resolve()}),
        "retrieval": ret.model_copy(update={"index": ret.index and ret.index.resolve()}),
        "llm": llm.model_copy(update={"cache": llm.cache and llm.cache.resolve()}),
    })


def config_hash(cfg: RunConfig) -> str:
    """Hash of everything that changes what a run produces (not how fast or where)."""
    payload = cfg.model_dump(mode="json", exclude=_NOT_HASHED)
    if not payload["scenarios"]["behaviour"]:  # runs made before the field existed resume unchanged
        del payload["scenarios"]["behaviour"]
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _leaves(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: tree}


def config_diff(a: RunConfig, b: RunConfig) -> list[str]:
    """Dotted names of the hashed fields (what a run produces) where ``a`` and ``b`` differ."""
    la = _leaves(a.model_dump(mode="json", exclude=_NOT_HASHED))
    lb = _leaves(b.model_dump(mode="json", exclude=_NOT_HASHED))
    return sorted(k for k in la.keys() | lb.keys() if la.get(k) != lb.get(k))
