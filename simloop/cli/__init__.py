"""`simloop ...` commands.  Parses flags, calls the library, prints.

Errors: a ``BadInputError`` or a flag argparse rejects prints one line and exits 2; any
other ``SimloopError`` or an unforeseen ``OSError`` prints one line and exits 1; never a
traceback (``-v`` shows one for the ``OSError``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ..errors import BadInputError, SimloopError
from ..run import INTERRUPTED, exit_now, sigterm_as_sigint
from ..settings import check as check_settings
from ..urls import RedactURLs
from . import evaluate, index, llm_server, memory, mock_llm, personas, rehearse, run, serve, show, validate
from .args import Parser

__all__ = ["main", "build_parser"]

# Each module adds its sub-commands with add_commands(sub), in the order help lists them.
_COMMANDS = (run, show, index, mock_llm, llm_server, evaluate, serve, rehearse, memory, personas, validate)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="simloop",
        description="Run many conversations between a simulated user and a personalised assistant; "
                    "record every turn with its retrieval and PTKB provenance.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in _COMMANDS:
        module.add_commands(sub)
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
        with sigterm_as_sigint():  # every command stops on SIGTERM as on Ctrl-C
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
    check_settings()  # a bad process setting is reported before any file is written
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
