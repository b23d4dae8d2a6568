"""`simloop serve`: an iKAT Sim.API-compatible rehearsal server (SIMULATION_API.md §1–§3).

Teams point their client at it instead of the organisers' server and get the same
endpoints, fields and status codes, with simloop simulators as the users and personas
(or an iKAT topic file) as the topics.  State lives in ``<out>/serve-state.sqlite``, so
runs survive a restart; each hosted run is a simloop run directory (simapi/runs.py).
The app itself is in simapi/app.py, imported only when the command runs.

Bearer tokens come from ``--token TEAM=TOKEN``, ``--tokens-file`` or the environment
variable ``SIMLOOP_SERVE_TOKENS`` (``TEAM=TOKEN,...``).  They are never logged or written
to disk, and no error message repeats one.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from ..config import PluginSpec, RunConfig
from ..errors import BadInputError, check_port, listen_error
from ..settings import serve_tokens
from .flags import RUN_FLAGS, add_flags, check_range, config_from_flags

__all__ = ["parse_tokens", "collect_tokens", "add_commands", "TOKENS_ENV"]

TOKENS_ENV = "SIMLOOP_SERVE_TOKENS"  # a process setting (settings.serve_tokens), named in messages


# ----------------------------------------------------------------------------- tokens


def parse_tokens(items: list[tuple[int, str]], where: str) -> dict[str, str]:
    """``(position, "TEAM=TOKEN")`` items; errors name the place and position, never the text."""
    out: dict[str, str] = {}
    for n, item in items:
        team, sep, token = item.strip().partition("=")
        if not sep or not team.strip() or not token.strip():
            raise BadInputError(f"{where} {n}: expected TEAM=TOKEN")
        out[team.strip()] = token.strip()
    return out


def collect_tokens(flags: list[str] | None, file: Path | None, environ_tokens: str) -> dict[str, str]:
    """Tokens from the environment (``environ_tokens``: ``TEAM=TOKEN,...``), then the file,
    then flags (later ones win per team)."""
    tokens: dict[str, str] = {}
    if environ_tokens:
        parts = [p for p in environ_tokens.split(",") if p.strip()]
        tokens |= parse_tokens(list(enumerate(parts, start=1)), f"{TOKENS_ENV}, item")
    if file is not None:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise BadInputError(f"{file}: cannot read tokens file ({exc.strerror})") from None
        items = [(n, ln) for n, ln in enumerate(lines, start=1) if ln.strip() and not ln.lstrip().startswith("#")]
        tokens |= parse_tokens(items, f"{file}, line")
    tokens |= parse_tokens(list(enumerate(flags or [], start=1)), "--token, item")
    if len(set(tokens.values())) != len(tokens):
        raise BadInputError("two teams have the same token")
    return tokens


# ----------------------------------------------------------------------------- CLI


# The run settings `serve` takes, spelled as in `simloop run`.
SERVE_FLAGS = ("simulator", "simulator_param", "topics", "personas", "topic", "limit", "base_url", "model",
               "out", "max_turns", "seed")


def _serve_config(a: argparse.Namespace) -> RunConfig:
    return config_from_flags(a, {d: RUN_FLAGS[d] for d in SERVE_FLAGS}, config=a.config)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else happens: a busy port is one line and
    exit 2, with no state file left behind."""
    check_port(port)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise BadInputError(f"--host {host}: {exc.strerror or exc}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise listen_error(host, port, exc) from None
    return sock


def _check_limits(a: argparse.Namespace) -> None:
    # 0 runs or debug sessions is a server for the other API only; a response limit of 0
    # would refuse every reply, and a negative value means nothing.
    check_range("--max-body", a.max_body, 1024, "give at least 1024 bytes")
    check_range("--max-response-tokens", a.max_response_tokens, 1, "give at least 1 token")
    check_range("--max-response-chars", a.max_response_chars, 1,
                "give at least 1 character (leave it out for no limit)")
    check_range("--run-budget", a.run_budget, 0, "give 0 (no runs, /debug only) or more runs per team")
    check_range("--debug-budget", a.debug_budget, 0, "give 0 (no debug sessions) or more per team")


def route_prefix(prefix: str) -> str:
    """``--prefix`` as the routes take it: '' or '/a/path' without a trailing '/' (FastAPI
    asserts on any other, after the state file exists)."""
    if prefix and (not prefix.startswith("/") or any(c in prefix for c in "?# \t")):
        raise BadInputError(f"--prefix {prefix!r}: give a URL path starting with '/', e.g. /simulation")
    return prefix.rstrip("/")


def cmd_serve(a: argparse.Namespace) -> int:
    import uvicorn

    from ..simapi import RunService, ServeLimits, ServeOptions, create_app

    _check_limits(a)
    prefix = route_prefix(a.prefix)
    cfg = _serve_config(a)
    tokens = collect_tokens(a.token, a.tokens_file, serve_tokens())
    sock = bind(a.host, a.port)
    limits = ServeLimits(max_response_tokens=a.max_response_tokens, max_response_chars=a.max_response_chars,
                         run_budget=a.run_budget, debug_budget=a.debug_budget)
    debug_sim = PluginSpec(name=a.debug_simulator) if a.debug_simulator else None
    opts = ServeOptions(limits=limits, debug_simulator=debug_sim, state=a.state, prefix=prefix, max_body=a.max_body)
    try:
        app = create_app(cfg, tokens, opts)
    except BaseException:
        sock.close()
        raise
    service: RunService = app.state.service
    print(f"simloop serve: http://{a.host}:{a.port}{opts.prefix} | {len(service.queue)} user x topic pairs | "
          f"simulator {cfg.simulator.name} | teams {', '.join(sorted(tokens))} | "
          f"runs under {cfg.out}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=a.host, port=a.port, log_level="info", access_log=not a.no_access_log)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="an iKAT Sim.API-compatible rehearsal server")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file (simulator, llm, scenarios)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8088, help="port to listen on (default 8088)")
    p.add_argument("--token", action="append", metavar="TEAM=TOKEN", help=f"a team's bearer token (repeatable; "
                   f"prefer --tokens-file or {TOKENS_ENV}: flags show in the process list)")
    p.add_argument("--tokens-file", type=Path, help="file with one TEAM=TOKEN per line (# comments)")
    add_flags(p, SERVE_FLAGS)
    p.add_argument("--debug-simulator", help="another simulator for /debug/* (as the organisers do)")
    p.add_argument("--state", type=Path, help="state file (default <out>/serve-state.sqlite)")
    p.add_argument("--max-response-tokens", type=int, default=250, help="response limit in tokens (default 250)")
    p.add_argument("--max-response-chars", type=int, help="response limit in characters (default none)")
    p.add_argument("--run-budget", type=int, default=100, help="runs per team (default 100)")
    p.add_argument("--debug-budget", type=int, default=100, help="debug sessions per team (default 100)")
    p.add_argument("--prefix", default="", help="serve under this path, e.g. /simulation")
    p.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                   help="largest request body; larger ones get 413 (default 1 MiB)")
    p.add_argument("--no-access-log", action="store_true", help="do not log one line per HTTP request")
    p.set_defaults(func=cmd_serve)
