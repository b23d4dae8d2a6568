"""Terminal output with rich: the run progress bar and summary, `list`, `show`.

Progress and logs go to stderr; tables and the run directory go to stdout, the run
directory on the last line so scripts can capture it with ``tail -n 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import mean

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..config import RunConfig, ScenarioSelection
from ..loop import run as run_loop
from ..run import Event, ReadReport, RunStats, at_hard_exit, read_manifest, read_transcripts
from ..schema import Transcript

__all__ = ["run_with_progress", "progress_bar", "CountingBar", "run_events", "live", "print_list", "show_run",
           "summary_table"]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


def summary_table(stats: RunStats, run_dir: Path) -> Table:
    t = Table(title=f"run {run_dir.name}", show_header=False, box=None)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")  # piped output is 80 columns wide: wrap, never cut
    t.add_row("dialogues", str(stats.dialogues))
    t.add_row("turns", f"{stats.turns} (mean {stats.turns / stats.dialogues:.1f})" if stats.dialogues else "0")
    t.add_row("stop reasons", ", ".join(f"{k}={v}" for k, v in sorted(stats.reasons.items())) or "-")
    t.add_row("errors", str(stats.errors))
    t.add_row("wall time", f"{stats.wall_s:.1f} s")
    return t


def progress_bar(enabled: bool, counts: str = "turns {task.fields[turns]}  errors {task.fields[errors]}") -> Progress:
    """The one live bar of every long command, on stderr: label, bar, done/total, ``counts``
    (a format of the task's fields, or plain words), elapsed time.  Disabled, it shows nothing."""
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn(counts), TimeElapsedColumn(),
        console=err, disable=not enabled, transient=False,
    )


class CountingBar:
    """``progress_bar`` as a ``simloop.progress.ProgressSink``, for library calls that count
    (an index build's embedding, judge calls).  On a terminal only: piped, stderr stays as
    it was (a final bar line there would be new output for scripts that read it).  The
    bar appears with the first phase, so a command that never reaches one shows none.
    Use it inside ``live(bar.progress)``."""

    def __init__(self, enabled: bool | None = None):
        self.progress = progress_bar(err.is_terminal if enabled is None else enabled, counts="")
        self.task: TaskID | None = None

    def phase(self, label: str, total: int | None = None) -> None:
        if self.task is None:
            self.task = self.progress.add_task(label, total=total)
        else:  # a new phase counts from 0 and times itself
            self.progress.reset(self.task, total=total, description=label)

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.progress.update(self.task, advance=n)


def run_events(progress: Progress, todo: int | None) -> Callable[[Event], None]:
    """The engine's events on the dialogues bar (``run``, ``rehearse``): ``preparing:``
    phases while plugins warm up, then dialogues done, turns and errors."""
    task = progress.add_task("dialogues", total=todo, turns=0, errors=0)
    counters = {"turns": 0, "errors": 0}

    def on_event(ev: Event) -> None:
        if ev.kind == "preparing":  # warm-up: the bar waits, its label says what is loading
            progress.update(task, description=f"preparing: {ev.detail}")
        elif ev.kind == "ready":
            progress.update(task, description="dialogues")
            progress.reset(task, total=todo)  # the elapsed time counts dialogues only
        elif ev.kind == "stopping":
            progress.update(task, description=f"stopping ({ev.detail})")
            err.print(f"[yellow]{ev.detail}[/]: stopping; dialogues in flight are dropped and will re-run on "
                      "resume (press Ctrl-C again to exit at once)", soft_wrap=True)
        elif ev.kind == "turn":
            counters["turns"] += 1
            progress.update(task, turns=counters["turns"])
        elif ev.kind == "ended":
            counters["errors"] += ev.transcript is not None and ev.transcript.error is not None
            progress.update(task, advance=1, errors=counters["errors"])

    return on_event


@contextmanager
def live(progress: Progress) -> Iterator[Progress]:
    """The bar live for the block; a second Ctrl-C (a hard exit) still restores the terminal."""
    forget = at_hard_exit(lambda: _restore_terminal(progress))
    try:
        with progress:
            yield progress
    finally:
        forget()


def run_with_progress(cfg: RunConfig, resume: Path | None = None, retry_errors: bool = False,
                      llm_flags: tuple[str, ...] = ()) -> int:
    from ..run import execute, prepare_run
    from .outcome import finished_code, say_plain

    prep = prepare_run(cfg, resume=resume, retry_errors=retry_errors, llm_flags=llm_flags)
    for line in (prep.repaired or ReadReport()).repair_notes(prep.run_dir, prep.recorder.retried):
        say_plain(f"note: {line}")
    todo = prep.total - len(prep.done)
    if resume is not None:
        say_plain(f"resuming {prep.run_dir}: {len(prep.done)} recorded, {todo} to go")
    progress = progress_bar(cfg.progress)
    on_event = run_events(progress, todo)
    with live(progress):
        stats = run_loop(execute(prep, events=on_event))
    if resume is not None and todo == 0 and not stats.interrupted:
        out.print(f"nothing to do: {len(prep.done)} dialogues already recorded")
    else:
        out.print(summary_table(stats, prep.run_dir))
    if resume is not None:  # the table counts this resume's dialogues; the run's are in run.json
        whole = prep.recorder.manifest.counts  # what the recorder just wrote to run.json
        out.print(f"whole run: {whole.get('dialogues', 0)} dialogues, {whole.get('turns', 0)} turns, "
                  f"{whole.get('errors', 0)} errors")
    if stats.interrupted:
        err.print(f"[yellow]interrupted[/]: {prep.recorder.written} dialogues recorded; "
                  f"resume with: simloop run --resume {prep.run_dir}", soft_wrap=True)  # one line to copy
    code = 130 if stats.interrupted else finished_code(prep.run_dir, cfg.max_error_share, say_plain)
    print(prep.run_dir)
    return code


def _restore_terminal(progress: Progress) -> None:
    """Before a hard exit (a second Ctrl-C): stop the live bar and show the cursor again."""
    progress.stop()
    err.show_cursor(True)


DEFAULT_PERSONAS = ScenarioSelection.model_fields["personas_dir"].default  # what a run reads


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
        p.add_row(persona.id, str(len(persona.ptkb)), traits, "\n".join(f"{tp.id}: {tp.title}" for tp in persona.topics))
    out.print(p)
    return 0


def _personas_to_list(personas_dir: Path | None, topics: Path | None) -> list | None:
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
    t = Table(title=f"{len(ts)} dialogues")
    for col in ("dialogue", "turns", "stop", "by", "mean grade", "PTKB used", "calls"):
        t.add_column(col, overflow="fold")
    for tr in ts:
        grades = [x.user.grade for x in tr.turns if x.user.grade is not None]
        ptkb = sum(p.used for x in tr.turns for p in x.assistant.ptkb_provenance)
        t.add_row(tr.dialogue_id, str(len(tr.turns)), tr.stop.reason, tr.stop.by,
                  f"{mean(grades):.1f}" if grades else "-", str(ptkb), str(tr.usage.calls))
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
    from ..errors import BadInputError
    from ..files import check_run_dir

    manifest = read_manifest(check_run_dir(run_dir))
    report = ReadReport()
    ts = list(read_transcripts(run_dir, report, log_problems=False))  # said below, once, with what to do
    if dialogue is None:
        out.print(f"run {manifest.run_id}: {manifest.status}, assistant {manifest.assistant.name}, "
                  f"simulator {manifest.simulator.name}")
        out.print(_overview(ts))
    else:
        match = [t for t in ts if t.dialogue_id == dialogue]
        if not match:
            raise BadInputError(f"no dialogue {dialogue!r} in {run_dir} (see `simloop show {run_dir}`)")
        _dialogue(match[0])
    for note in report.notes(run_dir / "dialogues.jsonl"):  # a corrupt line is never skipped without a word
        err.print(f"simloop: warning: {note}; resume the run to move it to dialogues.rejected.jsonl",
                  style="yellow", markup=False, highlight=False, soft_wrap=True)
    return 0
