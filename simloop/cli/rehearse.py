"""`simloop rehearse`: the engine with the ``simapi`` simulator (simulators/simapi.py).

A simloop assistant answers a Sim.API server, the organisers' or `simloop serve`; every
server session is one recorded dialogue of the run directory ``<out>/<run-id>``.  Run
the same command again (same ``--run-id`` and flags) to resume after a crash: the run
directory goes on where it stopped and each Sim.API run where the server says it is.

The token: ``--token-env VAR`` names the environment variable that holds it (nothing in
the process list); ``--token`` and ``--token-file`` hand it to the run in-process.  It is
never written to the run directory, the state files or a log.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import RunConfig
from ..errors import BadInputError, ConfigError
from ..files import folder_problem
from ..loop import run as run_loop
from ..urls import check_url, redact_urls
from .flags import RUN_FLAGS, add_flags, check_range, config_from_flags

if TYPE_CHECKING:
    from ..simulators import SimApiSimulator

__all__ = ["add_commands", "cmd_rehearse"]


def _token(a: argparse.Namespace) -> tuple[str, str]:
    """(variable name, token): the run reads the token as that variable."""
    from ..simulators import DEFAULT_TOKEN_ENV

    if a.token_env is not None:
        token = os.environ.get(a.token_env, "").strip()
        if not token:
            raise BadInputError(f"--token-env {a.token_env}: the variable is not set")
        return a.token_env, token
    if a.token_file is not None:
        try:
            token = a.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise BadInputError(f"{a.token_file}: cannot read token file ({exc.strerror})") from None
    else:
        token = (a.token or "").strip()
    if not token:
        raise BadInputError("give the team token with --token-env VAR, --token TOKEN or --token-file FILE")
    return DEFAULT_TOKEN_ENV, token


# The run settings `rehearse` takes, spelled as in `simloop run`.
REHEARSE_FLAGS = ("assistant", "assistant_param", "topics", "personas", "index", "k", "base_url", "model", "out",
                  "run_id")


def _config(a: argparse.Namespace, token_env: str) -> RunConfig:
    sim: dict[str, Any] = {"api": a.api, "run_id": a.run_id, "token_env": token_env, "debug": a.debug,
                           "track_persona": a.track_persona, "runs": a.concurrency, "limit": a.limit,
                           "max_response_tokens": a.max_response_tokens, "timeout_s": a.timeout}
    if a.description:
        sim["description"] = a.description
    if a.state_dir is not None:
        sim["state_dir"] = str(a.state_dir)
    # The server's user ends each session, so max_turns is only a guard against a runaway server.
    fixed = {"simulator": {"name": "simapi", "params": sim}, "max_turns": 1000,
             "dialogue_timeout_s": a.dialogue_timeout}
    # The token variable is ours, not a run setting: keep it out of the SIMLOOP_* layer.
    environ = {k: v for k, v in os.environ.items() if k != token_env}
    return config_from_flags(a, {d: RUN_FLAGS[d] for d in REHEARSE_FLAGS}, config=a.config, environ=environ,
                             fixed=fixed)


async def _verify(api: str, token: str, debug: bool, timeout_s: float) -> None:
    """A rejected token, or a server that does not answer at the start, is bad input
    (as an LLM endpoint's preflight): found before anything is written.  A
    server lost in the middle of a rehearsal is a run failure instead (the simulator's)."""
    import httpx

    from ..simapi import SimApiClient

    client = SimApiClient(api, token, debug=debug, timeout_s=timeout_s)
    try:
        await client.verify()
    except (httpx.TransportError, httpx.InvalidURL) as exc:
        why = str(exc) or type(exc).__name__  # httpx's timeouts and some refusals carry no text
        message = f"--api {api}: cannot reach the Sim.API server ({why}); is it running?"
        raise ConfigError(redact_urls(message)) from None
    finally:
        await client.aclose()


def _check_flags(a: argparse.Namespace) -> None:
    """What the flags alone can get wrong, before any file or request."""
    from ..simulators import API_SCHEMES

    # First: the message below repeats the URL.
    check_url(a.api, "the variable --token-env names", "--api", error=ConfigError)
    if not a.api.startswith(API_SCHEMES):  # said for the flag (the simulator names its parameter)
        raise ConfigError(f"--api {a.api!r}: give the server's URL, starting with http:// or https://")
    check_range("--concurrency", a.concurrency, 1, "give at least 1 run")
    check_range("--limit", a.limit, 1, "give at least 1 session (leave it out for every session)")
    check_range("--max-response-tokens", a.max_response_tokens, 1, "give at least 1 token")
    check_range("--timeout", a.timeout, 0, "give a number of seconds above 0", above=True)
    check_range("--dialogue-timeout", a.dialogue_timeout, 0, "give a number of seconds above 0", above=True)
    problem = None if a.state_dir is None else folder_problem(a.state_dir)
    if problem is not None:
        raise ConfigError(f"--state-dir {a.state_dir}: {problem}")


def _print_lanes(simulator: SimApiSimulator) -> None:
    """What each Sim.API run did, one line each, and the server's time per turn (stderr)."""
    results = simulator.results()
    for r in results:
        print(f"{r.run_id}: {r.status}, {r.sessions} sessions, {r.turns} turns"
              + (f", {r.truncated} responses truncated" if r.truncated else "")
              + (f", {r.abandoned} sessions abandoned" if r.abandoned else "")
              + (f", resumed {r.resumed}x" if r.resumed else ""), file=sys.stderr)
    turns = sum(r.turns for r in results)
    if turns:
        print(f"per turn: server {1000 * sum(r.server_s for r in results) / turns:.0f} ms", file=sys.stderr)


def cmd_rehearse(a: argparse.Namespace) -> int:
    from datetime import datetime

    from ..run import prepare_run
    from ..simulators import SimApiSimulator
    from .console import err, out, progress_bar, summary_table
    from .outcome import drive, llm_run_code, say_plain

    _check_flags(a)
    a.run_id = a.run_id or "rehearse-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    token_env, token = _token(a)
    cfg = _config(a, token_env)
    run_dir = cfg.out / a.run_id
    resume = run_dir if (run_dir / "run.json").exists() else None
    # The server is asked once every local input (topics, index, LLM endpoints) has passed.
    prep = prepare_run(cfg, resume=resume, secrets={token_env: token},
                       remote_check=lambda: run_loop(_verify(a.api, token, a.debug, a.timeout)))
    if resume is not None:
        print(f"resuming {run_dir}: {len(prep.done)} dialogues recorded", file=sys.stderr)
    if a.concurrency > 1:
        print(f"simloop rehearse: {a.concurrency} parallel runs; each counts against the run budget",
              file=sys.stderr)
    # The bar on a terminal only: piped, stderr keeps its lines (the server sets how many
    # sessions there are, so the bar counts them without a total).
    progress = progress_bar(err.is_terminal)
    stats = drive(prep, progress, None, "the same command again")
    if isinstance(stats, int):
        return stats
    if isinstance(prep.simulator, SimApiSimulator):  # it is: the command sets the simulator
        _print_lanes(prep.simulator)
    out.print(summary_table(stats, prep.run_dir))
    if stats.interrupted:
        print(f"interrupted: run the same command again to resume {prep.run_dir}", file=sys.stderr)
    code = 130 if stats.interrupted else llm_run_code(prep.run_dir, say_plain, "simloop rehearse")
    print(prep.run_dir)
    return code


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rehearse", help="drive an assistant against a Sim.API server (ours or the official one)")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file (assistant, llm, retrieval)")
    p.add_argument("--api", required=True, help="base URL, e.g. http://127.0.0.1:8088 or https://.../simulation/")
    tok = p.add_mutually_exclusive_group(required=True)
    tok.add_argument("--token-env", metavar="VAR", help="the environment variable holding the team's bearer token")
    tok.add_argument("--token", help="the team's bearer token (shows in the process list: prefer --token-env)")
    tok.add_argument("--token-file", type=Path, help="a file holding the token")
    p.add_argument("--assistant", required=True, help="assistant name or module:attr")
    add_flags(p, [d for d in REHEARSE_FLAGS if d not in ("assistant", "run_id")])
    p.add_argument("--run-id", help="Sim.API run id and run directory name; an existing one is resumed "
                                    "(default rehearse-<time>)")
    p.add_argument("--description", help="run description sent to the server")
    p.add_argument("--track-persona", action="store_true", help="declare that the system tracks persona statements")
    p.add_argument("--debug", action="store_true", help="use the /debug endpoints (nothing is evaluated)")
    p.add_argument("--concurrency", type=int, default=1, help="independent Sim.API runs at once (default 1)")
    p.add_argument("--limit", type=int, help="stop each run after N sessions (the run stays incomplete)")
    p.add_argument("--max-response-tokens", type=int, default=250, help="truncate longer responses (default 250)")
    p.add_argument("--state-dir", type=Path, help="where resume state is kept (default <out>/.rehearse)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per HTTP request (default 600)")
    p.add_argument("--dialogue-timeout", type=float, default=3600.0, help="seconds per session (default 3600)")
    p.set_defaults(func=cmd_rehearse)
