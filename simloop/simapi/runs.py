"""Sim.API runs on the rehearsal server: queue, budget, status codes, persistence, transcripts.

A Sim.API run (one team, one ``run_id``) walks an ordered queue of persona × topic pairs,
one session at a time (SIMULATION_API.md §3).  Each hosted run is also a simloop run
directory ``<out>/serve-<run_id>`` (``serve-debug-<run_id>`` for the debug API) whose
assistant is ``remote:<team>``: a dialogue is appended when its session ends, so
``simloop eval`` / ``report`` work on rehearsals.

Status codes follow the organisers' server (§3 and its code): 400 empty name/description
and ``continue`` after the last topic; 403 team mismatch or budget used up; 404 status or
dump of an unknown run; 412 run id already used; 428 ``continue``/``session`` on an
unknown run or on a run completed before this server process started (the organisers'
server forgets runs in memory on a restart, after which it answers 428; we keep that).
Runs loaded from disk report ``inactive`` until a ``continue`` or ``session`` revives them.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import PluginSpec, RunConfig
from ..errors import ApiError, SimloopError
from ..run import DialogueSpec, Recorder, new_manifest, read_manifest
from ..schema import PluginRef, RunManifest, Scenario
from ..text import count_wordpunct
from .protocol import (
    AssistantResponse,
    Budget,
    BudgetLeft,
    DumpMetadata,
    DumpRecord,
    DumpRow,
    Remaining,
    RunMeta,
    RunStatus,
    UserTopic,
    UserUtterance,
    dump_record,
    stop_meta,
)
from .sessions import Dialogues, Session
from .store import HostedRun, Mode, Store

__all__ = ["ServeLimits", "RunService"]

T = TypeVar("T")


@dataclass(frozen=True)
class ServeLimits:
    max_response_tokens: int = 250  # the organisers' limit (spaCy tokens; ours count at least as many)
    max_response_chars: int | None = None
    run_budget: int = 100  # runs per team (the organisers' config value)
    debug_budget: int = 100  # debug sessions per team


@dataclass
class Live:
    run: HostedRun
    session: Session | None = None
    recorder: Recorder | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    active: bool = False  # touched since this process started
    finished_here: bool = False  # completed in this process (→ 400, not 428)


def _dir_name(prefix: str, run_id: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:80].lstrip("._-") or "run"
    if safe != run_id:  # keep distinct ids distinct after cleaning
        safe += "-" + hashlib.sha256(run_id.encode()).hexdigest()[:6]
    return f"{prefix}{safe}"


class RunService:
    def __init__(self, cfg: RunConfig, sims: dict[Mode, tuple[PluginSpec, Dialogues]],
                 catalog: dict[tuple[str, str], Scenario], store: Store, limits: ServeLimits):
        self.cfg = cfg
        self.sims = sims
        self.catalog = catalog
        self.queue = list(catalog)
        self.store = store
        self.limits = limits
        self.runs: dict[tuple[str, str], Live] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> None:
        for run in self.store.load_runs():
            self.runs[(run.mode, run.run_id)] = Live(run)

    async def close(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for live in self.runs.values():
            if live.recorder is not None and not live.run.completed:  # completed ones are finished
                live.recorder.finish("interrupted", self._counts(live.run))

    # ------------------------------------------------------------------ endpoints
    async def start(self, team: str, mode: Mode, meta: RunMeta) -> UserUtterance:
        if not meta.run_id.strip():
            raise ApiError(400, "Run name cannot be empty. Please provide a meaningful name.")
        if not meta.description.strip():
            raise ApiError(400, "Run description cannot be empty. Please provide a meaningful description.")
        if meta.team_id is not None and meta.team_id != team:
            raise ApiError(403, f"Team name {meta.team_id} does not match token")
        if mode == "run" and self.runs_started(team) >= self.limits.run_budget:
            raise ApiError(403, "You exceeded the maximum number of runs you can submit.")
        if mode == "debug":
            await self._check_debug_budget(team)
        # From the id check to registering the run there is no await: two starts with the
        # same id cannot both pass.
        old = self.runs.get((mode, meta.run_id))
        # The debug API lets a team reuse the id of its own finished debug run.
        if old is not None and not (mode == "debug" and old.run.completed and old.run.team_id == team):
            raise ApiError(412, f'Active run with the name "{meta.run_id}" already exists '
                                "or a run with that name was already completed before.")
        run = HostedRun(mode=mode, run_id=meta.run_id, team_id=team, description=meta.description,
                        track_persona=meta.tracks_persona(), extra=meta.extra or {}, queue=self.queue,
                        run_dir=self._free_dir(mode, meta.run_id))
        live = Live(run, active=True)
        self.runs[(mode, run.run_id)] = live
        async with live.lock:
            try:
                live.recorder = await asyncio.to_thread(Recorder.create, self.cfg.out, self._manifest(run))
            except BaseException:
                self._unregister(mode, run.run_id, old)
                raise
            return await self._shielded(self._open_next(live, first=True, replace=old is not None))

    def _unregister(self, mode: Mode, run_id: str, old: Live | None) -> None:
        if old is None:
            del self.runs[(mode, run_id)]
        else:
            self.runs[(mode, run_id)] = old

    async def continue_(self, team: str, mode: Mode, body: AssistantResponse) -> UserUtterance:
        self._check_length(body.response or "")
        try:
            body.simloop_meta()
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        live = await self._revive(team, mode, body.run_id)
        async with live.lock:
            if live.run.completed:
                if live.finished_here:
                    raise ApiError(400, f'No more open topics for run "{body.run_id}". Run was finished!')
                raise ApiError(428, f'Run with the name "{body.run_id}" does not exist or was completed.')
            if live.session is not None and live.session.ended:  # the reply is ignored
                if mode == "debug":  # a session in progress may finish; a new one needs budget
                    await self._check_debug_budget(team)
                return await self._shielded(self._open_next(live, first=False))
            return await self._shielded(self._answer(live, body))

    async def session(self, team: str, mode: Mode, run_id: str) -> UserUtterance:
        live = await self._revive(team, mode, run_id)
        async with live.lock:  # a step still running (its client gone) finishes first
            if live.run.completed or live.session is None:
                raise ApiError(428, f'Run with the name "{run_id}" does not exist or was completed.')
            return self._utterance(live, final=False)

    def status(self, team: str, mode: Mode, run_id: str) -> RunStatus:
        live = self._visible(team, mode, run_id)
        run = live.run
        done_n = run.position + (1 if run.completed or self._session_ended(live) else 0)
        done, open_ = run.queue[:done_n], run.queue[done_n:]
        return RunStatus(
            run_id=run.run_id,
            status="complete" if run.completed else ("active" if live.active else "inactive"),
            open_topics=[t for _, t in open_],
            done_topics=[t for _, t in done],
            open_user_topic_pairs=[UserTopic(user_id=u, topic_id=t) for u, t in open_],
            done_user_topic_pairs=[UserTopic(user_id=u, topic_id=t) for u, t in done],
        )

    async def dump(self, team: str, mode: Mode, run_id: str) -> list[dict[str, Any]]:
        """The run's dump records as stored."""
        self._visible(team, mode, run_id)
        return await asyncio.to_thread(self.store.records, mode, run_id)

    async def budget(self, team: str) -> Budget:
        runs = self.runs_started(team)
        sessions = await asyncio.to_thread(self.store.sessions_opened, team, "debug")
        return Budget(remaining=BudgetLeft(
            debug=Remaining(remaining=max(0, self.limits.debug_budget - sessions), unit="sessions"),
            run=Remaining(remaining=max(0, self.limits.run_budget - runs), unit="runs"),
        ))

    # ------------------------------------------------------------------ checks
    def _check_length(self, response: str) -> None:
        n = count_wordpunct(response)
        if n > self.limits.max_response_tokens:
            raise ApiError(422, f"Response is too long ({n} tokens). Response exceeds limit of "
                                f"{self.limits.max_response_tokens} tokens.")
        chars = self.limits.max_response_chars
        if chars is not None and len(response) > chars:
            raise ApiError(422, f"Response is too long ({len(response)} characters). "
                                f"Response exceeds limit of {chars} characters.")

    async def _check_debug_budget(self, team: str) -> None:
        used = await asyncio.to_thread(self.store.sessions_opened, team, "debug")
        if used >= self.limits.debug_budget:
            raise ApiError(403, "You exceeded the maximum number of requests you can submit.")

    def runs_started(self, team: str) -> int:
        return sum(1 for live in self.runs.values() if live.run.mode == "run" and live.run.team_id == team)

    def _visible(self, team: str, mode: Mode, run_id: str) -> Live:
        live = self.runs.get((mode, run_id))
        if live is None or live.run.team_id != team:  # another team's run does not exist for you
            raise ApiError(404, f'Run "{run_id}" does not exist.')
        return live

    def _session_ended(self, live: Live) -> bool:
        if live.session is not None:
            return live.session.ended
        return live.run.session is not None and live.run.session.ended

    # ------------------------------------------------------------------ steps
    async def _shielded(self, coro: Coroutine[Any, Any, T]) -> T:
        # A client that hangs up mid-step must not leave half a step behind: the step
        # finishes and is saved, and /run/session shows its result.
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await asyncio.shield(task)

    async def _open_next(self, live: Live, first: bool, replace: bool = False) -> UserUtterance:
        run = live.run
        if not first:
            run.position += 1
        scenario = self._scenario(run, run.position)
        session, rows = await self.sims[run.mode][1].open(scenario, self._spec(run))
        live.session = session
        return await self._commit(live, rows, opened=1, replace=replace)

    async def _answer(self, live: Live, body: AssistantResponse) -> UserUtterance:
        assert live.session is not None
        rows = await self.sims[live.run.mode][1].answer(live.session, body)
        return await self._commit(live, rows, opened=0)

    async def _commit(self, live: Live, rows: list[DumpRow], opened: int, replace: bool = False) -> UserUtterance:
        """Save the step (state + dump records in one transaction), then write the
        transcript if the session ended: a crash in between is repaired on revival."""
        run, session = live.run, live.session
        assert session is not None
        ended = session.ended
        if ended and run.position >= len(run.queue) - 1:
            run.completed = live.finished_here = True
        records = self._records(run, session, rows)
        run.session = session.dump()
        if ended:
            self._count(run, session)
        await asyncio.to_thread(self.store.save, run, records, replace, opened if run.mode == "debug" else 0)
        if ended:
            await self._write_transcript(live)
        return self._utterance(live, final=True)

    def _records(self, run: HostedRun, session: Session, rows: list[DumpRow]) -> list[tuple[int, DumpRecord]]:
        key = f"{session.info.persona_id}\x1f{session.info.topic_id}"
        out = []
        for row in rows:
            run.seq += 1
            run.numbering[key] = run.numbering.get(key, 0) + 1
            meta = DumpMetadata(team_id=run.team_id, run_id=run.run_id, description=run.description,
                                track_persona=run.track_persona, user_id=session.info.persona_id,
                                topic_id=f"{session.info.topic_id}_{run.numbering[key]}")
            out.append((run.seq, dump_record(meta, row)))
        return out

    def _count(self, run: HostedRun, session: Session) -> None:
        c = Counter(run.counts)
        c["dialogues"] += 1
        c["turns"] += len(session.dialogue.state.turns)
        c["errors"] += session.dialogue.error is not None
        if session.dialogue.stop is not None:
            c[f"stop.{session.dialogue.stop.reason}"] += 1
        run.counts = dict(c)

    def _counts(self, run: HostedRun) -> dict[str, int]:
        return {**run.counts, "scenarios": len(run.queue)}

    async def _write_transcript(self, live: Live) -> None:
        run, session, rec = live.run, live.session, live.recorder
        assert session is not None and rec is not None
        await rec.append(session.dialogue.transcript())
        rec.manifest.counts = self._counts(run)
        if run.completed:
            await asyncio.to_thread(rec.finish, "finished", self._counts(run))
        else:
            await asyncio.to_thread(rec.write_manifest)

    def _utterance(self, live: Live, final: bool) -> UserUtterance:
        """``final``: the reply to start/continue (flags set); False for /run/session."""
        session = live.session
        assert session is not None
        info = session.info
        last_session = final and session.ended
        # Why it ended goes with /session's reply too (flags cleared): a resuming team records it.
        stop = session.dialogue.stop if session.ended else None
        return UserUtterance(
            timestamp=session.asked_at.isoformat(), run_id=live.run.run_id, topic_id=info.topic_id,
            user_id=info.persona_id, utterance=session.utterance, history=session.history(),
            last_response_of_session=last_session, last_response_of_run=last_session and live.run.completed,
            user_meta={"ptkb": list(session.dialogue.state.ptkb),
                       **(stop_meta(stop.reason, stop.detail) if stop is not None else {})},
        )

    # ------------------------------------------------------------------ revival
    async def _revive(self, team: str, mode: Mode, run_id: str) -> Live:
        live = self.runs.get((mode, run_id))
        if live is None:
            raise ApiError(428, f'Run with the name "{run_id}" does not exist or was completed.')
        if live.run.team_id != team:
            raise ApiError(403, f'Run with the name "{run_id}" does not belong to team "{team}".')
        if live.active:
            return live
        async with live.lock:
            if not live.active and not live.run.completed:
                try:
                    await self._restore(live)
                except ApiError:
                    raise
                except SimloopError as exc:  # e.g. its run directory was removed
                    raise ApiError(500, f'cannot restore run "{run_id}": {exc}') from None
                live.active = True
        return live

    async def _restore(self, live: Live) -> None:
        """Reload the session and reopen the run directory after a restart, writing the
        transcript of a session that ended just before the process died."""
        run = live.run
        if run.session is not None:
            live.session = self.sims[run.mode][1].load(run.session, self._scenario(run, run.position), self._spec(run))
        run_dir = self.cfg.out / run.run_dir
        expected = (await asyncio.to_thread(read_manifest, run_dir)).config_hash
        live.recorder, done, _ = await asyncio.to_thread(Recorder.resume, run_dir, expected)
        if live.session is not None and live.session.ended and live.session.dialogue.state.dialogue_id not in done:
            await self._write_transcript(live)

    def _scenario(self, run: HostedRun, position: int) -> Scenario:
        pair = tuple(run.queue[position])
        scenario = self.catalog.get(pair)  # type: ignore[arg-type]
        if scenario is None:
            raise ApiError(500, f"topic {pair[1]!r} of user {pair[0]!r} is no longer served; "
                                "restart the server with the topics the run started with")
        return scenario

    # ------------------------------------------------------------------ run directories
    def _free_dir(self, mode: Mode, run_id: str) -> str:
        base = _dir_name("serve-" if mode == "run" else "serve-debug-", run_id)
        taken = {live.run.run_dir for live in self.runs.values()}
        name, n = base, 1
        while name in taken or (self.cfg.out / name).exists():
            n += 1
            name = f"{base}-{n}"
        return name

    def _assistant_ref(self, run: HostedRun) -> PluginRef:
        return PluginRef(name=f"remote:{run.team_id}", params={
            "api": run.mode, "run_id": run.run_id, "description": run.description,
            "track_persona": run.track_persona, **({"extra": run.extra} if run.extra else {})})

    def _spec(self, run: HostedRun) -> DialogueSpec:
        """Who takes part in the run's dialogues, as its transcripts name them."""
        return DialogueSpec(run_id=run.run_dir, simulator=self.sims[run.mode][1].ref,
                            assistant=self._assistant_ref(run), max_turns=self.cfg.max_turns,
                            timeout_s=self.cfg.dialogue_timeout_s)

    def _manifest(self, run: HostedRun) -> RunManifest:
        spec = self.sims[run.mode][0]
        ref = self._assistant_ref(run)
        cfg = self.cfg.model_copy(update={"run_id": run.run_dir, "simulator": spec,
                                          "assistant": PluginSpec(name=ref.name, params=ref.params)})
        return new_manifest(
            run.run_dir, cfg, simulator=self.sims[run.mode][1].ref, assistant=ref, scenarios=len(run.queue),
            simapi={"api": run.mode, "run_id": run.run_id, "team_id": run.team_id, "description": run.description,
                    "track_persona": run.track_persona, "extra": run.extra,
                    "queue": [{"user_id": u, "topic_id": t} for u, t in run.queue]},
        )

