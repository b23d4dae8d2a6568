"""`simloop rehearse`: drive a simloop assistant against a Sim.API server.

The server owns the conversation: it opens each topic's session, the assistant answers
every user utterance, and the loop goes on until the server marks the run's last
utterance.  The assistant sees an ordinary ``DialogueState`` built from what the server
sends (``user_meta.ptkb`` in 2026; ``--personas`` / ``--topics`` supply the PTKB when the
server does not).

Crash safety: after every utterance received, a state file (``<state-dir>/<run_id>.json``,
no token in it) records the utterance with its flags and the dialogue so far.  A restarted
``rehearse`` with the same ``--run-id`` asks ``/run/session`` where the run stands; the
server's answer wins, the file only restores what the server does not repeat (whether
that utterance ended its session, the assistant's memory and provenance).

``--concurrency N`` runs N independent runs (``<run-id>-1`` ... ``-N``) at once: a Sim.API
run is sequential by design, so N runs are the only way to load a server N-fold.  Each
counts against the team's run budget.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx

from ..errors import BadInputError, SimloopError
from .client import SimApiClient, SimApiError, StateFile
from ..schema import (AssistantReply, AssistantTurn, Behaviour, DialogueState, Persona, RubricQuestion,
                     Scenario, Topic, Turn, UserTurn)
from .protocol import UserUtterance, count_tokens, pack_memory, reply_payload, truncate_tokens, unpack_memory

__all__ = ["RehearseOptions", "RunResult", "rehearse", "add_commands"]

log = logging.getLogger(__name__)

NO_PTKB = "(the server gave no PTKB statements)"  # Persona needs one; never reported as provenance
_HIDDEN = RubricQuestion(id="hidden", question="")  # Topic needs one; the server keeps the rubric


@dataclass
class RehearseOptions:
    run_id: str
    description: str = "simloop rehearsal"
    debug: bool = False
    track_persona: bool = False
    concurrency: int = 1
    limit: int | None = None  # sessions per run in this invocation
    state_dir: Path = Path("transcripts/.rehearse")
    max_response_tokens: int = 250
    resume_attempts: int = 5


@dataclass
class RunResult:
    run_id: str
    status: str = "incomplete"  # completed | incomplete (limit reached)
    sessions: int = 0
    turns: int = 0
    truncated: int = 0
    assistant_errors: int = 0
    resumed: int = 0
    assistant_s: float = 0.0  # time in assistant.respond (the first call loads models)
    server_s: float = 0.0  # time waiting for /continue (the simulator's turn)


@dataclass
class Dialogue:
    """The assistant's view of the current session."""

    user_id: str
    topic_id: str
    state: DialogueState


def _scenario(run_id: str, utt: UserUtterance, known: dict[str, Any]) -> Scenario:
    persona = known.get(utt.user_id) or known.get(f"topic:{utt.topic_id}")
    ptkb = utt.ptkb() or (list(persona.ptkb) if persona else []) or [NO_PTKB]
    title = next((t.title for t in (persona.topics if persona else []) if t.id == utt.topic_id), utt.topic_id)
    seed = int.from_bytes(hashlib.blake2b(f"{run_id}|{utt.user_id}|{utt.topic_id}".encode(), digest_size=4).digest(), "little")
    p = Persona(id=utt.user_id or "user", ptkb=ptkb)
    topic = Topic(id=utt.topic_id or "topic", title=title, rubric=[_HIDDEN])
    return Scenario(dialogue_id=f"{run_id}--{utt.user_id}--{utt.topic_id}", persona=p, topic=topic,
                    behaviour=persona.behaviour if persona else Behaviour(), seed=seed)


def _sync_turns(turns: list[Turn], history: list[dict[str, str]]) -> tuple[list[Turn], bool]:
    """The finished turns as the server's ``history`` has them: local turns (with their
    provenance) as far as they agree with it, the rest rebuilt from the text alone.
    Returns the turns and whether the local ones were all kept."""
    pairs = [(history[i]["content"], history[i + 1]["content"]) for i in range(0, len(history) - 1, 2)]
    kept = 0
    while kept < min(len(turns), len(pairs)) and (turns[kept].user.utterance, turns[kept].assistant.response) == pairs[kept]:
        kept += 1
    rebuilt = [Turn(index=i, user=UserTurn(utterance=u), assistant=AssistantTurn(response=a))
               for i, (u, a) in enumerate(pairs[kept:], start=kept + 1)]
    return [*turns[:kept], *rebuilt], kept == len(turns)


class RunDriver:
    """One Sim.API run from start (or resume) to its last utterance or ``limit``."""

    def __init__(self, client: SimApiClient, assistant: Any, opts: RehearseOptions, run_id: str,
                 known: dict[str, Any]):
        self.client, self.assistant, self.opts, self.run_id, self.known = client, assistant, opts, run_id, known
        self.file = StateFile(Path(opts.state_dir) / f"{run_id}.json")
        self.result = RunResult(run_id)
        self.dialogue: Dialogue | None = None

    # ------------------------------------------------------------------ state file
    async def _save(self, utt: UserUtterance | None, completed: bool = False) -> None:
        d = self.dialogue
        data = {"api": "debug" if self.opts.debug else "run", "run_id": self.run_id, "completed": completed,
                "saved_at": datetime.now(timezone.utc).isoformat(),
                "last": utt.model_dump(mode="json") if utt else None,
                "dialogue": None if d is None else {
                    "user_id": d.user_id, "topic_id": d.topic_id,
                    "turns": [t.model_dump(mode="json", exclude_none=True) for t in d.state.turns],
                    "memory": pack_memory(d.state.assistant_memory)}}
        await asyncio.to_thread(self.file.write, data)

    # ------------------------------------------------------------------ begin / resume
    async def _begin(self) -> UserUtterance | None:
        saved = self.file.load()
        if saved is not None and saved.get("completed"):
            self.result.status = "completed"
            return None
        if saved is None:
            try:
                utt = await self.client.start(self.run_id, self.opts.description, self.opts.track_persona)
                await self._save(utt)
                return utt
            except SimApiError as exc:
                if exc.status != 412:  # 412: the run exists on the server; pick it up
                    raise
        return await self._resume(saved)

    async def _resume(self, saved: dict[str, Any] | None) -> UserUtterance | None:
        self.result.resumed += 1
        status = await self.client.status(self.run_id)
        if status is not None and status.get("status") in ("complete", "completed"):
            return await self._mark_completed()
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
            return await self._mark_completed()
        last = (saved or {}).get("last")
        if last and all(last.get(k) == getattr(utt, k) for k in ("topic_id", "user_id", "utterance")) \
                and len(last.get("history", [])) == len(utt.history):
            # /session clears the flags; the file still knows whether this one ended a session.
            utt.last_response_of_session = bool(last.get("last_response_of_session"))
            utt.last_response_of_run = bool(last.get("last_response_of_run"))
        self._restore_dialogue((saved or {}).get("dialogue"), utt)
        return utt

    async def _mark_completed(self) -> None:
        self.result.status = "completed"
        await self._save(None, completed=True)
        return None

    def _restore_dialogue(self, saved: dict[str, Any] | None, utt: UserUtterance) -> None:
        if not saved or (saved.get("user_id"), saved.get("topic_id")) != (utt.user_id, utt.topic_id):
            return
        d = self._new_dialogue(utt)
        d.state.turns = [Turn.model_validate(t) for t in saved.get("turns", [])]
        d.state.assistant_memory = unpack_memory(saved.get("memory"))

    # ------------------------------------------------------------------ the loop
    def _new_dialogue(self, utt: UserUtterance) -> Dialogue:
        scenario = _scenario(self.run_id, utt, self.known)
        state = DialogueState(dialogue_id=scenario.dialogue_id, scenario=scenario, max_turns=1000)
        self.dialogue = Dialogue(utt.user_id, utt.topic_id, state)
        return self.dialogue

    def _dialogue_for(self, utt: UserUtterance) -> Dialogue:
        d = self.dialogue
        if d is None or (d.user_id, d.topic_id) != (utt.user_id, utt.topic_id):
            d = self._new_dialogue(utt)
        done = (len(utt.history) - 1) // 2  # finished (user, assistant) pairs before this utterance
        if len(d.state.turns) != done:  # out of step (a crash): the server's history wins
            d.state.turns, intact = _sync_turns(d.state.turns, utt.history[: 2 * done])
            if not intact:  # memory of turns the server does not have would mislead
                d.state.assistant_memory = {}
        return d

    async def _respond(self, utt: UserUtterance) -> AssistantReply:
        d = self._dialogue_for(utt)
        d.state.user = UserTurn(utterance=utt.utterance)
        t0 = time.perf_counter()
        try:
            reply = await self.assistant.respond(d.state)
        except Exception as exc:  # the session cannot be ended from here: say so and go on
            log.warning("%s: assistant failed on %s: %s", self.run_id, d.state.dialogue_id, exc)
            self.result.assistant_errors += 1
            reply = AssistantReply(response="Sorry, I could not find an answer to that.")
        self.result.assistant_s += time.perf_counter() - t0
        if count_tokens(reply.response) > self.opts.max_response_tokens:
            reply.response = truncate_tokens(reply.response, self.opts.max_response_tokens)
            self.result.truncated += 1
        reply.ptkb_provenance = [u for u in reply.ptkb_provenance if u.statement != NO_PTKB]
        d.state.turns.append(Turn(index=len(d.state.turns) + 1, user=d.state.user, assistant=reply.to_turn(),
                                  stages=reply.stages, latency_ms=round((time.perf_counter() - t0) * 1000, 3)))
        d.state.user = None
        return reply

    async def run(self) -> RunResult:
        utt = await self._begin()
        attempts = 0
        while utt is not None:
            if utt.last_response_of_run:
                self.result.sessions += 1
                await self._mark_completed()
                break
            if utt.last_response_of_session:
                self.result.sessions += 1
                if self.opts.limit is not None and self.result.sessions >= self.opts.limit:
                    break
                payload = reply_payload(self.run_id, None, extension=self.client.simloop_server)
            else:
                reply = await self._respond(utt)
                payload = reply_payload(self.run_id, reply, extension=self.client.simloop_server)
                self.result.turns += 1
            t0 = time.perf_counter()
            try:
                utt = await self.client.continue_(payload)
                self.result.server_s += time.perf_counter() - t0
                attempts = 0
            except (httpx.TransportError, SimApiError) as exc:  # lost reply, restart: ask where the run stands
                if isinstance(exc, SimApiError) and exc.status < 500:
                    raise
                attempts += 1
                if attempts > self.opts.resume_attempts:
                    raise
                log.warning("%s: continue failed (%s); resuming via /session", self.run_id, exc)
                await asyncio.sleep(min(8.0, 0.5 * 2**attempts))
                utt = await self._resume(self.file.load())
                continue
            await self._save(utt)
        return self.result


async def rehearse(client: SimApiClient, assistant: Any, opts: RehearseOptions,
                   known: dict[str, Any] | None = None) -> list[RunResult]:
    """Run ``opts.concurrency`` runs against the server; the results in run-id order."""
    await client.verify()
    ids = [opts.run_id] if opts.concurrency == 1 else [f"{opts.run_id}-{i}" for i in range(1, opts.concurrency + 1)]
    drivers = [RunDriver(client, assistant, opts, rid, known or {}) for rid in ids]
    return list(await asyncio.gather(*(d.run() for d in drivers)))


# ----------------------------------------------------------------------------- CLI


def _known_personas(cfg: Any) -> dict[str, Any]:
    """PTKB and titles by user id and by ``topic:<id>``, for servers without ``user_meta``."""
    from ..run.scenarios import load_sources

    known: dict[str, Any] = {}
    for persona in load_sources(cfg):
        known[persona.id] = persona
        for topic in persona.topics:
            known.setdefault(f"topic:{topic.id}", persona)
    return known


def _config(a: argparse.Namespace):
    from ..config import load_config
    from ..cli.args import parse_params
    from .cli import TOKENS_ENV

    o: dict[str, Any] = {"assistant": {"name": a.assistant}}
    if a.assistant_param:
        o["assistant"]["params"] = parse_params(a.assistant_param, "--assistant-param")
    sel = {k: v for k, v in (("topics", a.topics), ("personas_dir", a.personas)) if v is not None}
    if sel:
        o["scenarios"] = sel
    retrieval = {k: v for k, v in (("index", a.index), ("k", a.k)) if v is not None}
    if retrieval:
        o["retrieval"] = retrieval
    if a.base_url or a.model:
        o["llm"] = {"default": {k: v for k, v in (("base_url", a.base_url), ("model", a.model)) if v}}
    environ = {k: v for k, v in os.environ.items() if k != TOKENS_ENV}
    return load_config(a.config, o, environ)


def _token(a: argparse.Namespace) -> str:
    if a.token_file is not None:
        try:
            token = a.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise BadInputError(f"{a.token_file}: cannot read token file ({exc.strerror})") from None
    else:
        token = (a.token or "").strip()
    if not token:
        raise BadInputError("give the team token with --token TOKEN or --token-file FILE")
    return token


def _print_summary(results: list[RunResult], wall_s: float) -> None:
    turns = sum(r.turns for r in results)
    for r in results:
        print(f"{r.run_id}: {r.status}, {r.sessions} sessions, {r.turns} turns"
              + (f", {r.truncated} responses truncated" if r.truncated else "")
              + (f", {r.assistant_errors} assistant errors" if r.assistant_errors else "")
              + (f", resumed {r.resumed}x" if r.resumed else ""), file=sys.stderr)
    rate = turns / wall_s if wall_s > 0 else 0.0
    print(f"{len(results)} run(s), {sum(r.sessions for r in results)} sessions, {turns} turns in "
          f"{wall_s:.1f} s ({rate:.2f} turns/s)", file=sys.stderr)
    if turns:
        per = lambda total: 1000 * total / turns  # noqa: E731
        print(f"per turn: assistant {per(sum(r.assistant_s for r in results)):.0f} ms "
              f"(the first call loads models), server {per(sum(r.server_s for r in results)):.0f} ms",
              file=sys.stderr)


def cmd_rehearse(a: argparse.Namespace) -> int:
    from ..run.plugins import Context, load_plugin

    if a.concurrency < 1 or (a.limit is not None and a.limit < 1):
        raise BadInputError("--concurrency and --limit must be at least 1")
    cfg = _config(a)
    known = _known_personas(cfg) if (a.topics or a.personas) else {}
    ctx = Context(cfg)
    assistant = load_plugin("assistant", cfg.assistant.name, cfg.assistant.params, ctx)
    run_id = a.run_id or "rehearse-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    opts = RehearseOptions(run_id=run_id, description=a.description or f"simloop rehearse: {cfg.assistant.name}",
                           debug=a.debug, track_persona=a.track_persona, concurrency=a.concurrency,
                           limit=a.limit, state_dir=a.state_dir, max_response_tokens=a.max_response_tokens)
    if a.concurrency > 1:
        print(f"simloop rehearse: {a.concurrency} parallel runs; each counts against the run budget",
              file=sys.stderr)

    async def main() -> list[RunResult]:
        client = SimApiClient(a.api, _token(a), debug=a.debug, timeout_s=a.timeout)
        try:
            return await rehearse(client, assistant, opts, known)
        except httpx.TransportError as exc:
            raise SimloopError(f"cannot reach {a.api}: {exc}") from None
        finally:
            await client.aclose()
            await ctx.aclose()

    t0 = time.perf_counter()
    results = asyncio.run(main())
    _print_summary(results, time.perf_counter() - t0)
    for r in results:
        print(r.run_id)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearse", help="drive an assistant against a Sim.API server (ours or the official one)")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file (assistant, llm, retrieval)")
    p.add_argument("--api", required=True, help="base URL, e.g. http://127.0.0.1:8088 or https://.../simulation/")
    tok = p.add_mutually_exclusive_group(required=True)
    tok.add_argument("--token", help="the team's bearer token")
    tok.add_argument("--token-file", type=Path, help="a file holding the token (keeps it out of the process list)")
    p.add_argument("--assistant", required=True, help="assistant name or module:attr")
    p.add_argument("--assistant-param", action="append", metavar="KEY=VALUE")
    p.add_argument("--run-id", help="Sim.API run id; an existing one is resumed (default rehearse-<time>)")
    p.add_argument("--description", help="run description sent to the server")
    p.add_argument("--track-persona", action="store_true", help="declare that the system tracks persona statements")
    p.add_argument("--debug", action="store_true", help="use the /debug endpoints (nothing is evaluated)")
    p.add_argument("--concurrency", type=int, default=1, help="independent runs at once (default 1)")
    p.add_argument("--limit", type=int, help="stop each run after N sessions (the run stays incomplete)")
    p.add_argument("--topics", type=Path, help="iKAT topic file: PTKB for servers that do not send user_meta")
    p.add_argument("--personas", type=Path, help="persona folder: PTKB for servers that do not send user_meta")
    p.add_argument("--index", type=Path, help="Lucene index dir (default: the demo Wikipedia index)")
    p.add_argument("--k", type=int, help="passages retrieved per turn")
    p.add_argument("--base-url", help="OpenAI-compatible base URL for the assistant's LLM roles")
    p.add_argument("--model", help="model name for the assistant's LLM roles")
    p.add_argument("--max-response-tokens", type=int, default=250, help="truncate longer responses (default 250)")
    p.add_argument("--state-dir", type=Path, default=Path("transcripts/.rehearse"), help="where resume state is kept")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per HTTP request (default 600)")
    p.set_defaults(func=cmd_rehearse)
