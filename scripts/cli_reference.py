"""Write docs/cli.md, the CLI reference, from the code: every command's ``--help`` (the real
parser), the run config's fields (``RunConfig``) and the process settings (``SIMLOOP_*``).

    .venv/bin/python scripts/cli_reference.py           # rewrite docs/cli.md
    .venv/bin/python scripts/cli_reference.py --check   # exit 1 when docs/cli.md is stale

The help text is formatted at a fixed width, so the page does not depend on the terminal
that wrote it.  ``tests/scripts/test_cli_reference.py`` runs ``--check``: a flag, config field
or setting added, renamed or reworded without rewriting the page fails the suite.
"""

from __future__ import annotations

import argparse
import os
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "cli.md"
WIDTH = 80  # argparse wraps at $COLUMNS - 2; 78 columns fit the guide's code blocks

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
# CLI and configuration reference

Every command's `--help` as the parser prints it, every field of a run config file, and every
`SIMLOOP_*` process setting. This page is generated from the code by `scripts/cli_reference.py`,
and a test fails when it is stale: after changing a command, a flag, a config field or a setting,
run `.venv/bin/python scripts/cli_reference.py`. Exit codes are on the
[reliability](reliability.md#exit-codes) page; how a config file, the environment and flags
combine is in [concepts](concepts.md#configuration).
"""

CONFIG_INTRO = """\
## Run configuration

The fields of a run config file (TOML; `simloop run run.toml`), by dotted path. The same field is
the environment variable `SIMLOOP_` + the path in capitals with `__` for each dot
(`SIMLOOP_RETRIEVAL__K=20`). `llm.roles` maps a role name (`simulator`, `assistant`, `judge`,
`assistant.rewrite`, ...) to any of the `llm.default` fields.
"""

SETTINGS_INTRO = """\
## Process settings

Environment variables that say how the process works rather than what a run produces. A bad
value is one line and exit 2 before any command writes a file.
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


def _type(ann: Any) -> str:
    """A field's type as a reader writes it: ``int or none``, ``list of str``, ``"local" or "ray"``."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return " or ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("none" if a is type(None) else _type(a) for a in args)
    if origin in (list, tuple, set):
        return f"list of {_type(args[0])}" if args else "list"
    if origin is dict:
        return "table"
    if ann is Path:
        return "path"
    return getattr(ann, "__name__", str(ann))


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict | list) and not value:
        return "empty"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _fields(model: type[BaseModel], prefix: str = "", given: BaseModel | None = None) -> Iterator[str]:
    """One table row per leaf field of a pydantic model, nested models by dotted path.  ``given``
    is the default a parent sets for this section (``simulator``: ``offline``), which wins over
    the section model's own defaults."""
    for name, field in model.model_fields.items():
        ann = field.annotation
        if given is not None:
            value, required = getattr(given, name), False
        else:
            required = field.is_required()
            value = None if required else field.get_default(call_default_factory=True)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from _fields(ann, f"{prefix}{name}.", value if isinstance(value, BaseModel) else None)
            continue
        shown = "required" if required else _default(value)
        yield f"| `{prefix}{name}` | {_type(ann)} | {shown} | {field.description or ''} |"


def render() -> str:
    os.environ["COLUMNS"] = str(WIDTH)
    from simloop.cli import build_parser
    from simloop.config import RunConfig
    from simloop.settings import PROCESS_SETTINGS

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
    out += [CONFIG_INTRO, "| field | type | default | what |", "| --- | --- | --- | --- |", *_fields(RunConfig), ""]
    out += [SETTINGS_INTRO, "| variable | what |", "| --- | --- |"]
    out += [f"| `{name}` | {what} |" for name, what in PROCESS_SETTINGS.items()]
    return "\n".join(out) + "\n"


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
