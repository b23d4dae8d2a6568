"""Dialogues of the simulator configuration under measurement, run in this process.

The voice and adversary criteria need real dialogues: the configured simulator against a
fixed assistant (``bm25_extractive``, or one of the project's adversaries) over a personas
folder.  They are run in-process through ``run.prepare_run``/``run.execute``, the runner
``simloop run`` uses (recorder, run.json, one transcript per dialogue), rather than as a
``simloop run`` subprocess: the configuration under measurement is passed as the
``RunConfig`` it is (an LLM simulator's endpoint, its parameters, a config file's
sections), not re-spelled as flags, and a failure is a Python error with its cause.  Each
run opens its own embedder and retriever, as a ``simloop run`` would, so a dialogue here
is the dialogue ``simloop run`` records for the same configuration and seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..config import PluginSpec, RunConfig

__all__ = ["run_dialogues", "ASSISTANT"]

ASSISTANT = "bm25_extractive"  # the fixed offline assistant the voice is measured against


async def run_dialogues(cfg: RunConfig, out: Path, run_id: str, *, personas: Path, assistant: str = ASSISTANT,
                        topic_ids: Sequence[str] = (), repeat: int = 1, limit: int | None = None,
                        concurrency: int | None = None) -> Path:
    """Run ``cfg``'s simulator against ``assistant`` over ``personas`` (only ``topic_ids``
    when given; ``repeat`` seeds each; at most ``limit``); returns the run directory."""
    from ..run import execute, prepare_run

    scenarios = cfg.scenarios.model_copy(update={
        "personas_dir": personas, "topics": None, "persona_ids": [], "topic_ids": list(topic_ids),
        "repeat": repeat, "limit": limit})
    run_cfg = RunConfig.model_validate({
        **cfg.model_dump(), "out": out, "run_id": run_id, "progress": False, "backend": "local",
        "scenarios": scenarios.model_dump(), "assistant": PluginSpec(name=assistant).model_dump(),
        "concurrency": concurrency or cfg.concurrency})
    prep = prepare_run(run_cfg)
    await execute(prep)
    return prep.run_dir
