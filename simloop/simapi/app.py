"""The Sim.API app of `simloop serve`: routes, bearer auth, lifespan (SIMULATION_API.md §1–§3).

Kept apart from the CLI so that `simloop --help` does not import FastAPI.  Tokens are
kept as SHA-256 digests only; no error message repeats one, and uvicorn's access log
has no headers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ..config import PluginSpec, RunConfig
from ..errors import ApiError, BadInputError
from ..files import sqlite_problem
from ..llm import check_endpoints
from ..run import (
    Context,
    check_out_dir,
    close_plugins,
    effective_params,
    iter_scenarios,
    llm_roles,
    load_plugin,
    load_sources,
)
from ..schema import PluginRef, Scenario
from .protocol import SERVER_HEADER, AssistantResponse, Budget, RunMeta, RunStatus, UserUtterance
from .runs import RunService, ServeLimits
from .sessions import Dialogues, SimRunner
from .store import Mode, Store

__all__ = ["TokenTable", "ServeOptions", "build_service", "create_app", "running", "STATE_FILE", "TOKENS_HINT",
           "MAX_BODY", "Guard"]

STATE_FILE = "serve-state.sqlite"
TOKENS_HINT = "give --token TEAM=TOKEN, --tokens-file FILE or SIMLOOP_SERVE_TOKENS"
_VERSION = "1"
MAX_BODY = 1 << 20  # bytes; `simloop serve --max-body`
_PUBLIC = ("/", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc")

# The ASGI interface (asgiref's spec), as the Guard middleware speaks it.
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class TokenTable:
    """team ← SHA-256(token); the tokens themselves are not kept."""

    def __init__(self, tokens: Mapping[str, str]):
        self._digests = [(hashlib.sha256(tok.encode()).digest(), team) for team, tok in tokens.items()]

    def team_for(self, token: str) -> str | None:
        digest = hashlib.sha256(token.encode()).digest()
        found = None
        for known, team in self._digests:  # compare with every entry: no timing hint
            if hmac.compare_digest(known, digest):
                found = team
        return found


def _reply(status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> Callable[[Send], Awaitable[None]]:
    body = json.dumps({"detail": detail}).encode()

    async def send_it(send: Send) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), *headers]})
        await send({"type": "http.response.body", "body": body})
    return send_it


class Guard:
    """ASGI middleware in front of every route: the token is checked before a byte of the
    body is read (a stranger's 20 MB upload is refused from its headers), and a body over
    ``max_body`` bytes is refused with 413, from ``Content-Length`` when sent, else as soon
    as the bytes read pass the limit.  Under the limit the body is read here and handed on,
    so FastAPI never sees more than ``max_body`` bytes.  Routes still resolve the team."""

    def __init__(self, app: ASGIApp, table: TokenTable, max_body: int, prefix: str = ""):
        self.app, self.table, self.max_body = app, table, max_body
        self.public = {prefix + p for p in _PUBLIC} | {prefix}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.public:
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        challenge = [(b"www-authenticate", b"Bearer")]
        if scheme.lower() != "bearer" or not token.strip():
            return await _reply(401, "Not authenticated", challenge)(send)
        if self.table.team_for(token.strip()) is None:
            return await _reply(401, "Token is invalid.", challenge)(send)
        too_big = _reply(413, f"request body too large (limit {self.max_body} bytes)")
        try:
            declared = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            return await _reply(400, "bad Content-Length")(send)
        if declared > self.max_body:
            return await too_big(send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await too_big(send)
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


@dataclass
class ServeOptions:
    limits: ServeLimits = field(default_factory=ServeLimits)
    debug_simulator: PluginSpec | None = None  # default: the same as the run API's
    state: Path | None = None  # default <out>/serve-state.sqlite
    prefix: str = ""  # e.g. "/simulation", as the organisers serve it
    max_body: int = MAX_BODY  # bytes per request body (413 above)


def _catalog(cfg: RunConfig) -> dict[tuple[str, str], Scenario]:
    personas = load_sources(cfg)
    one = cfg.model_copy(update={"scenarios": cfg.scenarios.model_copy(update={"repeat": 1})})
    catalog = {(s.persona.id, s.topic.id): s for s in iter_scenarios(one, personas)}
    if not catalog:
        raise BadInputError("no persona x topic pairs to serve (check --personas / --topics / --topic)")
    if cfg.simulator.name == "offline" and any(not s.topic.rubric for s in catalog.values()):
        raise BadInputError("these topics have no rubric questions (an iKAT topic file?): "
                            "serve them with --simulator replay")
    return catalog


def _check_state(state: Path) -> None:
    # sqlite3 would fail on the first statement with a traceback, or create the file in a
    # folder that --out did not ask for; found here, before anything is written.
    problem = sqlite_problem(state)
    if problem is not None:
        raise BadInputError(f"state file {state}: {problem}; give another --state")


def build_service(cfg: RunConfig, opts: ServeOptions, overrides: dict[str, Any] | None = None
                  ) -> tuple[RunService, Context, SimRunner]:
    """Everything that can be wrong with the input is checked here, before binding."""
    check_out_dir(cfg.out)
    state = opts.state or cfg.out / STATE_FILE
    _check_state(state)
    catalog = _catalog(cfg)
    ctx = Context(cfg, overrides=overrides or {})
    runner = SimRunner()
    specs: dict[Mode, PluginSpec] = {"run": cfg.simulator, "debug": opts.debug_simulator or cfg.simulator}
    built: dict[str, Any] = {}
    sims = {}
    for mode, spec in specs.items():
        key = repr((spec.name, sorted(spec.params.items())))
        if key not in built:
            built[key] = load_plugin("simulator", spec.name, spec.params, ctx)
        ref = PluginRef(name=spec.name, params=effective_params(built[key], spec.params))
        sims[mode] = (spec, Dialogues(built[key], runner, ref))
    if not any(k.startswith("chat:") or k == "llm_pool" for k in ctx.overrides):
        # As `simloop run` does: an LLM user whose endpoint does not answer is exit 2, before the state file.
        check_endpoints(cfg.llm, llm_roles(*built.values()))
    store = Store(state)
    service = RunService(cfg, sims, catalog, store, opts.limits)
    service.load()
    return service, ctx, runner


def create_app(cfg: RunConfig, tokens: Mapping[str, str], opts: ServeOptions | None = None,
               overrides: dict[str, Any] | None = None) -> FastAPI:
    opts = opts or ServeOptions()
    if not tokens:
        raise BadInputError(f"no tokens: {TOKENS_HINT}")
    table = TokenTable(tokens)
    service, ctx, runner = build_service(cfg, opts, overrides)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            await service.close()
            with contextlib.suppress(Exception):
                await runner.run(close_plugins(*(d.simulator for _, d in service.sims.values())))
            with contextlib.suppress(Exception):
                await runner.run(ctx.aclose())
            runner.stop()
            service.store.close()

    app = FastAPI(title="simloop Sim.API rehearsal server", lifespan=lifespan)
    app.state.service = service

    @app.middleware("http")
    async def mark(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers[SERVER_HEADER] = _VERSION  # lets `rehearse` send meta.simloop
        return response

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=exc.headers)

    async def team(request: Request) -> str:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        challenge = {"WWW-Authenticate": "Bearer"}
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "Not authenticated", challenge)
        found = table.team_for(token.strip())
        if found is None:
            raise ApiError(401, "Token is invalid.", challenge)
        return found

    router = APIRouter()
    Team = Depends(team)

    @router.get("/auth/verify")
    async def verify(team_id: str = Team) -> dict[str, str]:
        return {"team_id": team_id}

    @router.get("/budget/check")
    async def budget(team_id: str = Team) -> Budget:
        return await service.budget(team_id)

    def api(mode: Mode) -> None:
        prefix = f"/{mode}"

        @router.post(f"{prefix}/start", response_model=UserUtterance, response_model_exclude_none=True)
        async def start(meta: RunMeta, team_id: str = Team) -> UserUtterance:
            return await service.start(team_id, mode, meta)

        @router.post(f"{prefix}/continue", response_model=UserUtterance, response_model_exclude_none=True)
        async def cont(body: AssistantResponse, team_id: str = Team) -> UserUtterance:
            return await service.continue_(team_id, mode, body)

        @router.get(f"{prefix}/session", response_model=UserUtterance, response_model_exclude_none=True)
        async def session(run_id: str, team_id: str = Team) -> UserUtterance:
            return await service.session(team_id, mode, run_id)

        @router.get(f"{prefix}/status")
        async def status(run_id: str, team_id: str = Team) -> RunStatus:
            return service.status(team_id, mode, run_id)

        @router.get(f"{prefix}/dump")
        async def dump(run_id: str, team_id: str = Team) -> Response:
            lines = "\n".join(json.dumps(r) for r in await service.dump(team_id, mode, run_id))
            return Response(lines + ("\n" if lines else ""), media_type="application/x-ndjson")

    api("run")
    api("debug")

    @router.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(f"{opts.prefix}/docs")

    app.include_router(router, prefix=opts.prefix)
    app.add_middleware(Guard, table=table, max_body=opts.max_body, prefix=opts.prefix)
    return app


@asynccontextmanager
async def running(app: FastAPI, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` in this event loop on a free port; yields the base URL (tests, bench)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        for _ in range(500):  # bounded: 5 s
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        if not server.started:
            if task.done():
                task.result()  # raises what stopped the server
            raise RuntimeError("server did not start within 5 s")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=30)
        sock.close()
