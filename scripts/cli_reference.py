"""Write docs/cli.md, the CLI reference, from the real parser: every command's ``--help``.

    .venv/bin/python scripts/cli_reference.py           # rewrite docs/cli.md
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 when docs/cli.md is stale

The help text is formatted at a fixed width, so the page does not depend on the terminal
that wrote it.  ``tests/scripts/test_cli_reference.py`` runs ``--check``: a flag added,
renamed or reworded without rewriting the page fails the suite.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "cli.md"
WIDTH = 100  # argparse wraps at $COLUMNS - 2

# The guide page that explains each command (top-level name -> page in docs/).
GUIDES = {
    "run": "concepts.md",
    "list": "concepts.md",
    "show": "transcript.md",
    "index": "concepts.md#corpus-and-index",
    "corpus": "concepts.md#corpus-and-index",
    "mock-llm": "llm.md#mock-llm",
    "eval": "evaluation.md",
    "report": "evaluation.md#the-report",
    "export": "export.md",
    "serve": "ikat.md#rehearse-the-interactive-task",
    "rehearse": "ikat.md#rehearse-the-interactive-task",
    "memory": "memory-test.md",
    "personas": "ikat.md#real-ikat-users-interactively",
    "validate": "simulators.md#validity",
    "llm-server": "llm.md#a-local-model",
}

HEADER = """\
# CLI reference

Every command's `--help`, as the parser prints it. This page is generated from the parser by
`scripts/cli_reference.py` and a test fails when it is stale: after changing a command or a flag,
run `.venv/bin/python scripts/cli_reference.py`. Exit codes are on the
[reliability](reliability.md#exit-codes) page.
"""


def _commands(
    parser: argparse.ArgumentParser, path: list[str]
) -> Iterator[tuple[list[str], str, argparse.ArgumentParser]]:
    """(command words, one-line help, parser) for every sub-command, depth first, in help order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                yield [*path, name], helps.get(name, ""), child
                yield from _commands(child, [*path, name])


def render() -> str:
    os.environ["COLUMNS"] = str(WIDTH)
    from simloop.cli import build_parser

    parser = build_parser()
    commands = list(_commands(parser, ["simloop"]))
    out = [HEADER, "| command | what it does | guide |", "| --- | --- | --- |"]
    for words, summary, _ in commands:
        if len(words) != 2:
            continue
        guide = GUIDES.get(words[1])
        link = f"[{guide.split('#')[0].removesuffix('.md')}]({guide})" if guide else ""
        out.append(f"| [`{' '.join(words)}`](#{'-'.join(words)}) | {summary} | {link} |")
    out.append("")
    for words, _, child in [(["simloop"], "", parser), *commands]:
        out += [f"## {' '.join(words)}", "", "```text", child.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/cli_reference.py", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from the parser's help")
    ap.add_argument("--out", type=Path, default=PAGE, help="the page (default docs/cli.md)")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != text:
            print(f"{args.out}: stale; rewrite it with: .venv/bin/python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
