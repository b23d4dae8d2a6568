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

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..config import RunConfig, config_hash, describe_validation_error, with_absolute_paths
from ..errors import ConfigError, IndexMissingError, ResumeError, SimloopError
from ..llm import check_endpoints
from ..progress import NO_PROGRESS
from ..schema import Persona, PluginRef, RunStatus, Scenario
from ..search import NOTE_AFTER_S, is_lucene_index
from .engine import Engine, Event, EventSink, RunStats, TranscriptSink
from .interrupt import Interrupt
from .manifest import find_validity, new_manifest, record_capabilities, simulator_digest, simulator_identity
from .plugins import (
    Assistant,
    ChecksSources,
    Context,
    UserSimulator,
    chooses_scenarios,
    close_plugins,
    effective_params,
    load_plugin,
    plugin_llm_min_prompts,
    plugin_llm_roles,
    plugin_needs,
)
from .recorder import Recorder, check_out_dir, new_run_id
from .runfiles import MANIFEST, ReadReport, read_manifest
from .scenarios import count_scenarios, iter_scenarios, load_sources
from .session import DialogueSpec

__all__ = ["PreparedRun", "prepare_run", "execute", "warm_up", "resume_config", "llm_roles"]

log = logging.getLogger(__name__)


@dataclass
class PreparedRun:
    cfg: RunConfig
    ctx: Context
    simulator: UserSimulator
    assistant: Assistant
    recorder: Recorder
    done: set[str]
    total: int | None  # None: the simulator chooses the scenarios
    personas: list[Persona]
    repaired: ReadReport | None = None

    @property
    def run_dir(self) -> Path:
        return self.recorder.dir.path

    def pending(self) -> Iterator[Scenario]:
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


def llm_roles(*plugins: object) -> list[str]:
    """The LLM roles the plugins say they call (``llm_roles``, an attribute or a property)."""
    roles: list[str] = []
    for plugin in plugins:
        roles += [r for r in plugin_llm_roles(plugin) if r not in roles]
    return roles


def resume_config(run_dir: Path) -> RunConfig:
    """The config a run started with (for ``--resume``).  One that no longer validates (an
    edited run.json, a run of another simloop version, a key in a URL) is a ResumeError
    naming the field."""
    source = str(Path(run_dir) / MANIFEST)
    try:
        return RunConfig.model_validate(read_manifest(run_dir).config)
    except ValidationError as exc:
        why = describe_validation_error(source, exc, within="config")
    except ConfigError as exc:  # a validator's own line ("llm.roles.x: ...")
        why = f"{source}: {exc}"
    raise ResumeError(f"{why}; this simloop cannot resume that run (start a new one)")


def prepare_run(cfg: RunConfig, resume: Path | None = None, overrides: dict[str, Any] | None = None,
                secrets: Mapping[str, str] | None = None, retry_errors: bool = False,
                preflight: bool = True, remote_check: Callable[[], None] | None = None,
                llm_flags: tuple[str, ...] = ()) -> PreparedRun:
    """Validate everything, then create (or reopen, ``resume``) the run directory.

    ``preflight``: ask each LLM endpoint the plugins need for an answer first (exit 2 if
    one does not); tests with fake chat models at the seams turn it off.  ``remote_check``
    runs last before anything is written, after every local input is checked (rehearse:
    does the Sim.API server answer and take the token).  ``llm_flags``: the LLM flags the
    user gave (``--model``...), refused when no plugin calls an LLM (they would do nothing)."""
    if resume is None:
        check_out_dir(cfg.out)
        # Recorded absolute (run.json, the config hash): a resume from another folder reads the same files.
        cfg = with_absolute_paths(cfg)
    else:
        cfg = _paths_as_recorded(cfg, resume)
    ctx = Context(cfg, overrides=overrides or {}, secrets=dict(secrets or {}))
    simulator = load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, ctx)
    assistant = load_plugin("assistant", cfg.assistant.name, cfg.assistant.params, ctx)
    if llm_flags and not llm_roles(simulator, assistant):
        raise ConfigError(
            f"{', '.join(llm_flags)}: neither the simulator {cfg.simulator.name!r} nor the assistant "
            f"{cfg.assistant.name!r} calls an LLM, so this would change nothing; drop it, or choose an LLM plugin "
            "(--simulator llm, --assistant genaius, ...)")
    remote = chooses_scenarios(simulator)
    personas = [] if remote else load_sources(cfg)
    total = None if remote else count_scenarios(cfg, personas)
    if isinstance(simulator, ChecksSources) and not remote:
        simulator.check_sources(personas, cfg)  # e.g. the rubric simulator on topics without rubric questions
    if cfg.retrieval.index is not None and not is_lucene_index(cfg.retrieval.index):
        raise IndexMissingError(
            f"{cfg.retrieval.index}: not a Lucene index; build one with "
            "`simloop index build --corpus FILE.jsonl --out DIR`, or leave retrieval.index unset for the demo index"
        )
    if preflight and not any(k.startswith("chat:") or k == "llm_pool" for k in ctx.overrides):
        min_prompt = {**plugin_llm_min_prompts(simulator), **plugin_llm_min_prompts(assistant)}
        ctx.llm_capabilities = check_endpoints(cfg.llm, llm_roles(simulator, assistant), min_prompt=min_prompt)
    if "retriever" not in ctx.overrides and any("retriever" in plugin_needs(p) for p in (simulator, assistant)):
        from ..search import check_retrieval

        # Java, its options, the index: what fails after the folder exists (a Ray driver never searches)
        check_retrieval(cfg.retrieval, start_java=cfg.backend != "ray")
    if remote_check is not None:
        remote_check()
    chash = config_hash(cfg)
    if resume is not None:
        recorder, done, report = Recorder.resume(resume, chash, retry_errors=retry_errors)
        if ctx.llm_capabilities:
            record_capabilities(recorder.manifest, ctx.llm_capabilities)
            recorder.write_manifest()
        return PreparedRun(cfg, ctx, simulator, assistant, recorder, done, total, personas, report)
    run_id = cfg.run_id or new_run_id()
    cfg = cfg.model_copy(update={"run_id": run_id})
    sim_ref = PluginRef(name=cfg.simulator.name, params=effective_params(simulator, cfg.simulator.params))
    manifest = new_manifest(
        run_id, cfg, simulator=sim_ref,
        assistant=PluginRef(name=cfg.assistant.name, params=effective_params(assistant, cfg.assistant.params)),
        scenarios=total, digest=chash,
        validity=find_validity(simulator_digest(simulator_identity(cfg, sim_ref, llm_roles(simulator)))),
    )
    record_capabilities(manifest, ctx.llm_capabilities)
    recorder = Recorder.create(cfg.out, manifest)
    return PreparedRun(cfg, ctx, simulator, assistant, recorder, set(), total, personas)


def _paths_as_recorded(cfg: RunConfig, run_dir: Path) -> RunConfig:
    """A resume's config with absolute input paths when the run recorded them so (a command
    that rebuilds its config, as ``rehearse`` does, gives them relative); a run that
    recorded relative paths (older simloop) keeps them, so its config hash still matches."""
    placed = with_absolute_paths(cfg)
    try:
        recorded = read_manifest(run_dir).config_hash
    except SimloopError:  # Recorder.resume reports it, after the other inputs are checked
        return cfg
    return placed if config_hash(placed) == recorded else cfg


async def execute(prep: PreparedRun, events: EventSink | None = None,
                  sink: TranscriptSink | None = None) -> RunStats:
    """Warm up, run every pending scenario of a prepared run and finish its manifest.

    The first SIGINT/SIGTERM (on the main thread) stops the run: see ``run/interrupt.py``.
    """
    engine = Engine(prep.spec(), prep.simulator, prep.assistant, sink or prep.recorder.append,
                    prep.cfg.concurrency, events, halted=prep.ctx.llm_halted)
    work = asyncio.create_task(_work(prep, engine, events))
    status: RunStatus = "failed"
    with Interrupt(work, on_first=_announce_stop(engine, events)):
        try:
            stats = await _wait_work(work, engine)
            status = "interrupted" if stats.interrupted else "finished"
            return stats
        except asyncio.CancelledError:  # the caller cancelled us (not a signal)
            status = "interrupted"
            raise
        finally:
            await _close_run(prep, engine, status)


# --------------------------------------------------------------------------- warm-up
async def warm_up(prep: PreparedRun, events: EventSink | None = None) -> list[str]:
    """Open what the plugins declare they ``need`` (the search index with its JVM, the
    embedder) before the first dialogue, so no turn's latency carries a start-up cost.
    Returns the names opened, in order.  Resources nobody declares are still made on
    first use (``Context``).

    A wait longer than ``NOTE_AFTER_S`` says what it waits for: the
    resource's own notes (the demo index's first build, a model unpack, another process's
    lock) as ``waiting`` events, and for a step that says nothing itself a ``waiting``
    event once it has taken that long."""
    opened: list[str] = []
    notes = _Notes(events, asyncio.get_running_loop())
    prep.ctx.progress = notes
    try:
        for plugin in (prep.assistant, prep.simulator):
            for name in plugin_needs(plugin):
                if name not in _WARMABLE or name in opened:
                    continue
                await _open_one(prep, name, notes, events)  # one at a time: loads crowd 2 cores
                opened.append(name)
    finally:
        prep.ctx.progress = NO_PROGRESS
    return opened


async def _open_one(prep: PreparedRun, name: str, notes: _Notes, events: EventSink | None) -> None:
    label = _WARMABLE[name]
    log.info("preparing: %s", label)
    if events:
        events(Event("preparing", detail=label))
    notes.noted = False
    slow = asyncio.get_running_loop().call_later(
        NOTE_AFTER_S, lambda: None if notes.noted else notes.phase(
            f"preparing the {label}: still loading after {NOTE_AFTER_S:.0f} s (slower on a busy machine)"))
    method, _, encoder = name.partition(":")  # "embedder:mpnet" -> ctx.embedder("mpnet")
    try:
        await getattr(prep.ctx, method)(*([encoder] if encoder else []))
    finally:
        slow.cancel()


class _Notes:
    """What a resource being opened says it waits for, as ``waiting`` events on the loop
    (the notes come from the worker thread that builds or unpacks)."""

    def __init__(self, events: EventSink | None, loop: asyncio.AbstractEventLoop):
        self.events, self.loop, self.noted = events, loop, False

    def phase(self, label: str, total: int | None = None) -> None:
        self.noted = True
        if self.events is not None:
            event = Event("waiting", detail=label)
            try:
                if asyncio.get_running_loop() is self.loop:
                    self.events(event)
                    return
            except RuntimeError:  # a worker thread: no loop runs there
                pass
            self.loop.call_soon_threadsafe(self.events, event)

    def advance(self, n: int = 1) -> None:
        pass


# What a plugin may list in ``needs``, and what the progress display calls it.
_WARMABLE = {"retriever": "search index (JVM)", "embedder": "embedder (MiniLM)",
             "embedder:mpnet": "PTKB encoder (all-mpnet-base-v2)"}


# --------------------------------------------------------------------------- interruption
async def _work(prep: PreparedRun, engine: Engine, events: EventSink | None) -> RunStats:
    if prep.total is not None and prep.total <= len(prep.done):
        return engine.stats  # a resume with nothing left: no JVM boot or model load for zero dialogues
    await warm_up(prep, events)
    log.info("ready: dialogues start")
    if events:
        events(Event("ready"))
    if chooses_scenarios(prep.simulator):
        return await engine.run_lanes(prep.simulator.lanes(set(prep.done)))
    return await engine.run(prep.pending())


async def _wait_work(work: asyncio.Task, engine: Engine) -> RunStats:
    """The work's stats; a signal during warm-up (the task cancelled before the engine
    ran) is an interrupted run with nothing recorded."""
    try:
        return await work
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we were cancelled ourselves
        engine.stopping = engine.stats.interrupted = True
        return engine.stats


def _announce_stop(engine: Engine, events: EventSink | None) -> Callable[[str], None]:
    def on_first(signame: str) -> None:
        engine.stopping = True  # from now on no failed dialogue is recorded (engine.py)
        if events:
            events(Event("stopping", detail=signame))
    return on_first


# Closing plugins after an interrupt waits at most this long: a search or model call
# still running on a thread must not keep an interrupted process alive.
_CLOSE_AFTER_STOP_S = 3.0


async def _close_run(prep: PreparedRun, engine: Engine, status: RunStatus) -> None:
    """Finish the manifest and close plugins and shared resources.  An interrupted run
    writes ``run.json`` first and gives closing a deadline."""
    if status == "interrupted":
        _finish_manifest(prep, engine, status)
        try:
            async with asyncio.timeout(_CLOSE_AFTER_STOP_S):
                await _close_resources(prep)
        except Exception:  # a deadline passed or a close failed: the run is recorded; exit regardless
            log.warning("resources not closed cleanly after the interrupt", exc_info=True)
        return
    try:
        await _close_resources(prep)
    finally:
        _finish_manifest(prep, engine, status)


async def _close_resources(prep: PreparedRun) -> None:
    try:
        await close_plugins(prep.simulator, prep.assistant)
    finally:
        await prep.ctx.aclose()


def _finish_manifest(prep: PreparedRun, engine: Engine, status: RunStatus) -> None:
    if prep.ctx.llm_capabilities:  # what the run learnt on top of the preflight's findings
        record_capabilities(prep.recorder.manifest, prep.ctx.llm_capabilities)
    counts = engine.stats.counts()
    counts["recorded"] = prep.recorder.written
    counts["scenarios"] = prep.total if prep.total is not None else prep.recorder.written
    prep.recorder.finish(status, counts)
