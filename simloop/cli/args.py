"""Flag parsing shared by every command (kept apart from cli.py so command modules can
import it without importing each other)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from typing import Any, NoReturn

from ..errors import BadInputError

__all__ = ["Parser", "parse_param", "parse_params"]


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's error form: a wrong flag is one line and exit 2, as any other bad
    input (argparse prints the whole usage first, up to a dozen lines).  Sub-commands' parsers
    are of the same class (``add_subparsers`` takes the parent's)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see: {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        # argparse reports unknown flags from the top parser ("simloop: ... see: simloop
        # --help"); the command they were given to is the one whose --help lists its flags.
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            self._command_parser(ns).error(f"unrecognized arguments: {' '.join(extras)}")
        return ns

    def _command_parser(self, ns: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost sub-command parser ``ns`` went through (``simloop index build``)."""
        parser: argparse.ArgumentParser = self
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(ns, sub.dest, None) if sub is not None else None
            if sub is None or chosen not in sub.choices:
                return parser
            parser = sub.choices[chosen]


def parse_param(text: str, flag: str = "--param") -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE parsed as JSON when it is JSON ("3" -> 3, "true" -> True)."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise BadInputError(f"{flag} {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def parse_params(pairs: Iterable[str] | None, flag: str = "--param") -> dict[str, Any]:
    return dict(parse_param(p, flag) for p in pairs or ())
