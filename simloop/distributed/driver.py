"""The Ray backend (DESIGN §9): shards over worker actors, one global rate limit, one run directory.

The driver validates and opens the run as a local run does (``prepare_run``), then hands
shards of pending dialogue ids to worker actors (``worker.py``).  Each worker rebuilds config, plugins and
scenarios (ids and seeds are pure functions of the config) and runs the same ``Engine``,
streaming finished transcripts back in batches.  Only the driver appends to
``dialogues.jsonl``, through the ``Recorder``, so resume works as it does locally.

Failures: a dead worker's unfinished dialogues go back to the queue and a new worker takes
its slot; the driver de-duplicates by dialogue id.  Dialogues that were running when a worker
died are re-run alone, and one that was running in ``MAX_ATTEMPTS`` dead workers is recorded
as an error instead of killing workers forever.

Rate limit: a ``RateGate`` actor hands out request slots evenly spaced at each endpoint's
rpm; workers plug it into their ``LLMPool`` as its ``permit``.  Tokens per minute stay per
process, split between the workers.

``ray`` is imported inside functions only.  Workers need simloop and the plugins importable
on every node, the same input paths (made absolute for them), and their own API keys in
the environment (never shipped by us).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import math
import os
import re
import socket
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from ..config import RunConfig
from ..errors import ConfigError
from ..loop import run as run_loop
from ..run import PreparedRun, RunStats, close_plugins, gather_until_cancelled, until_signalled
from ..schema import ErrorInfo, Stop, Transcript, Usage, utcnow
from .worker import Batch, DialogueWorker, RateGate, worker_config

if TYPE_CHECKING:
    from ray.actor import ActorHandle

__all__ = ["run_ray", "Bar", "RayRun", "plan_shards", "MAX_ATTEMPTS", "LOCAL_WORKERS"]

log = logging.getLogger(__name__)

Notice = Callable[[str], None]
LOCAL_WORKERS = 2  # worker actors (= CPUs) of the local cluster started when no address is given
MAX_ATTEMPTS = 3  # dead workers a dialogue may be running in before it is recorded as an error


# ----------------------------------------------------------------------------- planning


def plan_shards(ids: list[str], workers: int, per_worker: int) -> list[list[str]]:
    """Contiguous shards of equal length, a whole number of them per worker.

    A shard is one engine run whose last wave runs with fewer dialogues at once, so shards
    are kept long next to a worker's concurrency (8x), and equal so that workers finish
    together.  Past ~16 per worker they grow, up to 1,000 ids, so that big runs need few
    calls and few scenario rebuilds.
    """
    length = min(1000, max(8 * per_worker, math.ceil(len(ids) / (workers * 16))))
    count = min(len(ids), workers * max(1, len(ids) // (workers * length)))
    return [ids[i * len(ids) // count : (i + 1) * len(ids) // count] for i in range(count)]


# ----------------------------------------------------------------------------- the driver


class Bar(Protocol):
    """A rich-like progress bar (the CLI hands in rich's ``Progress``): one task, counted
    dialogues, and ``turns`` / ``errors`` fields."""

    def add_task(self, description: str, *, total: float | None, turns: int, errors: int) -> Any: ...

    def update(self, task: Any, /, *, advance: float | None = ..., turns: int = ..., errors: int = ...) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Any: ...


class _Driver:
    """Hands shards to worker slots, records what comes back, replaces workers that die."""

    def __init__(self, prep: PreparedRun, ids: list[str], workers: int, per_worker: int, gate: ActorHandle | None,
                 progress: Bar, notice: Notice):
        self.prep, self.ids, self.workers, self.per_worker, self.gate = prep, ids, workers, per_worker, gate
        self.progress, self.bar = progress, progress.add_task("dialogues", total=len(ids), turns=0, errors=0)
        self.notice = notice
        self.spec = prep.spec()
        self.cfg_json = worker_config(prep.cfg, workers).model_dump_json()
        self.queue: deque[list[str]] = deque()
        self.recorded: set[str] = set(prep.done)
        self.attempts: Counter[str] = Counter()
        self.stats, self.turns, self.failures, self.max_failures = RunStats(), 0, 0, 3 + 2 * workers
        self.gave_up: str | None = None
        self.ran = False  # has any worker reported anything yet
        self.actors: list[ActorHandle] = []

    def _new_actor(self) -> ActorHandle:
        # No Ray restarts: a dead worker is replaced here, where we know what it was doing.
        cls = __import__("ray").remote(num_cpus=1, max_restarts=0, max_task_retries=0)(DialogueWorker)
        self.actors.append(cls.remote(self.cfg_json, self.spec, self.per_worker, self.gate))
        return self.actors[-1]

    def _drop(self, actor: ActorHandle) -> None:
        __import__("ray").kill(actor, no_restart=True)  # frees its CPU for a replacement at once
        self.actors.remove(actor)

    async def _slot(self) -> None:
        actor = None
        while self.queue and self.gave_up is None:
            shard = self.queue.popleft()
            actor = actor or self._new_actor()
            if not await self._run_shard(actor, shard):
                self._drop(actor)
                actor = None
        if actor is not None:  # let it close its clients and cache before it goes
            with contextlib.suppress(Exception):  # it is killed either way
                await asyncio.wait_for(actor.aclose.remote(), timeout=10.0)
            self._drop(actor)

    async def drive(self) -> RunStats:
        t0 = time.perf_counter()
        self.queue.extend(plan_shards(self.ids, self.workers, self.per_worker))
        slots = [asyncio.create_task(self._slot()) for _ in range(min(self.workers, len(self.queue)))]
        try:
            self.stats.interrupted = await gather_until_cancelled(slots)
        finally:
            self.stats.wall_s = time.perf_counter() - t0
            try:
                await close_plugins(self.prep.simulator, self.prep.assistant)
            finally:
                await self.prep.ctx.aclose()
        return self.stats

    async def _run_shard(self, actor: ActorHandle, shard: list[str]) -> bool:
        """True when the shard ran to its end; False when its worker failed (work re-queued)."""
        import ray

        left, running = set(shard), set[str]()
        try:
            async for ref in actor.run.options(num_returns="streaming").remote(shard):
                batch = await ref
                running.update(batch["started"])
                await self._accept(batch, left, running)
        except ray.exceptions.RayError as exc:
            await self._worker_failed(exc, shard, left, running)
            return False
        return True

    async def _accept(self, batch: Batch, left: set[str], running: set[str]) -> None:
        self.ran = True
        self.turns += batch["turns"]
        self.progress.update(self.bar, turns=self.turns)
        for raw in batch["ended"]:
            transcript = Transcript.model_validate_json(raw)
            left.discard(transcript.dialogue_id)
            running.discard(transcript.dialogue_id)
            await self._record(transcript)
        for dialogue_id in batch.get("missing", ()):
            left.discard(dialogue_id)
            await self._record(self._lost(dialogue_id, "ScenarioNotFound", "the worker could not rebuild this "
                                          "scenario from the config (are the inputs the same on every node?)"))

    async def _record(self, transcript: Transcript) -> None:
        if transcript.dialogue_id in self.recorded:  # a re-run whose first try got through after all
            return
        self.recorded.add(transcript.dialogue_id)
        await self.prep.recorder.append(transcript)
        self.stats.add(transcript)
        self.progress.update(self.bar, advance=1, errors=self.stats.errors)

    async def _worker_failed(self, exc: BaseException, shard: list[str], left: set[str], running: set[str]) -> None:
        self.failures += 1
        init_failed = bool(getattr(exc, "actor_init_failed", False))  # it never ran a dialogue
        unfinished = [i for i in shard if i in left]
        # Blame what was running; a death before any report blames the first ones the engine took.
        suspects = set() if init_failed else (running & left) or set(unfinished[: self.per_worker])
        self.attempts.update(suspects)
        retry = [i for i in unfinished if self.attempts[i] < MAX_ATTEMPTS]
        why = _why(exc)
        for dialogue_id in (lost := sorted(left - set(retry))):
            await self._record(self._lost(dialogue_id, "WorkerLost", f"{MAX_ATTEMPTS} workers died running it ({why})"))
        # A worker that cannot start anywhere (say a plugin missing on the nodes) will not on a retry.
        give_up = self.failures > self.max_failures or (init_failed and not self.ran and self.failures >= self.workers)
        then = "giving up" if give_up else f"{len(retry)} unfinished dialogues go to another worker"
        lost_note = f"; {len(lost)} recorded as errors" if lost else ""
        self.notice(f"ray: a worker failed ({why}); {then}{lost_note}")
        if give_up:
            self.gave_up = f"{self.failures} worker failures (last: {why})"
            return
        # Suspects go back one per shard, so an innocent neighbour of a poison dialogue is blamed once.
        rest = [i for i in retry if i not in suspects]
        self.queue.extendleft(reversed([[i] for i in retry if i in suspects] + ([rest] if rest else [])))

    def _lost(self, dialogue_id: str, kind: str, message: str) -> Transcript:
        """An error transcript for a dialogue no worker could finish: a failure is recorded, never dropped."""
        from ..run import iter_scenarios

        scenario = next(s for s in iter_scenarios(self.prep.cfg, self.prep.personas) if s.dialogue_id == dialogue_id)
        now = utcnow()
        return Transcript(run_id=self.spec.run_id, dialogue_id=dialogue_id, scenario=scenario.ref(),
                          simulator=self.spec.simulator, assistant=self.spec.assistant, started_at=now, ended_at=now,
                          stop=Stop(reason="error", by="engine", detail=f"{kind}: {message}"), turns=[],
                          usage=Usage(), error=ErrorInfo(type=kind, message=message, source="engine"))

    def counts(self) -> dict[str, int]:
        return {**self.stats.counts(), "scenarios": _scenarios(self.prep), "recorded": self.prep.recorder.written,
                "ray_workers": self.workers, "worker_failures": self.failures}


def _scenarios(prep: PreparedRun) -> int:
    """The run's scenario count; a simulator that chooses its own (a remote user) has none
    to shard, so what was recorded is the count, as in a local run."""
    return prep.total if prep.total is not None else prep.recorder.written


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()  # Ray's messages run to dozens of lines
    return " ".join(lines[0].split())[:200] if lines else type(exc).__name__


def _why(exc: BaseException) -> str:
    """One line: a worker's own exception (the last line of Ray's traceback), else Ray's first."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    raised = getattr(exc, "actor_init_failed", False) or type(exc).__name__.startswith("RayTaskError")
    line = (lines[-1] if raised else lines[0]) if lines else ""
    return f"{type(exc).__name__}: {' '.join(line.split())[:200]}".rstrip(": ")


# ----------------------------------------------------------------------------- entry point


def _connect(cfg: RunConfig, workers: int | None) -> tuple[int, bool]:
    """Connect (``cfg.ray_address``) or start a local cluster on 127.0.0.1; (workers, started)."""
    import ray

    # Ray reports usage statistics to its authors unless told not to; a run sends nothing
    # anywhere it was not asked to (a user may still opt in by setting it to 1).
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():  # the caller's own session: use it, leave it running
        return workers or max(1, int(ray.cluster_resources().get("CPU", 1))), False
    # Worker output only with -v; otherwise it would tear through the progress bar.
    common: dict[str, Any] = {"log_to_driver": log.isEnabledFor(logging.INFO), "logging_level": logging.WARNING}
    local: dict[str, Any] = {"address": "local", "num_cpus": workers or LOCAL_WORKERS, "include_dashboard": False,
             "_node_ip_address": "127.0.0.1"}  # loopback only: a local cluster serves nobody else
    if cfg.ray_address:
        _reachable(cfg.ray_address)
    try:
        ray.init(**({"address": cfg.ray_address} if cfg.ray_address else local), **common)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise ConfigError(f"cannot start Ray ({cfg.ray_address or 'local cluster'}): {_first_line(exc)}") from None
    return workers or max(1, int(ray.cluster_resources().get("CPU", 1))), True


def _reachable(address: str, timeout_s: float = 10.0) -> None:
    """Fail fast on a wrong address: ``ray.init`` retries against it for minutes, unkillable by Ctrl-C."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto" and the like: Ray finds the cluster itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(f"cannot reach a Ray cluster at {address}: {exc.strerror or exc}") from None


class _NoProgress:
    """Stands in for a progress bar when the caller shows none."""

    def add_task(self, description: str, *, total: float | None, turns: int, errors: int) -> int:
        return 0

    def update(self, task: Any, /, *, advance: float | None = None, turns: int = 0, errors: int = 0) -> None:
        pass

    def __enter__(self) -> _NoProgress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


@dataclass
class RayRun:
    """What a Ray run did, for the caller to report."""

    status: str  # finished | interrupted | failed
    run_dir: Path
    recorded: int
    stats: RunStats | None
    gave_up: str | None = None


def run_ray(cfg: RunConfig, resume: Path | None = None, workers: int | None = None, progress: Bar | None = None,
            notice: Notice = log.warning, retry_errors: bool = False, llm_flags: tuple[str, ...] = ()) -> RayRun:
    """``simloop run --backend ray``: a prepared run over Ray workers (the CLI reports it).

    ``workers``: worker actors (default: 2 on a local cluster, one per CPU on a given one).
    ``cfg.concurrency`` stays the number of dialogues at once, split between the workers.
    ``progress`` is a rich-like bar (``add_task``/``update``, a context manager); ``notice``
    gets one-line messages (a torn line repaired, a worker lost).
    """
    if importlib.util.find_spec("ray") is None:  # checked before the run directory exists
        raise ConfigError("--backend ray needs Ray: pip install 'simloop[ray]'")
    from ..run import prepare_run

    prep = prepare_run(cfg, resume=resume, retry_errors=retry_errors, llm_flags=llm_flags)
    ids = [s.dialogue_id for s in prep.pending()]
    for line in prep.repaired.repair_notes(prep.run_dir, prep.recorder.retried) if prep.repaired else []:
        notice(f"note: {line}")
    if resume is not None:
        notice(f"resuming {prep.run_dir}: {len(prep.done)} recorded, {len(ids)} to go")
    status, driver, started = "failed", None, False
    try:
        n, started = _connect(prep.cfg, workers) if ids else (workers or 1, False)
        # num_cpus=0: the gate is tiny and must not take a worker's CPU.
        gate = __import__("ray").remote(num_cpus=0)(RateGate).remote() if ids else None
        driver = _Driver(prep, ids, n, max(1, math.ceil(prep.cfg.concurrency / n)), gate,
                         progress or _NoProgress(), notice)
        with driver.progress:
            stats = run_loop(until_signalled(driver.drive()))  # SIGTERM too: the workers are killed below
        status = "failed" if driver.gave_up else "interrupted" if stats.interrupted else "finished"
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        prep.recorder.finish(status, driver.counts() if driver else {"scenarios": _scenarios(prep)})
        _disconnect(driver, started)
    return RayRun(status, prep.run_dir, prep.recorder.written, driver.stats if driver else None,
                  driver.gave_up if driver else None)


def _disconnect(driver: _Driver | None, started: bool) -> None:
    import ray

    for actor in [*(driver.actors if driver else []), *([driver.gate] if driver and driver.gate else [])]:
        ray.kill(actor, no_restart=True)
    if started and ray.is_initialized():
        ray.shutdown()
