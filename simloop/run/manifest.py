"""``run.json`` for a new run: the one builder every kind of run uses (DESIGN §4).

``simloop run`` (runner.py), ``simloop memory`` and each run hosted by ``simloop serve``
describe themselves the same way: config, its hash, the plugins with their effective
parameters, library versions and the number of scenarios planned.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..config import RunConfig, config_hash
from ..loop import running_loop_name
from ..schema import LLMCapabilities, PluginRef, RunManifest

__all__ = ["new_manifest", "versions", "record_capabilities"]


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
