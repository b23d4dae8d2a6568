"""A whole run: validate everything, then create the run directory, run, and finish it.

Everything that can be wrong with the user's input (personas, topics, plugin names and
params, the index) is checked *before* the run directory exists, so a bad input leaves
nothing half-written behind.

Scenarios come from the personas (or an iKAT topic file), persona x topic x repeat;
a simulator whose user lives elsewhere (it has ``lanes(done)``, like ``simapi``) chooses
them itself, one sequential lane per remote conversation, and the count is not known
ahead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..config import RunConfig, config_hash
from ..errors import IndexMissingError
from ..llm.preflight import check_endpoints
from ..schema import PluginRef
from ..search.corpus import is_lucene_index
from .engine import Engine, EventSink, RunStats
from .manifest import new_manifest
from .plugins import Context, close_plugins, effective_params, load_plugin
from .session import DialogueSpec
from .recorder import ReadReport, Recorder, check_out_dir, new_run_id, read_manifest
from .scenarios import count_scenarios, iter_scenarios, load_sources

__all__ = ["PreparedRun", "prepare_run", "execute", "resume_config", "chooses_scenarios", "llm_roles"]


def chooses_scenarios(simulator: Any) -> bool:
    """Does ``simulator`` bring its own scenarios (a remote user), as ``lanes(done)``?"""
    return callable(getattr(simulator, "lanes", None))


@dataclass
class PreparedRun:
    cfg: RunConfig
    ctx: Context
    simulator: Any
    assistant: Any
    recorder: Recorder
    done: set[str]
    total: int | None  # None: the simulator chooses the scenarios
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


def llm_roles(*plugins: Any) -> list[str]:
    """The LLM roles the plugins say they call (``llm_roles``, an attribute or a property)."""
    roles: list[str] = []
    for plugin in plugins:
        roles += [r for r in getattr(plugin, "llm_roles", ()) or () if r not in roles]
    return roles


def resume_config(run_dir: Path) -> RunConfig:
    """The config a run started with (for ``--resume``)."""
    return RunConfig.model_validate(read_manifest(run_dir).config)


def prepare_run(cfg: RunConfig, resume: Path | None = None, overrides: dict[str, Any] | None = None,
                secrets: Mapping[str, str] | None = None, retry_errors: bool = False,
                preflight: bool = True) -> PreparedRun:
    """Validate everything, then create (or reopen, ``resume``) the run directory.

    ``preflight``: ask each LLM endpoint the plugins need for an answer first (exit 2 if
    one does not); tests with fake chat models at the seams turn it off."""
    if resume is None:
        check_out_dir(cfg.out)
    ctx = Context(cfg, overrides=overrides or {}, secrets=dict(secrets or {}))
    simulator = load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, ctx)
    assistant = load_plugin("assistant", cfg.assistant.name, cfg.assistant.params, ctx)
    remote = chooses_scenarios(simulator)
    personas = [] if remote else load_sources(cfg)
    total = None if remote else count_scenarios(cfg, personas)
    check_sources = getattr(simulator, "check_sources", None)
    if callable(check_sources) and not remote:
        check_sources(personas, cfg)  # e.g. the rubric simulator on topics without rubric questions
    if cfg.retrieval.index is not None and not is_lucene_index(cfg.retrieval.index):
        raise IndexMissingError(
            f"{cfg.retrieval.index}: not a Lucene index; build one with "
            "`simloop index build --corpus FILE.jsonl --out DIR`, or leave retrieval.index unset for the demo index"
        )
    if preflight and not any(k.startswith("chat:") or k == "llm_pool" for k in ctx.overrides):
        check_endpoints(cfg.llm, llm_roles(simulator, assistant))
    chash = config_hash(cfg)
    if resume is not None:
        recorder, done, report = Recorder.resume(resume, chash, retry_errors=retry_errors)
        return PreparedRun(cfg, ctx, simulator, assistant, recorder, done, total, personas, report)
    run_id = cfg.run_id or new_run_id()
    cfg = cfg.model_copy(update={"run_id": run_id})
    manifest = new_manifest(
        run_id, cfg,
        simulator=PluginRef(name=cfg.simulator.name, params=effective_params(simulator, cfg.simulator.params)),
        assistant=PluginRef(name=cfg.assistant.name, params=effective_params(assistant, cfg.assistant.params)),
        scenarios=total, digest=chash,
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
        if chooses_scenarios(prep.simulator):
            stats = await engine.run_lanes(prep.simulator.lanes(set(prep.done)))
        else:
            stats = await engine.run(prep.pending())
        status = "interrupted" if stats.interrupted else "finished"
        return stats
    finally:
        try:
            await close_plugins(prep.simulator, prep.assistant)
        finally:
            await prep.ctx.aclose()
            counts = engine.stats.counts()
            counts["recorded"] = prep.recorder.written
            counts["scenarios"] = prep.total if prep.total is not None else prep.recorder.written
            prep.recorder.finish(status, counts)
