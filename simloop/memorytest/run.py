"""The long-horizon memory stress test behind `simloop memory` (DESIGN §6, §11).

For every persona and distance d, a scripted user reveals a fact at turn r and asks a
question that needs it at exactly turn r + d (``memoryprobes``); one sub-run per memory
strategy plays every script through the real engine with the assistant given
``memory=<strategy>``; probe answers are scored by rules or an LLM judge.

Output, ``<out>/<run_id>/``:

* ``memory.json`` - ``MemoryResults`` (``formats.py``): recall per distance and token costs per
  strategy, every probe's verdict (read by ``simloop report``); after an interrupt
  (``status`` "interrupted") only the strategies that finished;
* ``<run_id>-<strategy>/`` - a normal run directory per strategy;
* ``run.json`` + ``dialogues.jsonl`` holding a copy of every dialogue of every strategy,
  so the folder is itself a run directory that ``simloop report`` / ``simloop eval`` accept.

``tokens_per_turn`` is the mean size of the memory context (``turn.assistant.context.tokens``)
- the cost a strategy adds to every prompt; ``llm_tokens_per_turn`` is what the LLM
calls of the run billed (zero offline, except the summary stand-in's would-be cost).

The assistant must take the strategy as a parameter (``memory_param``, default
``memory``): ``bm25_extractive`` takes all four, ``genaius`` ``full`` and ``summary``.
Without an LLM endpoint the ``summary`` strategy runs on the offline extractive
summariser (``simloop.memory.offline``); ``memory.json`` names the model that wrote the summaries.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..config import RunConfig, apply_overrides, describe_validation_error
from ..errors import BadInputError, ConfigError, IndexMissingError
from ..files import atomic_write
from ..llm import check_endpoints, check_judge_llm
from ..memory import available_strategies
from ..run import (
    Context,
    Event,
    PreparedRun,
    Recorder,
    check_out_dir,
    check_run_id,
    effective_params,
    execute,
    load_plugin,
    load_sources,
    new_manifest,
    new_run_id,
    occupied,
    prepare_run,
)
from ..schema import PluginRef, RunManifest, Scenario, Transcript
from ..search import is_lucene_index
from .facts import FACTS, fact_by_id
from .formats import MemoryResults, MemoryStatus
from .probes import ProbeJudge, ProbePlan, build_probes
from .score import judge_rows, score_probe, summarise_probes

__all__ = ["MemoryTestConfig", "MemoryTest", "SIMULATOR", "MEMORY_FILE", "parse_config"]

SIMULATOR = "simloop.memorytest.probes:ProbeSimulator"  # the scripted user (a module:attr plugin)
MEMORY_FILE = "memory.json"
MemoryEvent = Callable[[str, Event], None]


class MemoryTestConfig(BaseModel):
    """Everything `simloop memory` needs, validated before anything is written."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    strategies: list[str] = Field(default_factory=lambda: ["full", "summary", "window", "adaptive"])
    distances: list[int] = Field(default_factory=lambda: [5, 10, 20, 40])
    reveal_turn: int = Field(2, ge=1, description="the turn that reveals the fact")
    facts: list[str] = Field(default_factory=list, description="only these fact ids (empty: the whole catalogue)")
    facts_per_persona: int = Field(1, ge=1, le=len(FACTS))
    assistant: str = "bm25_extractive"
    assistant_params: dict[str, Any] = Field(default_factory=dict)
    memory_param: str = Field("memory", description="the assistant parameter naming the strategy")
    judge: bool = False

    @field_validator("strategies")
    @classmethod
    def _known_strategies(cls, v: list[str]) -> list[str]:
        known = available_strategies()
        unknown = [s for s in v if s not in known]
        if unknown or not v:
            raise ValueError(f"unknown memory strategy {unknown[0]!r}; known: {', '.join(known)}" if unknown
                             else "give at least one strategy")
        return list(dict.fromkeys(v))

    @field_validator("distances")
    @classmethod
    def _positive_distances(cls, v: list[int]) -> list[int]:
        if not v or min(v) < 1:
            raise ValueError("distances are turns between reveal and probe: give one or more integers >= 1")
        return sorted(set(v))

    @field_validator("facts")
    @classmethod
    def _known_facts(cls, v: list[str]) -> list[str]:
        for f in v:
            try:
                fact_by_id(f)
            except KeyError:
                raise ValueError(f"unknown fact {f!r}; known: {', '.join(x.id for x in FACTS)}") from None
        return v

    @model_validator(mode="after")
    def _fits_in_a_run(self) -> MemoryTestConfig:
        if self.max_turns > 1000:
            raise ValueError(f"reveal turn + largest distance is {self.max_turns}; runs allow at most 1000 turns")
        if self.memory_param in self.assistant_params:
            raise ValueError(f"assistant param {self.memory_param!r} is set per strategy; do not pass it")
        return self

    @property
    def max_turns(self) -> int:
        return self.reveal_turn + max(self.distances)


def parse_config(data: dict[str, Any]) -> MemoryTestConfig:
    try:
        return MemoryTestConfig.model_validate({k: v for k, v in data.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(describe_validation_error("simloop memory", exc)) from None


# ----------------------------------------------------------------------------- the run


@dataclass
class _ScriptedRun(PreparedRun):
    """A prepared run whose scenarios are the probe scripts, not persona x topic."""

    scripts: list[Scenario] = field(default_factory=list)

    def pending(self) -> Iterator[Scenario]:
        return iter(self.scripts)


@dataclass
class _Strategy:
    name: str
    plans: list[tuple[Scenario, ProbePlan]]
    transcripts: list[Transcript] = field(default_factory=list)
    run_dir: Path | None = None
    finished: bool = False  # every probe dialogue ran: only then is the strategy scored

    @property
    def turns(self) -> int:
        return sum(p.probe_turn for _, p in self.plans)


class MemoryTest:
    """Validate on construction (nothing written), then ``await run()``.

    ``base`` is the run config every strategy's sub-run starts from (personas, index, LLM,
    concurrency, timeout, seed, out, run id; `simloop memory` builds it from its flags like
    every command does).  ``overrides`` are plugin-context seams (``retriever``,
    ``embedder``, ``chat:<role>``) for tests.
    """

    def __init__(self, cfg: MemoryTestConfig, base: RunConfig | None = None, overrides: dict[str, Any] | None = None):
        self.cfg = cfg
        self.overrides = dict(overrides or {})
        base = base or RunConfig()
        self.run_id = base.run_id or new_run_id("memory")
        self.base = base.model_copy(update={"run_id": self.run_id})
        self._check_new_run_dir()
        index = base.retrieval.index
        if index is not None and not is_lucene_index(index):
            raise IndexMissingError(f"{index}: not a Lucene index; build one with `simloop index build`")
        personas = load_sources(self.base)
        facts = [fact_by_id(f) for f in cfg.facts] or list(FACTS)
        self.strategies = [
            _Strategy(s, build_probes(personas, cfg.distances, cfg.reveal_turn, cfg.facts_per_persona, base.seed,
                                      prefix=s, facts=facts))
            for s in cfg.strategies
        ]
        self.offline_summary = "summary" in cfg.strategies and not self._llm_configured("assistant.summary")
        if cfg.judge:
            check_judge_llm(self.base.llm.resolve("judge"), "--base-url and --model")
        for s in self.strategies:  # bad assistant names or params fail now, before any directory exists
            given = self._assistant_params(s.name)
            plugin = load_plugin("assistant", cfg.assistant, given, Context(self._run_config(s.name)))
        # What run.json records: the effective params, less the one set per strategy.
        self.assistant_params = {k: v for k, v in effective_params(plugin, given).items() if k != cfg.memory_param}

    @property
    def run_dir(self) -> Path:
        return self.base.out / self.run_id

    def _check_new_run_dir(self) -> None:
        """--out must be able to hold the run directory, and the run id must be new: found now,
        not as an OSError after loading plugins.  Said here, not by the recorder, because its
        advice (--resume) is `simloop run`'s: a memory test cannot be resumed."""
        check_out_dir(self.base.out)
        check_run_id(self.run_id)
        if occupied(self.run_dir):
            raise BadInputError(f"{self.run_dir} already exists; pass another --run-id "
                                "(a memory test cannot be resumed, it starts over)")

    @property
    def total_turns(self) -> int:
        return sum(s.turns for s in self.strategies)

    def _assistant_params(self, strategy: str) -> dict[str, Any]:
        return {**self.cfg.assistant_params, self.cfg.memory_param: strategy}

    def _run_config(self, strategy: str) -> RunConfig:
        """One strategy's sub-run: the base config with the probe scripts as the simulator."""
        return apply_overrides(self.base, {
            "run_id": f"{self.run_id}-{strategy}", "out": self.run_dir, "simulator": {"name": SIMULATOR, "params": {}},
            "assistant": {"name": self.cfg.assistant, "params": self._assistant_params(strategy)},
            "max_turns": self.cfg.max_turns, "progress": False,
        }, "simloop memory")

    def _llm_configured(self, role: str) -> bool:
        """Is there an endpoint or a chosen model for ``role``?  Without one, the summary
        strategy runs on the offline stand-in."""
        llm = self.base.llm
        chosen = "model" in llm.default.model_fields_set or any("model" in o.settings() for o in llm.roles.values())
        return bool(llm.resolve(role).base_url or os.environ.get("OPENAI_BASE_URL") or chosen)

    def _manifest(self) -> RunManifest:
        config = self.cfg.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps({k: v for k, v in config.items() if k not in ("out", "run_id")},
                                           sort_keys=True).encode()).hexdigest()[:16]
        # "llm" and "scenarios" as in a run's config, so `simloop eval --judge` finds the endpoint.
        base = self.base.model_dump(mode="json")
        return new_manifest(self.run_id, {"memory": config, "llm": base["llm"], "scenarios": base["scenarios"]},
                            simulator=PluginRef(name=SIMULATOR),
                            assistant=PluginRef(name=self.cfg.assistant, params=self.assistant_params),
                            scenarios=sum(len(s.plans) for s in self.strategies), digest=digest)

    async def run(self, on_event: MemoryEvent | None = None) -> MemoryResults:
        """Every strategy's sub-run, then scoring; returns (and writes) memory.json."""
        if self.cfg.judge:  # as eval's judge, a dead endpoint is bad input found before any write;
            # off the loop: a blocking request must not stall a server this loop runs (tests)
            await asyncio.to_thread(check_endpoints, self.base.llm, ["judge"])
        top = Recorder.create(self.base.out, self._manifest())
        shared = Context(self.base, overrides=dict(self.overrides))
        status: MemoryStatus = "failed"
        try:
            # One retriever and one embedder per encoder for all sub-runs: the index and the
            # models load once (MPNet: the offline assistants' PTKB ranker).
            overrides = {**self.overrides, "retriever": await shared.retriever(), "embedder": await shared.embedder(),
                         "embedder:mpnet": await shared.embedder("mpnet")}
            if self.offline_summary and "chat:assistant.summary" not in overrides:
                from ..memory import OfflineSummariser

                overrides["chat:assistant.summary"] = OfflineSummariser()
            for s in self.strategies:
                stats = await self._run_strategy(s, overrides, on_event)
                for t in s.transcripts:
                    await top.append(t)
                if stats.interrupted:
                    status = "interrupted"
                    break
                s.finished = True
            else:
                status = "finished"
            memory = await self._score(shared, status)
            atomic_write(self.run_dir / MEMORY_FILE, memory.model_dump_json(indent=2) + "\n")
            return memory
        except (KeyboardInterrupt, asyncio.CancelledError):
            # A Ctrl-C (or SIGTERM) outside a sub-run's handler, e.g. while the next strategy
            # prepares: the run was stopped, it did not fail.  No memory.json: nothing scored.
            status = "interrupted"
            raise
        finally:
            await shared.aclose()
            top.finish(status, {"scenarios": sum(len(s.plans) for s in self.strategies), "recorded": top.written})

    async def _run_strategy(self, s: _Strategy, overrides: dict[str, Any], on_event: MemoryEvent | None):
        prep = prepare_run(self._run_config(s.name), overrides=overrides)
        fields = {k: getattr(prep, k) for k in PreparedRun.__dataclass_fields__}
        run = _ScriptedRun(**{**fields, "total": len(s.plans)}, scripts=[sc for sc, _ in s.plans])
        s.run_dir = run.run_dir

        async def sink(t: Transcript) -> None:
            await prep.recorder.append(t)
            s.transcripts.append(t)

        events = (lambda ev: on_event(s.name, ev)) if on_event else None
        return await execute(run, events=events, sink=sink)

    async def _score(self, shared: Context, status: MemoryStatus) -> MemoryResults:
        judge = ProbeJudge(shared.chat("judge"), self.base.concurrency) if self.cfg.judge else None
        memory = MemoryResults(
            run_id=self.run_id, status=status, distances=self.cfg.distances, reveal_turn=self.cfg.reveal_turn,
            scorer="judge" if judge else "rules",
            assistant=PluginRef(name=self.cfg.assistant, params=self.cfg.assistant_params),
            personas=sorted({p.persona_id for s in self.strategies for _, p in s.plans}))
        # An interrupted strategy is left out, not scored as recall 0 over the probes it never
        # ran; so are the strategies after it.  Its dialogues stay in its run directory.
        for s in (s for s in self.strategies if s.finished):
            by_id = {t.dialogue_id: t for t in s.transcripts}
            rows = [score_probe(p, by_id.get(p.dialogue_id), s.name) for _, p in s.plans]
            if judge is not None:
                rows = await judge_rows(judge, [p for _, p in s.plans], rows)
            entry = summarise_probes(rows, s.transcripts, self.cfg.distances)
            entry.run_dir = s.run_dir.name if s.run_dir else None
            # Which model wrote the summaries (the offline stand-in or a real one), from the stages.
            entry.memory_models = sorted({st.model for tr in s.transcripts for t in tr.turns for st in t.stages
                                          if st.model and st.name.startswith(("summary", "memory."))})
            memory.strategies[s.name] = entry
            memory.probes += rows
        return memory
