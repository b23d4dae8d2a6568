"""`simloop personas from-ikat TOPICS.json --out DIR` (DESIGN §11): iKAT conversations as
personas whose rubric questions come from the resolved utterances and whose reference
answers are the gold responses, so the rubric simulator can talk to real iKAT users.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import BadInputError
from ..files import folder_problem

__all__ = ["add_commands", "cmd_from_ikat"]


def cmd_from_ikat(a: argparse.Namespace) -> int:
    from ..inputs import personas_from_ikat, write_personas

    if not a.out.strip():  # Path('') is the current folder: an unset shell variable would write there
        raise BadInputError("--out '': an empty path; give a folder for the persona files ('.' for the current folder)")
    a.out = Path(a.out)
    problem = folder_problem(a.out)  # before the topics are read: /proc/x fails only when written
    if problem is not None:
        raise BadInputError(f"--out {a.out}: {problem}; give a folder for the persona files")
    personas = personas_from_ikat(a.topics, prefix=a.prefix)
    written = write_personas(personas, a.out, source=a.topics.name)
    questions = sum(len(t.rubric) for p in personas for t in p.topics)
    turns_with_reference = sum(q.reference is not None for p in personas for t in p.topics for q in t.rubric)
    print(f"{len(written)} personas, {questions} rubric questions ({turns_with_reference} with a reference answer) "
          f"from {a.topics}")
    print(f"run them: simloop run --personas {a.out}")
    print(a.out)  # last line: the folder, for scripts
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("personas", help="make personas from other sources")
    cmds = p.add_subparsers(dest="personas_cmd", required=True)
    c = cmds.add_parser("from-ikat", help="iKAT topics (2023/2024/2025) -> persona TOML with rubric questions")
    c.add_argument("topics", type=Path, metavar="TOPICS.json", help="an iKAT topic file")
    # A string, made a Path once checked: Path('') would already be '.', and '' must be refused.
    c.add_argument("--out", required=True, metavar="DIR", help="folder for the persona files")
    c.add_argument("--prefix", default="", help="prepended to persona and topic ids (default: the iKAT number alone)")
    c.set_defaults(func=cmd_from_ikat)
