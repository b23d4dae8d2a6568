"""The engine: a bounded worker pool over scenarios (DESIGN §2).

Each dialogue is one ``DialogueSession`` (session.py), the one place that runs turns.
``concurrency`` workers pull scenarios from a lazy iterator, so memory follows the number
of *active* dialogues, not the number of scenarios.  A simulator whose user lives
elsewhere (``simapi``: a remote Sim.API server) chooses the scenarios itself: it hands
the engine one sequential source per conversation lane (``run_lanes``).  Every dialogue
ends in a transcript (completed, capped, timed out or failed), which the sink appends as
soon as it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..schema import Scenario, Transcript
from .plugins import Assistant, UserSimulator
from .session import DialogueSession, DialogueSpec

__all__ = ["Engine", "Event", "EventSink", "TranscriptSink", "RunStats", "run_dialogue", "gather_until_cancelled"]


@dataclass(frozen=True, slots=True)
class Event:
    """Progress events: ``started`` / ``turn`` / ``ended`` for a dialogue; for the run
    (``dialogue_id`` empty): ``preparing`` (``detail``: what is being opened), ``ready``
    (every dialogue starts after it), ``stopping`` (``detail``: the signal) and ``halted``
    (``detail``: why no new dialogue starts)."""

    kind: str
    dialogue_id: str = ""
    turn: int = 0
    transcript: Transcript | None = None
    detail: str = ""


EventSink = Callable[[Event], None]
# Receives each finished transcript; may be async (the recorder's append) or not.
TranscriptSink = Callable[[Transcript], object]
_Worker = Coroutine[Any, Any, None]


@dataclass
class RunStats:
    dialogues: int = 0
    turns: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    halted: str = ""  # why the engine stopped starting dialogues before the scenarios ran out

    def add(self, t: Transcript) -> None:
        self.dialogues += 1
        self.turns += len(t.turns)
        self.reasons[t.stop.reason] += 1
        self.errors += t.error is not None

    def counts(self) -> dict[str, int]:
        return {"dialogues": self.dialogues, "turns": self.turns, "errors": self.errors,
                **{f"stop.{k}": v for k, v in sorted(self.reasons.items())}}


async def run_dialogue(
    scenario: Scenario,
    sim: UserSimulator,
    assistant: Assistant,
    spec: DialogueSpec,
    emit: EventSink | None = None,
) -> Transcript:
    """Run one dialogue to its end; never raises except on cancellation."""
    on_turn = None
    if emit:
        emit(Event("started", scenario.dialogue_id))
        on_turn = lambda turn: emit(Event("turn", scenario.dialogue_id, turn=turn.index))  # noqa: E731
    return await DialogueSession(scenario, sim, spec, on_turn).run(assistant)


async def gather_until_cancelled(tasks: list[asyncio.Task]) -> bool:
    """Wait for ``tasks``; on cancellation (Ctrl-C) cancel them all and return True.

    Dialogues in flight are dropped: they have no line yet, so resume re-runs them, and
    everything that ended is already on disk.
    A task that fails (a sink that cannot write, a lane whose server is gone) stops the
    others too, and its exception is raised once they are down.
    """
    try:
        await asyncio.gather(*tasks)
        return False
    except asyncio.CancelledError:
        await _cancel(tasks)
        return True
    except Exception:
        await _cancel(tasks)
        raise


async def _cancel(tasks: list[asyncio.Task]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class Engine:
    """A worker pool: ``concurrency`` dialogues at once, each appended when it ends."""

    def __init__(
        self,
        spec: DialogueSpec,
        simulator: UserSimulator,
        assistant: Assistant,
        sink: TranscriptSink,
        concurrency: int,
        events: EventSink | None = None,
        halted: Callable[[], str | None] | None = None,
    ):
        """``halted``: asked before each new dialogue; a reason stops the engine starting
        more (those in flight finish), e.g. a prompt too long for the model's context window."""
        self.halted = halted
        self.spec = spec
        self.simulator = simulator
        self.assistant = assistant
        self.sink = sink
        self.concurrency = concurrency
        self.events = events
        self.stats = RunStats()
        self.stopping = False  # set once the run is interrupted: nothing more is recorded

    async def _dialogue(self, scenario: Scenario) -> None:
        transcript = await run_dialogue(scenario, self.simulator, self.assistant, self.spec, self.events)
        if self.stopping and transcript.error is not None:
            # A failure that surfaced while the run was being stopped is most likely the
            # stop itself (a closed client, a cancelled call caught as an error): leave the
            # dialogue without a line, so resume runs it again.
            return
        result = self.sink(transcript)
        if asyncio.iscoroutine(result):
            await result
        self.stats.add(transcript)
        if self.events:
            self.events(Event("ended", transcript.dialogue_id, transcript=transcript))

    def _stop_starting(self) -> bool:
        why = self.stats.halted or (self.halted() if self.halted is not None else None)
        if why and not self.stats.halted:
            self.stats.halted = why
            if self.events:
                self.events(Event("halted", detail=why))
        return bool(why)

    async def _worker(self, source: Iterator[Scenario]) -> None:
        # Workers share one iterator: the event loop is single-threaded, so next() is safe.
        # Asked before next(): a scenario never started stays unrecorded, so resume runs it.
        while not self._stop_starting():
            scenario = next(source, None)
            if scenario is None:
                return
            await self._dialogue(scenario)

    async def _lane(self, lane: AsyncIterator[Scenario]) -> None:
        # A lane asks for its next scenario only after its previous dialogue was recorded.
        async for scenario in lane:
            await self._dialogue(scenario)
            if self._stop_starting():
                return

    async def run(self, scenarios: Iterable[Scenario]) -> RunStats:
        source = iter(scenarios)
        return await self._pool([self._worker(source) for _ in range(self.concurrency)])

    async def run_lanes(self, lanes: list[AsyncIterator[Scenario]]) -> RunStats:
        """One worker per lane: each lane yields its scenarios one dialogue at a time."""
        return await self._pool([self._lane(lane) for lane in lanes])

    async def _pool(self, workers: list[_Worker]) -> RunStats:
        t0 = time.perf_counter()
        tasks: list[asyncio.Task[None]] = []
        try:
            with _quiet_gc():
                await self._gather(tasks, workers)
        finally:
            self.stats.wall_s = time.perf_counter() - t0
        return self.stats

    async def _gather(self, tasks: list[asyncio.Task[None]], workers: list[_Worker]) -> None:
        try:
            # One worker per loop iteration: the loop polls its sockets between starts, so the
            # first dialogues' requests are sent while later ones still start.  Started all in
            # one iteration, 1,000 dialogues built their first requests (~0.5 ms each) before
            # any connection completed, and every first request left ~0.85 s late
            # (scripts/bench section concurrency, at_2s).
            for w in workers:
                tasks.append(asyncio.create_task(w))
                await asyncio.sleep(0)
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:  # interrupted: in-flight dialogues are dropped unrecorded
            self.stopping = True
            await _cancel(tasks)
            self.stats.interrupted = True
        except Exception:
            self.stopping = True
            await _cancel(tasks)
            raise
        finally:
            for w in workers[len(tasks):]:  # never started (interrupted while starting)
                w.close()


# Python's cyclic GC by default collects every 700 new container objects and, now and then,
# walks every object in the process: the run's 1,000 dialogues in flight, and the models,
# JVM bridge and imports loaded before it.  That was ~15% of the CPU per LLM call at
# concurrency 500 (scripts/bench section concurrency).  While engines run, what exists
# before them is frozen out of collections (gc.freeze) and young objects are collected every
# 20,000; both undone when the last engine of the process ends.
_GC_YOUNG = 20_000
_gc_users = 0
_gc_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def _quiet_gc() -> Iterator[None]:
    global _gc_users, _gc_saved
    if _gc_users == 0:
        _gc_saved = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(max(_GC_YOUNG, _gc_saved[0]), *_gc_saved[1:])
    _gc_users += 1
    try:
        yield
    finally:
        _gc_users -= 1
        if _gc_users == 0:
            gc.set_threshold(*_gc_saved)
            gc.unfreeze()
