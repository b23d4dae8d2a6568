"""A whole run: validate everything, then create the run directory, run, and finish it.

Everything that can be wrong with the user's input (personas, topics, plugin names and
params, the index) is checked *before* the run directory exists, so a bad input leaves
nothing half-written behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..config import RunConfig, config_hash
from .engine import DialogueSpec, Engine, EventSink, RunStats
from ..search.corpus import is_lucene_index
from ..errors import IndexMissingError
from .plugins import Context, load_plugin
from .recorder import Recorder, ReadReport, new_run_id, read_manifest, versions
from .scenarios import count_scenarios, iter_scenarios, load_sources
from ..schema import PluginRef, RunManifest

__all__ = ["PreparedRun", "prepare_run", "execute", "resume_config"]


@dataclass
class PreparedRun:
    cfg: RunConfig
    ctx: Context
    simulator: Any
    assistant: Any
    recorder: Recorder
    done: set[str]
    total: int
    personas: list
    repaired: ReadReport | None = None

    @property
    def run_dir(self) -> Path:
        return self.recorder.dir.path

    def pending(self):
        """Scenarios without a line yet (all of them for a fresh run)."""
        return (s for s in iter_scenarios(self.cfg, self.personas) if s.dialogue_id not in self.done)

    def spec(self) -> DialogueSpec:
        return DialogueSpec(
            run_id=self.recorder.manifest.run_id,
            simulator=self.recorder.manifest.simulator,
            assistant=self.recorder.manifest.assistant,
            max_turns=self.cfg.max_turns,
            timeout_s=self.cfg.dialogue_timeout_s,
        )


def resume_config(run_dir: Path) -> RunConfig:
    """The config a run started with (for ``--resume``)."""
    return RunConfig.model_validate(read_manifest(run_dir).config)


def prepare_run(cfg: RunConfig, resume: Path | None = None, overrides: dict[str, Any] | None = None) -> PreparedRun:
    personas = load_sources(cfg)
    total = count_scenarios(cfg, personas)
    if cfg.retrieval.index is not None and not is_lucene_index(cfg.retrieval.index):
        raise IndexMissingError(
            f"{cfg.retrieval.index}: not a Lucene index; build one with "
            "`simloop index build --corpus FILE.jsonl --out DIR`, or leave retrieval.index unset for the demo index"
        )
    ctx = Context(cfg, overrides=overrides or {})
    simulator = load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, ctx)
    assistant = load_plugin("assistant", cfg.assistant.name, cfg.assistant.params, ctx)
    chash = config_hash(cfg)
    if resume is not None:
        recorder, done, report = Recorder.resume(resume, chash)
        return PreparedRun(cfg, ctx, simulator, assistant, recorder, done, total, personas, report)
    run_id = cfg.run_id or new_run_id()
    cfg = cfg.model_copy(update={"run_id": run_id})
    manifest = RunManifest(
        run_id=run_id,
        config=cfg.model_dump(mode="json"),
        config_hash=chash,
        simulator=PluginRef(name=cfg.simulator.name, params=cfg.simulator.params),
        assistant=PluginRef(name=cfg.assistant.name, params=cfg.assistant.params),
        versions=versions(),
        counts={"scenarios": total},
    )
    recorder = Recorder.create(cfg.out, manifest)
    return PreparedRun(cfg, ctx, simulator, assistant, recorder, set(), total, personas)


async def execute(prep: PreparedRun, events: EventSink | None = None,
                  sink: Callable | None = None) -> RunStats:
    """Run every pending scenario of a prepared run and finish its manifest."""
    engine = Engine(prep.spec(), prep.simulator, prep.assistant, sink or prep.recorder.append,
                    prep.cfg.concurrency, events)
    status = "failed"
    try:
        stats = await engine.run(prep.pending())
        status = "interrupted" if stats.interrupted else "finished"
        return stats
    finally:
        await prep.ctx.aclose()
        counts = engine.stats.counts()
        counts["scenarios"] = prep.total
        counts["recorded"] = prep.recorder.written
        prep.recorder.finish(status, counts)
