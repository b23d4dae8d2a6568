"""`simloop mock-llm`: the OpenAI-compatible stub server with fault injection (``simloop.fakes``),
for tests and benchmarks (DESIGN §11)."""

from __future__ import annotations

import argparse

__all__ = ["add_commands", "cmd_mock_llm"]


def cmd_mock_llm(a: argparse.Namespace) -> int:
    from ..fakes import main_from_args

    return main_from_args(a) or 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    from ..fakes import add_arguments

    p = sub.add_parser("mock-llm", help="an OpenAI-compatible stub server with fault injection")
    add_arguments(p)
    p.set_defaults(func=cmd_mock_llm)
