"""``run.json`` for a new run: the one builder every kind of run uses (DESIGN §4).

``simloop run`` (runner.py), ``simloop memory`` and each run hosted by ``simloop serve``
describe themselves the same way: config, its hash, the plugins with their effective
parameters, library versions and the number of scenarios planned.
"""

from __future__ import annotations

from typing import Any

from ..config import RunConfig, config_hash
from ..schema import PluginRef, RunManifest
from .recorder import versions

__all__ = ["new_manifest"]


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
