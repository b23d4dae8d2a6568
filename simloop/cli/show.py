"""`simloop list` (plugins, personas, topics) and `simloop show` (a run, or one dialogue
turn by turn): read-only views, printed with rich on stdout (warnings on stderr)."""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING

from rich import box
from rich.panel import Panel
from rich.table import Table

from ..config import ScenarioSelection
from ..errors import BadInputError
from .console import err, out, print_whole

if TYPE_CHECKING:
    from ..schema import Persona, Transcript

__all__ = ["add_commands", "cmd_list", "cmd_show", "print_list", "show_run"]

DEFAULT_PERSONAS: Path = ScenarioSelection.model_fields["personas_dir"].default  # what a run reads


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", help="plugins, personas and topics")
    p.add_argument("--personas", type=Path, help="persona file or folder (default: personas/ when it exists)")
    p.add_argument("--topics", type=Path, help="list the topics of an iKAT topic file instead")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="a readable view of a run or one dialogue")
    p.add_argument("run_dir", type=Path, help="a run directory (transcripts/<run id>)")
    p.add_argument("--dialogue", help="show this dialogue turn by turn (ids are in the overview)")
    p.set_defaults(func=cmd_show)


def cmd_list(a: argparse.Namespace) -> int:
    return print_list(a.personas, a.topics)


def cmd_show(a: argparse.Namespace) -> int:
    return show_run(a.run_dir, a.dialogue)


def print_list(personas_dir: Path | None, topics: Path | None) -> int:
    """Plugins always; then the personas (or an iKAT file's topics).  A folder or file the
    user named must exist (exit 2, before any output); the default personas/ may be absent,
    as it is outside a checkout, and the plugins are still worth listing."""
    from ..run import available

    personas = _personas_to_list(personas_dir, topics)
    t = Table(title="plugins")
    t.add_column("kind")
    t.add_column("names")
    t.add_row("assistants", ", ".join(available("assistant")))
    t.add_row("simulators", ", ".join(available("simulator")))
    out.print(t)
    if personas is None:
        out.print(f"personas: none found ({DEFAULT_PERSONAS.resolve()} does not exist; "
                  "pass --personas DIR or --topics FILE)")
        return 0
    p = Table(title=f"personas ({len(personas)})")
    for col in ("persona", "PTKB", "behaviour", "topics"):
        p.add_column(col)
    for persona in personas:
        b = persona.behaviour
        traits = ", ".join(f"{short} {_trait(getattr(b, name))}" for short, name in (
            ("patience", "patience"), ("coop", "cooperativeness"), ("lang", "language_skill"),
            ("verb", "verbosity"), ("reveal", "reveal")))
        titles = "\n".join(f"{tp.id}: {tp.title}" for tp in persona.topics)
        p.add_row(persona.id, str(len(persona.ptkb)), traits, titles)
    out.print(p)
    return 0


def _personas_to_list(personas_dir: Path | None, topics: Path | None) -> list[Persona] | None:
    """The personas named by the flags; None when none were named and personas/ is absent."""
    if topics is not None:
        from ..inputs import load_ikat_topics

        return load_ikat_topics(topics)
    if personas_dir is None and not DEFAULT_PERSONAS.exists():
        return None
    from ..inputs import load_personas

    return load_personas(personas_dir or DEFAULT_PERSONAS)


def _trait(value: object) -> str:
    """A trait value, or its range as 'low-high' (a list of modes as 'a|b')."""
    if isinstance(value, list):
        return "|".join(value) if all(isinstance(v, str) for v in value) else f"{value[0]:g}-{value[1]:g}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _overview(ts: list[Transcript]) -> Table:
    """One row per dialogue, narrow enough for 80 columns with iKAT-length ids: no cell
    wraps (an id split over lines cannot be copied into `--dialogue`); print it with
    ``print_whole``."""
    t = Table(title=f"{len(ts)} dialogues", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, padding=(0, 1, 0, 0))
    t.add_column("dialogue", no_wrap=True)
    for col in ("turns", "stop", "by", "grade", "PTKB", "calls"):
        t.add_column(col, no_wrap=True, justify="left" if col in ("stop", "by") else "right")
    for tr in ts:
        grades = [x.user.grade for x in tr.turns if x.user.grade is not None]
        ptkb = sum(p.used for x in tr.turns for p in x.assistant.ptkb_provenance)
        t.add_row(tr.dialogue_id, str(len(tr.turns)), tr.stop.reason, tr.stop.by,
                  f"{mean(grades):.1f}" if grades else "-", str(ptkb), str(tr.usage.calls))
    t.caption = "grade: mean user grade; PTKB: statements used; calls: LLM calls"
    t.caption_justify = "left"
    return t


def _dialogue(tr: Transcript) -> None:
    s = tr.scenario
    out.print(Panel(f"persona [bold]{s.persona_id}[/]  topic [bold]{s.topic_id}[/]  seed {s.seed}\n"
                    f"simulator {tr.simulator.name}  assistant {tr.assistant.name}",
                    title=tr.dialogue_id))
    for turn in tr.turns:
        u = turn.user
        meta = " ".join(x for x in (u.intent, u.rubric_id and f"rubric {u.rubric_id}",
                                    u.grade is not None and f"grade {u.grade:g}") if x)
        out.print(f"[bold cyan]{turn.index}. user[/] {u.utterance}  [dim]{meta}[/]")
        a = turn.assistant
        if a.rewritten_query:
            out.print(f"   [dim]query:[/] {a.rewritten_query}")
        for p in a.ptkb_provenance:
            if not p.used:  # the ranking's tail: scored, not relied on
                continue
            score = f" ({p.score:.2f})" if p.score is not None else ""
            out.print(f"   [magenta]PTKB {p.index}[/]{score}: {p.statement}")
        out.print(f"   [bold green]assistant[/] {a.response}")
        cited = [f"{p.rank}. {p.docid} {p.score:.2f}{' *' if p.used else ''}" for p in a.passages[:5]]
        if cited:
            out.print("   [dim]passages: " + " | ".join(cited) + "[/]")
        stages = ", ".join(f"{st.name} {st.latency_ms:.0f}ms" for st in turn.stages)
        out.print(f"   [dim]{stages}; context {a.context.strategy} {a.context.tokens} tok[/]")
    if tr.stop.utterance:  # the closing line: said, never answered
        out.print(f"[bold cyan]user[/] {tr.stop.utterance}  [dim]closing line[/]")
    out.print(f"[bold]stop[/]: {tr.stop.reason} by {tr.stop.by}" + (f" — {tr.stop.detail}" if tr.stop.detail else ""))


def show_run(run_dir: Path, dialogue: str | None) -> int:
    """The run's overview table, or one dialogue turn by turn; a damaged line is named on stderr."""
    from ..files import check_run_dir
    from ..run import ReadReport, read_manifest, read_transcripts

    manifest = read_manifest(check_run_dir(run_dir))
    report = ReadReport()
    ts = list(read_transcripts(run_dir, report, log_problems=False))  # said below, once, with what to do
    if dialogue is None:
        out.print(f"run {manifest.run_id}: {manifest.status}, assistant {manifest.assistant.name}, "
                  f"simulator {manifest.simulator.name}")
        print_whole(_overview(ts))
    else:
        match = [t for t in ts if t.dialogue_id == dialogue]
        if not match:
            raise BadInputError(f"no dialogue {dialogue!r} in {run_dir} (see `simloop show {run_dir}`)")
        _dialogue(match[0])
    if report.newer:  # read all the same: what the newer version added is not shown
        err.print(f"simloop: warning: {report.newer}", style="yellow", markup=False, highlight=False, soft_wrap=True)
    for note in report.notes(run_dir / "dialogues.jsonl"):  # a corrupt line is never skipped without a word
        err.print(f"simloop: warning: {note}; resume the run to move it to dialogues.rejected.jsonl",
                  style="yellow", markup=False, highlight=False, soft_wrap=True)
    return 0
