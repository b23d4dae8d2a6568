"""Terminal output with rich, shared by the commands: the two consoles, the live progress
bar (and ``CountingBar``, the bar as a ``simloop.progress`` sink), the engine's events on
it, and a run's summary table.

Progress and logs go to stderr; tables and the run directory go to stdout, the run
directory on the last line so scripts can capture it with ``tail -n 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..run import at_hard_exit

if TYPE_CHECKING:
    from ..run import Event, RunStats

__all__ = ["out", "err", "progress_bar", "CountingBar", "run_events", "live", "summary_table", "print_whole"]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


def print_whole(renderable: RenderableType) -> None:
    """Print on stdout at the width ``renderable`` needs when that is more than the
    terminal's: rich would otherwise cut or drop the cells of no-wrap columns (ids, which
    must stay whole to be copied); the terminal then wraps the long lines itself."""
    wide = Measurement.get(out, out.options.update(max_width=1 << 16), renderable).maximum
    if wide <= out.width:
        out.print(renderable)
    else:
        Console(file=out.file, width=wide, highlight=False, soft_wrap=True, force_terminal=out.is_terminal,
                no_color=out.no_color).print(renderable)


def summary_table(stats: RunStats, run_dir: Path) -> Table:
    """What a run (or this resume of it) did: dialogues, turns, stop reasons, errors, wall time."""
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

    def __init__(self, enabled: bool | None = None) -> None:
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
        elif ev.kind == "halted":  # the reason is said once the run ends (cli/run.py)
            progress.update(task, description="finishing (no new dialogues)")
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


def _restore_terminal(progress: Progress) -> None:
    """Before a hard exit (a second Ctrl-C): stop the live bar and show the cursor again."""
    progress.stop()
    err.show_cursor(True)
