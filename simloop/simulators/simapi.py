"""simapi: the user is a remote Sim.API server, the organisers' or `simloop serve` (DESIGN §5).

`simloop rehearse` is the engine with this simulator: every server session is one
dialogue, recorded like any other, whose assistant is a local simloop assistant.

* The server owns the order of the conversations, so this simulator brings its own
  scenarios: one *lane* per Sim.API run (``lanes(done)``; ``runs`` > 1 starts ``<run_id>-1``
  ... ``-N``, each counting against the team's run budget).  A lane yields a session's
  scenario when the server names its user and topic, and asks for the next session only
  after the engine has recorded the dialogue.
* ``open`` says the utterance the server sent; ``next`` posts the assistant's reply
  (cut to ``max_response_tokens``) and returns the next utterance, or the end: the
  utterance marked ``last_response_of_session`` is the closing line.  A simloop server says
  why the session ended (``user_meta.simloop.stop``): the stop records its reason, the
  detail names the server.  The official Sim.API does not say, so the stop is then
  ``user_satisfied`` and its detail says that the reason is unknown.  The server's time is
  a ``simapi.continue`` stage on the turn it judged.
* When a dialogue ends here first (the assistant failed, max_turns, a timeout) the server
  still waits for replies: the lane answers with an apology until the session ends
  (``abandoned`` in the lane's result) and goes on with the next topic.
* PTKB comes from ``user_meta.ptkb`` (2026); a server without it needs ``--personas`` or
  ``--topics`` (the run config's scenarios), else a placeholder statement stands in.

Crash safety: after every utterance received, a state file (``<state_dir>/<run_id>.json``,
no token in it) records the utterance with its flags and the dialogue so far.  A restarted
rehearsal asks ``/session`` where each run stands; the server's answer wins, the file
only restores what the server does not repeat (whether that utterance ended its session,
the turns' provenance and the assistant's memory).  A reply lost on the way back is
recovered the same way, and sent again only if the server never got it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from ..errors import BadInputError, SimApiError, SimloopError
from ..files import pack_memory, unpack_memory
from ..parts import stage_note
from ..run import Context
from ..schema import (
    AssistantReply,
    AssistantTurn,
    Behaviour,
    DialogueState,
    Persona,
    RubricQuestion,
    Scenario,
    SimulatorTurn,
    Stage,
    Topic,
    Turn,
    UserTurn,
)
from ..simapi import SimApiClient, StateFile, UserUtterance, reply_payload
from ..text import count_wordpunct, truncate_wordpunct
from ..urls import TOKEN_ENV_GOES, check_url

__all__ = ["SimApiSimulator", "LaneResult", "NO_PTKB", "DEFAULT_TOKEN_ENV", "API_SCHEMES"]

log = logging.getLogger(__name__)

DEFAULT_TOKEN_ENV = "SIMAPI_TOKEN"
API_SCHEMES = ("http://", "https://")
NO_PTKB = "(the server gave no PTKB statements)"  # Persona needs one; never reported as provenance
_HIDDEN = RubricQuestion(id="hidden", question="")  # Topic needs one; the server keeps the rubric
_SORRY = "Sorry, I cannot answer that."
_MAX_APOLOGIES = 100  # a server that never ends a session must not keep a lane forever
ENDED = "the Sim.API server ended the session (it does not say why; recorded as user_satisfied)"


# ---------------------------------------------------------------------- what the wire says
@dataclass
class LaneResult:
    """What one Sim.API run did in this invocation."""

    run_id: str
    status: str = "incomplete"  # completed | incomplete (stopped by ``limit`` or an interrupt)
    sessions: int = 0
    turns: int = 0
    truncated: int = 0
    abandoned: int = 0  # sessions that ended here first and were answered with apologies
    resumed: int = 0
    server_s: float = 0.0  # time waiting for /continue (the simulator's turn)


def ends_session(utt: UserUtterance) -> bool:
    return utt.last_response_of_session or utt.last_response_of_run


def server_end(utt: UserUtterance, **kw: Any) -> SimulatorTurn:
    """The stop for a session the server ended: its reason when it says one (a simloop
    server), else ``user_satisfied`` with a detail saying the server gave no reason."""
    told = utt.server_stop()
    if told is None:
        return SimulatorTurn.stop("user_satisfied", ENDED, utterance=utt.utterance, **kw)
    reason, detail = told[0], f"the Sim.API server ended the session: {told[1] or told[0]}"
    return SimulatorTurn.stop(reason, detail, utterance=utt.utterance, **kw)


def same_point(a: UserUtterance, b: UserUtterance) -> bool:
    """The same point of the same conversation (the server did not move on)."""
    return (a.user_id, a.topic_id, a.utterance, len(a.history)) == (b.user_id, b.topic_id, b.utterance, len(b.history))


def sync_turns(turns: list[Turn], history: list[dict[str, str]],
               sent: Callable[[str], str] = lambda response: response) -> tuple[list[Turn], bool]:
    """The finished turns as the server's ``history`` has them: local turns (with their
    provenance) as far as they agree with it, the rest rebuilt from the text alone.
    ``sent`` maps a local response to what the server got (cut to its token limit), so a
    cut reply still counts as agreeing.  Returns the turns and whether the local ones
    were all kept."""
    pairs = [(history[i]["content"], history[i + 1]["content"]) for i in range(0, len(history) - 1, 2)]
    kept = 0
    while kept < min(len(turns), len(pairs)) and (
            turns[kept].user.utterance, sent(turns[kept].assistant.response)) == pairs[kept]:
        kept += 1
    rebuilt = [Turn(index=i, user=UserTurn(utterance=u), assistant=AssistantTurn(response=a))
               for i, (u, a) in enumerate(pairs[kept:], start=kept + 1)]
    return [*turns[:kept], *rebuilt], kept == len(turns)


def run_over(before: UserUtterance | None) -> UserUtterance:
    """The last utterance of a run whose final reply the server got but whose answer was lost."""
    base = before.model_dump() if before else {"timestamp": "", "run_id": "", "topic_id": "", "user_id": "",
                                                "history": []}
    return UserUtterance.model_validate({**base, "utterance": "", "last_response_of_session": True,
                                         "last_response_of_run": True})


class _Lane:
    """One Sim.API run, from start (or resume) to its last utterance or ``limit``."""

    def __init__(self, sim: SimApiSimulator, run_id: str):
        self.sim, self.run_id = sim, run_id
        self.file = StateFile(sim.state_dir / f"{run_id}.json")
        self.result = LaneResult(run_id)
        self.last: UserUtterance | None = None  # the server's latest utterance
        self.saved: dict[str, Any] | None = None  # the dialogue in the state file, until restored

    @property
    def client(self) -> SimApiClient:
        return self.sim.client

    def latest(self) -> UserUtterance:
        """The server's latest utterance: there is one from the lane's start on."""
        if self.last is None:
            raise RuntimeError(f"{self.run_id}: the Sim.API lane has no utterance yet")
        return self.last

    # ------------------------------------------------------------------ scenarios
    async def scenarios(self, done: set[str]) -> AsyncIterator[Scenario]:
        utt = await self._begin()
        while utt is not None:
            scenario = self.sim.scenario(self.run_id, utt)
            worked = False  # a session of this invocation (counted, and against ``limit``)
            if scenario.dialogue_id not in done and (not ends_session(utt) or self._restorable(utt)):
                self.sim.lane_of[scenario.dialogue_id] = self
                yield scenario  # the engine runs and records the dialogue, then asks again
                done.add(scenario.dialogue_id)
                utt, worked = self.latest(), True
            if not ends_session(utt):
                utt, worked = await self._abandon(utt), True
            # A resumed lane can start on a session an earlier invocation recorded and ended:
            # it only asks for the next topic, so it is not one of this invocation's sessions.
            self.result.sessions += worked
            if utt.last_response_of_run:
                await self._completed()
                return
            if self.sim.limit is not None and self.result.sessions >= self.sim.limit:
                return
            utt = await self.post(reply_payload(self.run_id, None, extension=self.client.simloop_server))
            await self.save(utt, None)

    def _restorable(self, utt: UserUtterance) -> bool:
        """A session whose closing line arrived before a crash, its dialogue not recorded."""
        saved = self.saved or {}
        return (saved.get("user_id"), saved.get("topic_id")) == (utt.user_id, utt.topic_id) and bool(saved.get("turns"))

    async def _abandon(self, utt: UserUtterance) -> UserUtterance:
        self.result.abandoned += 1
        for _ in range(_MAX_APOLOGIES):
            if ends_session(utt):
                return utt
            payload = reply_payload(self.run_id, AssistantReply(response=_SORRY), extension=False)
            utt = await self.post(payload)
            await self.save(utt, None)
        raise SimloopError(f"{self.run_id}: the server did not end the session after {_MAX_APOLOGIES} replies")

    # ------------------------------------------------------------------ begin / resume
    async def _begin(self) -> UserUtterance | None:
        await self.sim.ready()
        saved = self.file.load()
        if saved is not None and saved.get("completed"):
            self.result.status = "completed"
            return None
        self.saved = (saved or {}).get("dialogue")
        if saved is None:
            try:
                self.last = await self.client.start(self.run_id, self.sim.description, self.sim.track_persona)
                await self.save(self.last, None)
                return self.last
            except SimApiError as exc:
                if exc.status != 412:  # 412: the run exists on the server; pick it up
                    raise
        known = UserUtterance.model_validate(saved["last"]) if saved and saved.get("last") else None
        self.last = await self._resume(known)
        if self.last is None:
            await self._completed()
        return self.last

    async def _resume(self, known: UserUtterance | None) -> UserUtterance | None:
        """Where the run stands on the server; None when it is complete."""
        self.result.resumed += 1
        status = await self.client.status(self.run_id)
        if status is not None and status.get("status") in ("complete", "completed"):
            return None
        try:
            utt = await self.client.session(self.run_id)
        except SimApiError as exc:
            if exc.status != 428:
                raise
            # 428: unknown or completed.  Where /status exists, it said "not completed"
            # (or 404), so the run is unknown; the organisers' debug API has no /status.
            if status is None and self.client.has_status():
                raise SimloopError(f"run {self.run_id!r} is unknown to {self.client.base}; "
                                   f"delete {self.file.path} to start it anew") from None
            return None
        if known is not None and same_point(known, utt):  # /session clears the flags; we still know them
            utt.last_response_of_session = known.last_response_of_session
            utt.last_response_of_run = known.last_response_of_run
        elif status is not None:  # the server's status says whether this session is over
            pair = {"user_id": utt.user_id, "topic_id": utt.topic_id}
            utt.last_response_of_session = pair in status.get("done_user_topic_pairs", [])
        return utt

    async def _completed(self) -> None:
        self.result.status = "completed"
        await self.file_write(None, None, completed=True)

    # ------------------------------------------------------------------ the wire
    async def post(self, payload: dict[str, Any]) -> UserUtterance:
        """``/continue``; a lost reply is recovered through ``/session`` (resent only if the
        server never got it), up to ``resume_attempts`` times."""
        before = self.last
        for attempt in range(1, self.sim.resume_attempts + 2):
            t0 = time.perf_counter()
            try:
                self.last = await self.client.continue_(payload)
                self.result.server_s += time.perf_counter() - t0
                return self.last
            except (httpx.TransportError, SimApiError) as exc:
                if (isinstance(exc, SimApiError) and exc.status < 500) or attempt > self.sim.resume_attempts:
                    raise
                log.warning("%s: continue failed (%s); asking /session where the run stands", self.run_id, exc)
                await asyncio.sleep(min(8.0, 0.5 * 2**attempt))
                now = await self._resume(before)
                if now is None:  # the server got the reply that ended the run
                    self.last = run_over(before)
                    return self.last
                if before is None or not same_point(before, now):  # the server got it and moved on
                    self.last = now
                    return now
        raise AssertionError("unreachable")

    async def save(self, utt: UserUtterance | None, state: DialogueState | None) -> None:
        dialogue = None
        if state is not None and utt is not None:
            dialogue = {"user_id": utt.user_id, "topic_id": utt.topic_id,
                        "turns": [t.model_dump(mode="json", exclude_none=True) for t in state.turns],
                        "memory": pack_memory(state.assistant_memory)}
        await self.file_write(utt, dialogue)

    async def file_write(self, utt: UserUtterance | None, dialogue: dict | None, completed: bool = False) -> None:
        data = {"api": self.client.api, "run_id": self.run_id, "completed": completed,
                "saved_at": datetime.now(UTC).isoformat(),
                "last": utt.model_dump(mode="json") if utt else None, "dialogue": dialogue}
        await asyncio.to_thread(self.file.write, data)

    def restore(self, state: DialogueState, utt: UserUtterance) -> None:
        """Turns and assistant memory from before a crash, as far as the server agrees."""
        saved, self.saved = self.saved, None
        mine = saved if saved and (saved.get("user_id"), saved.get("topic_id")) == (utt.user_id, utt.topic_id) else {}
        turns = [Turn.model_validate(t) for t in mine.get("turns", [])]
        answered = (len(utt.history) - 1) // 2
        state.turns, intact = sync_turns(turns, utt.history[: 2 * answered], self.sim.sent_response)
        if intact and mine:  # memory of turns the server does not have would mislead
            state.assistant_memory = unpack_memory(mine.get("memory"))


class SimApiSimulator:
    """A remote Sim.API server as the user; see the module docstring."""

    # What `run --simulator simapi` without its parameters says (run/plugins.py check_params).
    HOW_TO_RUN = ("it is what `simloop rehearse --api URL --token-env VAR --assistant NAME` runs "
                  "against a Sim.API server: use that command")

    def __init__(self, ctx: Context, api: str, run_id: str | None = None, token_env: str = DEFAULT_TOKEN_ENV,
                 description: str = "simloop rehearsal", debug: bool = False, track_persona: bool = False,
                 runs: int = 1, limit: int | None = None, state_dir: str | None = None,
                 max_response_tokens: int = 250, timeout_s: float = 600.0, resume_attempts: int = 5):
        check_url(api, TOKEN_ENV_GOES, "api")  # the run records its params in run.json
        if not api.startswith(API_SCHEMES):
            raise ValueError("api must start with http:// or https://")
        if runs < 1 or (limit is not None and limit < 1) or max_response_tokens < 1 or timeout_s <= 0:
            raise ValueError("need runs >= 1, limit >= 1, max_response_tokens >= 1 and timeout_s > 0")
        self.ctx, self.api, self.token_env, self.description = ctx, api, token_env, description
        self.debug, self.track_persona, self.runs, self.limit = debug, track_persona, runs, limit
        self.max_response_tokens, self.timeout_s, self.resume_attempts = max_response_tokens, timeout_s, resume_attempts
        self.run_id = run_id or "rehearse-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        out = getattr(getattr(ctx, "config", None), "out", Path("transcripts"))
        self.state_dir = Path(state_dir) if state_dir else Path(out) / ".rehearse"
        self._client: SimApiClient | None = None
        self._ready = asyncio.Lock()
        self._known = self._load_known()  # read now: a bad topic file is bad input, found before any write
        self.lane_of: dict[str, _Lane] = {}
        ids = [self.run_id] if runs == 1 else [f"{self.run_id}-{i}" for i in range(1, runs + 1)]
        self._lanes = [_Lane(self, rid) for rid in ids]

    @property
    def params(self) -> dict[str, Any]:
        """The effective parameters (the run id and state folder as resolved; never the token)."""
        return {"api": self.api, "run_id": self.run_id, "token_env": self.token_env,
                "description": self.description, "debug": self.debug, "track_persona": self.track_persona,
                "runs": self.runs, "limit": self.limit, "state_dir": str(self.state_dir),
                "max_response_tokens": self.max_response_tokens, "timeout_s": self.timeout_s,
                "resume_attempts": self.resume_attempts}

    @property
    def client(self) -> SimApiClient:
        if self._client is None:
            raise RuntimeError("SimApiSimulator.ready() was not awaited")
        return self._client

    def results(self) -> list[LaneResult]:
        return [lane.result for lane in self._lanes]

    # ------------------------------------------------------------------ run lifecycle
    async def ready(self) -> None:
        """One client for the run, made on the run's loop; the token is checked once."""
        async with self._ready:
            if self._client is not None:
                return
            secret = getattr(self.ctx, "secret", None)
            token = secret(self.token_env) if secret else None
            if not token:
                raise BadInputError(f"no Sim.API token: set the environment variable {self.token_env}")
            transport = (getattr(self.ctx, "overrides", None) or {}).get("simapi.transport")  # a test seam
            client = SimApiClient(self.api, token, debug=self.debug, timeout_s=self.timeout_s, transport=transport)
            try:
                await client.verify()
            except BaseException:
                await client.aclose()
                raise
            self._client = client

    def lanes(self, done: set[str]) -> list[AsyncIterator[Scenario]]:
        return [lane.scenarios(done) for lane in self._lanes]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def sent_response(self, response: str) -> str:
        """The reply as the server gets it: cut to ``max_response_tokens``."""
        if count_wordpunct(response) <= self.max_response_tokens:
            return response
        return truncate_wordpunct(response, self.max_response_tokens)

    # ------------------------------------------------------------------ the protocol
    async def open(self, state: DialogueState) -> SimulatorTurn:
        lane = self.lane_of[state.dialogue_id]
        utt = lane.latest()
        lane.restore(state, utt)
        if ends_session(utt):  # the closing line came before a crash: record the dialogue now
            return server_end(utt)
        return SimulatorTurn.say(utt.utterance)

    async def next(self, state: DialogueState) -> SimulatorTurn:
        lane = self.lane_of[state.dialogue_id]
        turn = state.turns[-1]
        response = self.sent_response(turn.assistant.response)
        cut = response != turn.assistant.response
        if cut:
            lane.result.truncated += 1
        reply = AssistantReply(
            response=response, rewritten_query=turn.assistant.rewritten_query, passages=turn.assistant.passages,
            ptkb_provenance=[u for u in turn.assistant.ptkb_provenance if u.statement != NO_PTKB],
            context=turn.assistant.context, stages=turn.stages)
        await lane.save(lane.last, state)  # a crash during the post still finds this turn's provenance
        t0 = time.perf_counter()
        utt = await lane.post(reply_payload(lane.run_id, reply, extension=self.client.simloop_server))
        stage = Stage(name="simapi.continue", latency_ms=round((time.perf_counter() - t0) * 1000, 3))
        if cut:
            stage = stage_note(stage, f"response cut to {self.max_response_tokens} tokens for the server")
        lane.result.turns += 1
        await lane.save(utt, state)
        if ends_session(utt):
            return server_end(utt, grade_stages=[stage])
        return SimulatorTurn.say(utt.utterance, grade_stages=[stage])

    # ------------------------------------------------------------------ scenarios
    def scenario(self, run_id: str, utt: UserUtterance) -> Scenario:
        known = self._known
        persona = known.get(utt.user_id) or known.get(f"topic:{utt.topic_id}")
        ptkb = utt.ptkb() or (list(persona.ptkb) if persona else []) or [NO_PTKB]
        title = next((t.title for t in (persona.topics if persona else []) if t.id == utt.topic_id), utt.topic_id)
        seed = int.from_bytes(hashlib.blake2b(f"{run_id}|{utt.user_id}|{utt.topic_id}".encode(),
                                              digest_size=4).digest(), "little")
        return Scenario(dialogue_id=f"{run_id}--{utt.user_id}--{utt.topic_id}",
                        persona=Persona(id=utt.user_id or "user", ptkb=ptkb),
                        topic=Topic(id=utt.topic_id or "topic", title=title or "topic", rubric=[_HIDDEN]),
                        behaviour=persona.behaviour.sample(seed) if persona else Behaviour(), seed=seed)

    def _load_known(self) -> dict[str, Persona]:
        """PTKB and titles by user id and by ``topic:<id>``, for servers without ``user_meta``:
        from the run config's personas folder or iKAT topic file, when there is one."""
        known: dict[str, Persona] = {}
        sel = getattr(getattr(self.ctx, "config", None), "scenarios", None)
        if sel is not None and (sel.topics is not None or Path(sel.personas_dir).is_dir()):
            from ..inputs import load_ikat_topics, load_personas

            personas = load_ikat_topics(sel.topics) if sel.topics is not None else load_personas(sel.personas_dir)
            for persona in personas:
                known[persona.id] = persona
                for topic in persona.topics:
                    known.setdefault(f"topic:{topic.id}", persona)
        return known
