"""Every flag and argument of every command has help text, so `simloop CMD --help` explains
all it accepts (issue 35): this walks the whole parser, sub-commands of sub-commands too,
and so holds every flag added later to the same rule."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from simloop.cli import build_parser


def _commands(parser: argparse.ArgumentParser, path: str = "simloop") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, f"{path} {name}")


def _without_help(parser: argparse.ArgumentParser) -> list[str]:
    return [", ".join(a.option_strings) or a.dest for a in parser._actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and (not a.help or a.help == argparse.SUPPRESS or not a.help.strip())]


COMMANDS = dict(_commands(build_parser()))


def test_the_walk_reaches_nested_sub_commands():
    assert {"simloop run", "simloop index build", "simloop corpus wiki", "simloop personas from-ikat",
            "simloop mock-llm", "simloop export"} <= set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_flag_has_help(command):
    assert _without_help(COMMANDS[command]) == [], f"{command}: flags without help text"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_renders(command, capsys):
    # A help text argparse cannot format (a stray %) fails only when a user asks for --help.
    COMMANDS[command].print_help()
    assert command.split()[-1] in capsys.readouterr().out
