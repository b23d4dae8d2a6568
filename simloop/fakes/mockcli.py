"""``simloop mock-llm``'s command line: its flags, the profiles' help, and serving until a signal."""

from __future__ import annotations

import argparse
import asyncio
import signal

from ..loop import run as run_loop
from .mockllm import FAULT_KINDS, MockLLM, MockOptions
from .mockservers import PROFILES

__all__ = ["PROFILE_HELP", "serve", "add_arguments", "main_from_args"]

PROFILE_HELP = """\
profiles (--profile): each answers as that server does, so a client can be tested against it.

  stub (default)       json_schema and json_object (+schema) taken; n honoured; seed taken; usage;
                       no window unless --context-window N (then OpenAI's 400 context_length_exceeded);
                       unknown model ignored
  llama-cpp-python     json_schema: 500 "Input should be 'text' or 'json_object'"; json_object + schema:
                       a grammar from the schema; n ignored (1 choice); seed taken; usage; window reported
                       nowhere (default 2048); prompt >= window: 400 context_length_exceeded "(N in the
                       messages, X in the completion)", prompt + max_tokens clamped; unknown model ignored
  llama-server         json_schema and json_object + schema taken; n 1..4 (else 400 "Field 'n'"); seed;
                       usage of the first choice; window in GET /props and /v1/models meta.n_ctx (default
                       4096); prompt >= window: 400 exceed_context_size_error; unknown model ignored
  llama-server-legacy  mid-2025 build: every refusal a 500 server_error, n > 1: 500 "Only one completion
                       choice is allowed"; window in GET /props only; a prompt too long is silently cut (200)
  vllm                 json_schema (name required) taken; json_object ignores its schema; n honoured, 400 at
                       temperature 0; seed; window in /v1/models max_model_len (default 8192); prompt >
                       window: 400 "maximum context length ... (parameter=input_tokens)"; unknown model 404
  ollama               json_schema taken; json_object ignores its schema; n ignored; seed; no window on /v1
                       (default 4096); a prompt too long loses its oldest messages, silently (200);
                       unknown model 404
  openai               json_schema (name required) taken; json_object + schema 400 (unverified); n, seed;
                       no window reported (default 128000); prompt > window: 400 context_length_exceeded;
                       unknown request keys 400 "Unrecognized request argument supplied"; unknown model 404

  Under every profile but stub an answer longer than max_tokens (or the room the window leaves) is
  cut with finish_reason "length", and every profile's model follows a JSON schema written into the
  prompt.  --refuse and --no-json shape the stub only: --refuse response_format is a server that
  takes no response_format; adding --no-json makes it one that cannot produce JSON at all.
"""


async def _serve_forever(options: MockOptions, host: str, port: int) -> None:
    mock = MockLLM(options)
    await mock.start(host, port)
    print(f"mock-llm listening on {mock.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
            pass
    try:
        await stop.wait()
    finally:
        await mock.aclose()


def serve(options: MockOptions | None = None, host: str = "127.0.0.1", port: int = 8089) -> None:
    """Run the server until SIGINT/SIGTERM (blocking)."""
    run_loop(_serve_forever(options or MockOptions(), host, port))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = PROFILE_HELP
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8089, help="port to listen on (default 8089)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="fixed latency per response")
    parser.add_argument("--latency-jitter-ms", type=float, default=0.0, help="extra uniform latency, 0..N ms")
    parser.add_argument("--fault-rate", type=float, default=0.0, help="share of requests that fail (0..1)")
    parser.add_argument("--faults", default=",".join(FAULT_KINDS), help="fault kinds drawn uniformly")
    parser.add_argument("--seed", type=int, default=0, help="seed of the replies and of the faults drawn (default 0)")
    parser.add_argument("--retry-after-s", type=float, default=1.0, help="Retry-After of injected 429s")
    parser.add_argument("--rpm-limit", type=int, default=None, help="answer 429 above N requests/min per client")
    parser.add_argument("--hang-s", type=float, default=300.0, help="how long a 'timeout' fault hangs")
    parser.add_argument("--model", default="mock-model", help="model id listed by /v1/models")
    parser.add_argument("--profile", default="stub", choices=list(PROFILES),
                        help="whose contract to answer with (see below)")
    parser.add_argument("--context-window", type=int, default=None, metavar="N",
                        help="the model's context window in tokens (default: the profile's)")
    parser.add_argument("--refuse", default="", metavar="PARAM[,PARAM]",
                        help="stub: refuse these request parameters as OpenAI refuses unknown ones")
    parser.add_argument("--no-json", action="store_true", help="stub: the model writes prose whatever it is asked")


def main_from_args(args: argparse.Namespace) -> int:
    options = MockOptions(
        latency_ms=args.latency_ms, latency_jitter_ms=args.latency_jitter_ms, seed=args.seed,
        fault_rate=args.fault_rate, faults=args.faults, retry_after_s=args.retry_after_s,
        rpm_limit=args.rpm_limit, hang_s=args.hang_s, model=args.model, profile=args.profile,
        context_window=args.context_window, refuse=args.refuse, no_json=args.no_json)
    try:
        serve(options, args.host, args.port)
    except KeyboardInterrupt:
        pass
    return 0
