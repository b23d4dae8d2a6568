"""Flags → RunConfig, in one place for every command that builds a run config.

A command lists which of its argparse destinations set which config fields (a mapping
``dest -> dotted path``) and calls ``config_from_flags``.  Precedence, lowest first:
defaults < TOML file < ``SIMLOOP_*`` environment < flags (DESIGN §11).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping

from ..config import RunConfig, apply_overrides, load_config
from ..errors import BadInputError
from .args import parse_params

__all__ = ["RUN_FLAGS", "EVERY_ROLE", "CLEAR", "config_from_flags", "flag_overrides"]

EVERY_ROLE = "llm.*."  # "llm.*.model": the default role and every role override
CLEAR = "\0clear"  # a flag value (store_const) that sets its field to None, e.g. --no-cache

# Every flag of `simloop run`; other commands take the subset they offer.
RUN_FLAGS: dict[str, str] = {
    "simulator": "simulator.name", "simulator_param": "simulator.params",
    "assistant": "assistant.name", "assistant_param": "assistant.params",
    "topics": "scenarios.topics", "personas": "scenarios.personas_dir", "persona": "scenarios.persona_ids",
    "topic": "scenarios.topic_ids", "limit": "scenarios.limit", "repeat": "scenarios.repeat",
    "concurrency": "concurrency", "max_turns": "max_turns", "timeout": "dialogue_timeout_s", "seed": "seed",
    "out": "out", "run_id": "run_id", "backend": "backend", "address": "ray_address", "progress": "progress",
    "index": "retrieval.index", "k": "retrieval.k",
    "base_url": EVERY_ROLE + "base_url", "model": EVERY_ROLE + "model", "rpm": "llm.default.rpm", "cache": "llm.cache",
}


def _put(tree: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for p in parents:
        tree = tree.setdefault(p, {})
    tree[leaf] = value


def flag_overrides(args: argparse.Namespace, mapping: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(nested overrides, settings for every LLM role) from the flags that were given."""
    tree: dict[str, Any] = {}
    every: dict[str, Any] = {}
    for dest, path in mapping.items():
        value = getattr(args, dest, None)
        if value is None or value == []:
            continue
        if value == CLEAR:
            value = None
        elif path.endswith(".params"):
            value = parse_params(value, "--" + dest.replace("_", "-"))
        if path.startswith(EVERY_ROLE):
            every[path[len(EVERY_ROLE):]] = value
        else:
            _put(tree, path, value)
    return tree, every


def config_from_flags(args: argparse.Namespace, mapping: Mapping[str, str], *, config: Path | None = None,
                      base: RunConfig | None = None, environ: Mapping[str, str] | None = None) -> RunConfig:
    """The RunConfig of ``config`` (a TOML file) < the ``SIMLOOP_*`` environment < the flags
    in ``mapping`` that were given (None / empty = not given).

    ``mapping`` is ``{argparse dest: dotted config path}``.  A path ending in ``.params``
    takes repeatable ``KEY=VALUE`` strings; ``EVERY_ROLE + key`` sets ``key`` for every LLM
    role at once (``--base-url``/``--model``), overrides included; the value ``CLEAR`` sets
    the field to None.  With ``base`` the flags apply to that config instead of the file
    and the environment (``--resume``).  Nothing given is ever changed in place.
    """
    tree, every = flag_overrides(args, mapping)
    if base is not None:
        if config is not None:
            raise BadInputError("a config file cannot be combined with a resumed run's config")
        cfg = apply_overrides(base, tree)
    else:
        cfg = load_config(config, tree, environ)
    if every:
        cfg = cfg.model_copy(update={"llm": cfg.llm.with_every_role(**every)})
    return cfg

