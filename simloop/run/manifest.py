"""``run.json`` for a new run: the one builder every kind of run uses.

``simloop run`` (runner.py), ``simloop memory`` and each run hosted by ``simloop serve``
describe themselves the same way: config, its hash, the plugins with their effective
parameters, library versions and the number of scenarios planned.

A simulator configuration (its name, effective parameters and the model and endpoint of
each LLM role it calls) has a digest; ``simloop validate`` stores the validity card of a
configuration under it (``<cache>/validity/<digest>.json``), and a run whose simulator has
one records its summary under ``validity``.
"""

from __future__ import annotations

import hashlib
import json
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..config import RunConfig, config_hash
from ..loop import running_loop_name
from ..schema import LLMCapabilities, PluginRef, RunManifest, ValiditySummary
from ..settings import cache_root
from ..urls import redact_urls

__all__ = ["new_manifest", "versions", "record_capabilities", "simulator_identity", "simulator_digest",
           "validity_card_path", "find_validity"]


def new_manifest(run_id: str, config: RunConfig | dict[str, Any], simulator: PluginRef, assistant: PluginRef,
                 scenarios: int | None, *, digest: str | None = None, **extra: Any) -> RunManifest:
    """A fresh manifest.  ``config`` is a RunConfig (dumped and hashed here) or, for a run
    that is not one (``simloop memory``), its own config dict with its own ``digest``.
    ``extra`` fields are kept (``simapi`` for hosted runs)."""
    if isinstance(config, RunConfig):
        digest = digest or config_hash(config)
        config = config.model_dump(mode="json")
    if digest is None:
        raise ValueError("a config dict needs its digest")
    counts = {"scenarios": scenarios} if scenarios is not None else {}
    return RunManifest(run_id=run_id, config=config, config_hash=digest, simulator=simulator, assistant=assistant,
                       versions=versions(), counts=counts, **extra)


def versions() -> dict[str, str]:
    """What a run records under ``versions`` in run.json: Python, the event loop, and the
    libraries that shape its results."""
    out = {"python": platform.python_version(), "event_loop": running_loop_name()}
    for pkg in ("simloop", "pydantic", "openai", "pyserini"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def record_capabilities(manifest: RunManifest, learnt: list[LLMCapabilities]) -> None:
    """Put what this session ``learnt`` about its LLM servers in ``run.json`` ``llm.capabilities``:
    an (endpoint, model) it talked to replaces what an earlier session recorded for it (the
    server may have been restarted with another context, the reason for a resume); the
    others are kept."""
    fresh = {(c.endpoint, c.model) for c in learnt}
    kept = [c for c in manifest.llm.capabilities if (c.endpoint, c.model) not in fresh]
    manifest.llm.capabilities = kept + [c.model_copy(deep=True) for c in learnt]


def simulator_identity(cfg: RunConfig, simulator: PluginRef, roles: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """What makes a simulator configuration: its name, effective parameters, and for each
    LLM role it calls the model and endpoint (URLs redacted; never a key: the config holds
    only the name of the key's variable).  Sampling settings of a role are left out: a
    card measures a model on an endpoint."""
    llm = {}
    for role in sorted(roles):
        resolved = cfg.llm.resolve(role)
        llm[role] = {"model": resolved.model, "base_url": redact_urls(resolved.endpoint())}
    return {"name": simulator.name, "params": simulator.params, "llm": llm}


def simulator_digest(identity: dict[str, Any]) -> str:
    """A short stable digest of ``simulator_identity``."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def validity_card_path(digest: str, cache_dir: Path | None = None) -> Path:
    """Where ``simloop validate`` keeps the card of the configuration with ``digest``."""
    return cache_root(cache_dir) / "validity" / f"{digest}.json"


class _StoredCard(BaseModel):
    """The part of a stored validity card (validity/card.py ``ValidityCard``) a run reads."""

    summary: ValiditySummary


def find_validity(digest: str, cache_dir: Path | None = None) -> ValiditySummary | None:
    """The summary of the stored card of ``digest``, or None when there is none (or it
    cannot be read: a run does not fail over a card)."""
    path = validity_card_path(digest, cache_dir)
    try:
        return _StoredCard.model_validate_json(path.read_bytes()).summary
    except (OSError, ValidationError, ValueError):
        return None
