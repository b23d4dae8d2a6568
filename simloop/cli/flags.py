"""Flags → RunConfig, in one place for every command that builds a run config.

A command lists which of its argparse destinations set which config fields (a mapping
``dest -> dotted path``) and calls ``config_from_flags``.  Precedence, lowest first:
defaults < TOML file < ``SIMLOOP_*`` environment < flags (DESIGN §11).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ..config import RunConfig, apply_overrides, config_diff, load_config, merge_trees, with_absolute_paths
from ..errors import BadInputError, ConfigError, ResumeError, first_error
from ..llm import role_setting
from ..traits import check_trait
from .args import parse_param, parse_params

__all__ = ["RUN_FLAGS", "RESUME_MAY_CHANGE", "EVERY_ROLE", "CLEAR", "add_flags", "config_from_flags", "flag_overrides",
           "resumed_config", "check_range", "check_params_named", "given_llm_flags", "check_sources_named"]

EVERY_ROLE = "llm.*."  # "llm.*.model": the default role and every role override
CLEAR = "\0clear"  # a flag value (store_const) that sets its field to None, e.g. --no-cache

# Every flag of `simloop run`; other commands take the subset they offer.
RUN_FLAGS: dict[str, str] = {
    "simulator": "simulator.name", "simulator_param": "simulator.params",
    "assistant": "assistant.name", "assistant_param": "assistant.params",
    "topics": "scenarios.topics", "personas": "scenarios.personas_dir", "persona": "scenarios.persona_ids",
    "topic": "scenarios.topic_ids", "limit": "scenarios.limit", "repeat": "scenarios.repeat",
    "behaviour": "scenarios.behaviour",
    "concurrency": "concurrency", "max_turns": "max_turns", "timeout": "dialogue_timeout_s", "seed": "seed",
    "out": "out", "run_id": "run_id", "backend": "backend", "address": "ray_address", "progress": "progress",
    "index": "retrieval.index", "k": "retrieval.k",
    "base_url": EVERY_ROLE + "base_url", "model": EVERY_ROLE + "model", "rpm": "llm.default.rpm", "cache": "llm.cache",
    "max_error_share": "max_error_share",
}
# What a resumed run may change: how fast it goes, how it shows progress and when it
# counts as failed; never what its dialogues are (everything in the config hash).
RESUME_MAY_CHANGE = ("concurrency", "progress", "backend", "address", "max_error_share")


# How each of those flags is spelled and parsed (one definition for every command).
_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "simulator": ("--simulator", {"help": "simulator name or module:attr"}),
    "simulator_param": ("--simulator-param", {"action": "append", "metavar": "KEY=VALUE",
                                              "help": "simulator parameter (repeatable)"}),
    "assistant": ("--assistant", {"help": "assistant name or module:attr"}),
    "assistant_param": ("--assistant-param", {"action": "append", "metavar": "KEY=VALUE",
                                              "help": "assistant parameter (repeatable)"}),
    "topics": ("--topics", {"type": Path, "help": "an iKAT topic file (2023/2024/2025) to use instead of personas/"}),
    "personas": ("--personas", {"type": Path, "help": "folder of persona TOML files (default personas/)"}),
    "persona": ("--persona", {"action": "append", "help": "only this persona id (repeatable)"}),
    "topic": ("--topic", {"action": "append", "help": "only this topic id (repeatable)"}),
    "limit": ("--limit", {"type": int,
                          "help": "run at most N dialogues (every pair's first repeat before any second)"}),
    "repeat": ("--repeat", {"type": int, "help": "run each persona x topic N times with different seeds"}),
    "behaviour": ("--behaviour", {"action": "append", "metavar": "KEY=VALUE",
                                  "help": "a behaviour trait for every scenario, e.g. patience=1 or patience=[2,5] "
                                          "(a range is drawn per scenario; repeatable)"}),
    "base_url": ("--base-url", {"help": "OpenAI-compatible base URL for every LLM role"}),
    "model": ("--model", {"help": "model name for every LLM role"}),
    "rpm": ("--rpm", {"type": float, "help": "LLM requests per minute per endpoint"}),
    "concurrency": ("--concurrency", {"type": int, "help": "dialogues at once (default 8)"}),
    "max_turns": ("--max-turns", {"type": int, "help": "safety cap on turns per dialogue (default 30)"}),
    "timeout": ("--timeout", {"type": float, "help": "seconds per dialogue (default 600)"}),
    "seed": ("--seed", {"type": int, "help": "base seed: each dialogue's seed (and the draws of behaviour ranges) "
                                             "comes from it and the dialogue's persona, topic and repeat (default 0)"}),
    "index": ("--index", {"type": Path, "help": "Lucene index dir (default: the demo Wikipedia index)"}),
    "k": ("--k", {"type": int, "help": "passages retrieved per turn (default: the assistant's own k)"}),
    # A string, made a Path by the config: Path('') would already be '.', and '' must be refused.
    "out": ("--out", {"help": "output folder (default transcripts/)"}),
    "run_id": ("--run-id", {"help": "name of the run directory under --out (default: run-<UTC time>-<4 hex>)"}),
    "cache": ("--cache", {"type": Path, "help": "sqlite file caching LLM calls"}),
    "backend": ("--backend", {"choices": ["local", "ray"],
                              "help": "local: this process (default); ray: shard the dialogues over a Ray cluster"}),
    "address": ("--address", {"help": "Ray cluster address (with --backend ray)"}),
    "progress": ("--no-progress", {"action": "store_false", "default": None, "help": "no progress bar"}),
    "max_error_share": ("--max-error-share", {"type": float, "metavar": "SHARE",
                                              "help": "exit 1 when more than this share of dialogues ended in an "
                                                      "error (default 0.5)"}),
}


def add_flags(parser: argparse.ArgumentParser, dests: Iterable[str]) -> None:
    """The flags for ``dests`` (keys of ``RUN_FLAGS``), spelled the same in every command.
    ``--cache`` comes with ``--no-cache``."""
    for dest in dests:
        flag, options = _OPTIONS[dest]
        if dest == "cache":
            group = parser.add_mutually_exclusive_group()
            group.add_argument(flag, **options)
            group.add_argument("--no-cache", dest="cache", action="store_const", const=CLEAR,
                               help="no LLM cache, whatever the config file says")
        else:
            parser.add_argument(flag, dest=dest, **options)


def check_range(flag: str, value: float | None, least: float, accepts: str, *, above: bool = False) -> None:
    """A flag value below ``least`` (or equal to it, with ``above``) is one line naming the
    flag, the value and what it accepts: argparse checks types, not ranges.  None (unset) passes."""
    if value is not None and (value < least or (above and value == least)):
        raise BadInputError(f"{flag} {value:g}: {accepts}")


def check_params_named(kind: str, params_given: bool, name_given: bool) -> None:
    """``--assistant-param`` without ``--assistant``: parameters for whichever plugin is the
    default would be a guess (and ignored by another), so say which flag is missing."""
    if params_given and not name_given:
        raise ConfigError(f"--{kind}-param needs --{kind} NAME: the parameters are for one {kind}")


# The flags that only configure LLM calls (``--no-cache`` is not one: "no cache" is true offline too).
_LLM_DESTS = ("base_url", "model", "rpm", "cache")


def given_llm_flags(args: argparse.Namespace) -> tuple[str, ...]:
    """The LLM flags given on the command line (not a config file's settings, which may be
    shared with LLM runs): a run whose plugins call no LLM refuses them (run/runner.py)."""
    return tuple(_OPTIONS[d][0] for d in _LLM_DESTS if getattr(args, d, None) not in (None, CLEAR))


def check_sources_named(args: argparse.Namespace, cfg: RunConfig) -> None:
    """With a topic file the personas folder is not read: ``--personas`` then is refused; a
    config file's ``personas_dir`` (a file shared with persona runs) gets one warning line."""
    if cfg.scenarios.topics is None:
        return
    if getattr(args, "personas", None) is not None:
        raise BadInputError(f"--personas {args.personas}: not read when a topic file is given "
                            f"({cfg.scenarios.topics}): the scenarios come from the topic file; drop one of them")
    if "personas_dir" in cfg.scenarios.model_fields_set:
        print(f"simloop: warning: scenarios.personas_dir ({cfg.scenarios.personas_dir}) is not read: "
              f"the scenarios come from the topic file {cfg.scenarios.topics}", file=sys.stderr)


def _put(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        tree = tree.setdefault(p, {})
    tree[leaf] = value


def _flag(dest: str) -> str:
    """How the user typed the flag of ``dest``."""
    return _OPTIONS[dest][0] if dest in _OPTIONS else "--" + dest.replace("_", "-")


def _config_field(path: str) -> FieldInfo | None:
    """The RunConfig field at a dotted path; None below a mapping (a plugin's params)."""
    model: type[BaseModel] = RunConfig
    *sections, leaf = path.split(".")
    for name in sections:
        field = model.model_fields.get(name)
        kind = field.annotation if field is not None else None
        if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            return None
        model = kind
    return model.model_fields.get(leaf)


def _check_flag_value(dest: str, path: str, value: Any) -> None:
    """A flag's value checked against its config field's type and bounds, so that the line
    names the flag the user typed (``--timeout -5``), not the field it sets
    (``dialogue_timeout_s``).  What only the whole config can tell (``--address`` without
    ``--backend ray``) is left to its validation, whose lines name the flags themselves."""
    field = _config_field(path)
    if field is None or field.annotation is None:
        return
    kind: Any = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    try:  # as the config section validates: no inf or nan
        TypeAdapter(kind, config=ConfigDict(allow_inf_nan=False)).validate_python(value)
    except ValidationError as exc:
        shown = f"{value:g}" if isinstance(value, float) else repr(value) if isinstance(value, str) else value
        raise BadInputError(f"{_flag(dest)} {shown}: {first_error(exc)[1]}") from None


def _named_by_flag(exc: ConfigError, args: argparse.Namespace, mapping: Mapping[str, str]) -> ConfigError:
    """A config line about a field a flag set (``config: out: an empty path``, from a
    validator the per-flag check does not run) names the flag and its value instead: the
    flag's value is the one that won.  Any other line is kept as it is."""
    text = str(exc)
    for dest, path in mapping.items():
        value = getattr(args, dest, None)
        marker = f": {path}: "
        if value not in (None, [], CLEAR) and marker in text and not path.startswith(EVERY_ROLE):
            why, flag = text.split(marker, 1)[1], _flag(dest)
            shown = repr(value) if isinstance(value, str) else value
            return ConfigError(why if why.startswith(flag) else f"{flag} {shown}: {why}")
    return exc


def flag_overrides(args: argparse.Namespace, mapping: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(nested overrides, settings for every LLM role) from the flags that were given.  A
    value its config field refuses is a ``BadInputError`` naming the flag."""
    tree: dict[str, Any] = {}
    every: dict[str, Any] = {}
    for dest, path in mapping.items():
        value = getattr(args, dest, None)
        if value is None or value == []:
            continue
        if value == CLEAR:
            value = None
        elif path.endswith(".params"):
            value = parse_params(value, _flag(dest))
        elif path == "scenarios.behaviour":
            value = _behaviour(value)
        else:
            _check_flag_value(dest, path, value)
        if path.startswith(EVERY_ROLE):  # checked here, so that a bad value is named by its flag
            key = path[len(EVERY_ROLE):]
            every[key] = role_setting(_flag(dest), key, value)
        else:
            _put(tree, path, value)
    return tree, every


def _behaviour(pairs: list[str]) -> dict[str, Any]:
    """``--behaviour KEY=VALUE`` pairs, each checked here so that the error names the flag and the trait."""
    out: dict[str, Any] = {}
    for text in pairs:
        key, value = parse_param(text, "--behaviour")
        try:
            out[key] = check_trait(key, value)
        except ValueError as exc:
            raise BadInputError(f"--behaviour {text}: {exc}") from None
    return out


def config_from_flags(args: argparse.Namespace, mapping: Mapping[str, str], *, config: Path | None = None,
                      base: RunConfig | None = None, environ: Mapping[str, str] | None = None,
                      fixed: Mapping[str, Any] | None = None) -> RunConfig:
    """The RunConfig of ``config`` (a TOML file) < the ``SIMLOOP_*`` environment < the flags
    in ``mapping`` that were given (None / empty = not given).

    ``mapping`` is ``{argparse dest: dotted config path}``.  A path ending in ``.params``
    takes repeatable ``KEY=VALUE`` strings; ``EVERY_ROLE + key`` sets ``key`` for every LLM
    role at once (``--base-url``/``--model``), overrides included; the value ``CLEAR`` sets
    the field to None.  With ``base`` the flags apply to that config instead of the file
    and the environment (``--resume``).  ``fixed`` holds settings a command makes itself
    (``rehearse`` sets its simulator); flags win over it.  Nothing given is ever changed in place.
    """
    tree, every = flag_overrides(args, mapping)
    if fixed:
        tree = merge_trees(fixed, tree)
    env = os.environ if environ is None else environ
    for kind in ("simulator", "assistant"):
        section = tree.get(kind) or {}
        named_elsewhere = base is not None or config is not None or f"SIMLOOP_{kind.upper()}__NAME" in env
        check_params_named(kind, "params" in section, "name" in section or named_elsewhere)
    if base is not None and config is not None:
        raise BadInputError("a config file cannot be combined with a resumed run's config")
    try:
        cfg = apply_overrides(base, tree) if base is not None else load_config(config, tree, environ)
    except ConfigError as exc:
        raise _named_by_flag(exc, args, mapping) from None
    if every:
        cfg = cfg.model_copy(update={"llm": cfg.llm.with_every_role(**every)})
    return cfg



def _shown(value: Any) -> str:
    text = "unset" if value is None else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def resumed_config(args: argparse.Namespace, mapping: Mapping[str, str], run_dir: Path, base: RunConfig, *,
                   config: Path | None = None, environ: Mapping[str, str] | None = None) -> RunConfig:
    """The config to resume ``run_dir`` with: the run's own (``base``), with only the
    ``RESUME_MAY_CHANGE`` flags applied.  Any other flag, or a config file, must agree
    with the run's config, or a ``ResumeError`` names every field that differs.  The
    ``SIMLOOP_*`` environment is read only together with a config file."""
    given = type(args)(**{d: getattr(args, d, None) for d in mapping if d not in RESUME_MAY_CHANGE})
    if config is not None:
        candidate = config_from_flags(given, mapping, config=config, environ=environ)
    else:
        candidate = config_from_flags(given, mapping, base=base)
    # Paths compare by where they point: `--personas ../x` names the folder run.json records absolute.
    placed, candidate_placed = with_absolute_paths(base), with_absolute_paths(candidate)
    differ = config_diff(placed, candidate_placed)
    if differ:
        old, new = placed.model_dump(mode="json"), candidate_placed.model_dump(mode="json")

        def at(tree: Any, dotted: str) -> Any:
            for part in dotted.split("."):
                tree = tree.get(part) if isinstance(tree, dict) else None
            return tree

        # A field a flag set is named by that flag (``--limit``), as the user typed it.
        by_flag = {path: _flag(d) for d, path in mapping.items() if getattr(given, d, None) not in (None, [])}
        shown = "; ".join(f"{by_flag.get(k, k)} (run: {_shown(at(old, k))}, now: {_shown(at(new, k))})"
                          for k in differ[:6])
        more = f" and {len(differ) - 6} more" if len(differ) > 6 else ""
        raise ResumeError(f"{run_dir}: a resumed run keeps its config, but {shown}{more} differ; "
                          "drop those flags, or start a new run")
    out, run_id = getattr(args, "out", None), getattr(args, "run_id", None)
    if out is not None or run_id is not None:
        # Without --out, the run's own folder holds it (base.out may be relative to another folder).
        named = (Path(out) if out is not None else Path(run_dir).parent) / (run_id or base.run_id or "")
        if named.resolve() != Path(run_dir).resolve():
            raise ResumeError(f"--out/--run-id name {named}, but --resume names {run_dir}; give only --resume")
    may = {d: mapping[d] for d in RESUME_MAY_CHANGE if d in mapping}
    return config_from_flags(args, may, base=base)
