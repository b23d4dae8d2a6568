"""The worker side of the Ray backend (see ``distributed``): the rate gate and the dialogue worker.

Both are plain classes, made Ray actors by the driver at run time (``ray.remote(cls)``), so
importing this module costs no Ray import.  A worker rebuilds config, plugins and scenarios
from the config and dialogue ids alone, and runs the one ``Engine`` over each shard.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, NotRequired, TypedDict

from ..config import RunConfig, with_absolute_paths
from ..llm import Permit
from ..run import DialogueSpec, Engine, Event
from ..schema import Scenario, Transcript

if TYPE_CHECKING:
    from ray.actor import ActorHandle

__all__ = ["Batch", "RateGate", "DialogueWorker", "gate_permit", "worker_config", "TICK_S"]

TICK_S = 0.2  # how often a worker sends what finished: batches lines, bounds progress lag


def worker_config(cfg: RunConfig, workers: int) -> RunConfig:
    """The config a worker builds from: input paths made absolute, tpm split between workers."""
    cfg = with_absolute_paths(cfg)
    llm = cfg.llm

    def share(tpm: int | None) -> int | None:
        return None if tpm is None else max(1, tpm // workers)

    roles = {name: over.model_copy(update={"tpm": share(over.tpm)}) if over.tpm else over
             for name, over in llm.roles.items()}
    return cfg.model_copy(update={
        "llm": llm.model_copy(update={"roles": roles,
                                      "default": llm.default.model_copy(update={"tpm": share(llm.default.tpm)})}),
    })


# ----------------------------------------------------------------------------- actors (made remote by the driver)


class RateGate:
    """Request slots per endpoint, evenly spaced at its rpm, for every worker of the run.

    It answers with a delay instead of holding the call: the worker sleeps locally, so a
    request costs one short call and no clocks need to agree across nodes.  Even spacing
    (no burst after an idle spell) keeps every window, not only the minute, under the limit.
    """

    def __init__(self) -> None:
        self._next: dict[str, float] = {}

    def reserve(self, url: str, rpm: float) -> float:
        now = time.monotonic()
        slot = max(now, self._next.get(url, now))
        # Slots follow the schedule, not the callers' wake-ups, so lateness is not lost; 1 %
        # headroom covers what lies between our slot and the server's arrival stamp.
        self._next[url] = slot + 1.01 * 60.0 / rpm
        return slot - now


def gate_permit(gate: ActorHandle) -> Permit:
    """A worker's ``LLMPool`` permit: ask the gate (an actor handle) for a slot, wait for it here."""

    async def permit(url: str, rpm: float) -> None:
        delay = await gate.reserve.remote(url, rpm)
        if delay > 0:
            await asyncio.sleep(delay)

    return permit


class Batch(TypedDict):
    """What a worker reports of a shard since its last batch."""

    started: list[str]  # dialogue ids
    ended: list[str]  # finished transcripts as JSON lines (as the recorder writes them: null fields stay)
    turns: int  # turns answered
    missing: NotRequired[list[str]]  # in the shard's last batch: ids this worker could not rebuild


class _Outbox:
    """What a worker has to report since its last batch (engine sink + event callback)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[str] = []  # transcripts as JSON lines
        self.turns = 0

    def sink(self, transcript: Transcript) -> None:
        self.ended.append(transcript.model_dump_json())  # as the recorder writes it: null fields stay

    def event(self, ev: Event) -> None:
        if ev.kind == "started":
            self.started.append(ev.dialogue_id)
        elif ev.kind == "turn":
            self.turns += 1

    def __bool__(self) -> bool:
        return bool(self.started or self.ended or self.turns)

    def take(self) -> Batch:
        batch = Batch(started=self.started, ended=self.ended, turns=self.turns)
        self.started, self.ended, self.turns = [], [], 0
        return batch


class DialogueWorker:
    """One worker: its own context and plugins, and the one engine over each shard it gets."""

    def __init__(self, cfg_json: str, spec: DialogueSpec, concurrency: int, gate: ActorHandle | None):
        from ..llm import LLMPool
        from ..run import Context, load_plugin, load_sources

        self.cfg = RunConfig.model_validate_json(cfg_json)
        self.spec, self.concurrency = spec, concurrency
        # The pool carries the cluster-wide permit; the worker owns it (and closes it).
        self.pool = LLMPool(self.cfg.llm, permit=gate_permit(gate) if gate is not None else None)
        self.ctx = Context(self.cfg, overrides={"llm_pool": self.pool})
        self.personas = load_sources(self.cfg)
        self.simulator = load_plugin("simulator", self.cfg.simulator.name, self.cfg.simulator.params, self.ctx)
        self.assistant = load_plugin("assistant", self.cfg.assistant.name, self.cfg.assistant.params, self.ctx)

    def _scenarios(self, wanted: set[str]) -> Iterator[Scenario]:
        """Rebuild the shard's scenarios, lazily; ``wanted`` keeps the ids not found."""
        from ..run import iter_scenarios

        for scenario in iter_scenarios(self.cfg, self.personas):
            if scenario.dialogue_id in wanted:
                wanted.discard(scenario.dialogue_id)
                yield scenario
                if not wanted:
                    return

    async def run(self, ids: list[str]) -> AsyncIterator[Batch]:
        """Run one shard; yields batches ``{started, ended, turns}``, the last with ``missing``."""
        outbox, wanted = _Outbox(), set(ids)
        engine = Engine(self.spec, self.simulator, self.assistant, outbox.sink, self.concurrency, outbox.event)
        task = asyncio.create_task(engine.run(self._scenarios(wanted)))
        while not task.done():
            await asyncio.wait({task}, timeout=TICK_S)
            if outbox:
                yield outbox.take()
        task.result()  # an engine bug surfaces on the driver as a failed call
        # Ids this worker cannot rebuild (inputs differ on this node) come back by name.
        last = outbox.take()
        last["missing"] = sorted(wanted)
        yield last

    async def aclose(self) -> None:
        from ..run import close_plugins

        try:
            await close_plugins(self.simulator, self.assistant)
        finally:
            await self.ctx.aclose()
            await self.pool.aclose()
