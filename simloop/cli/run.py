"""`simloop run`: flags and config, then the run on this machine or over
Ray, with the progress bar on stderr, the summary table, how it ended, and the run
directory on the last line of stdout.

The work is in ``simloop.run`` (validate, run directory, dialogues) and, for
``--backend ray``, ``simloop.distributed``; they and the console are imported when the
command runs, so that building the parser (every command's start) stays cheap.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import RunConfig
from ..errors import BadInputError
from .flags import RUN_FLAGS, add_flags, check_sources_named, config_from_flags, given_llm_flags, resumed_config

__all__ = ["add_commands", "cmd_run", "run_local", "run_ray"]


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run dialogues (no arguments = the offline demo)")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file")
    add_flags(p, RUN_FLAGS)
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="finish an interrupted run (same config)")
    p.add_argument("--retry-errors", action="store_true",
                   help="with --resume: re-run dialogues that ended in an infrastructure error "
                        "(llm, retrieval, engine)")
    p.set_defaults(func=cmd_run)


def _load_run_config(a: argparse.Namespace) -> RunConfig:
    if a.resume is None:
        if a.retry_errors:
            raise BadInputError("--retry-errors goes with --resume RUN_DIR")
        return config_from_flags(a, RUN_FLAGS, config=a.config)
    from ..run import resume_config

    # A resumed run keeps its config: other flags must agree with it (exit 2 naming the fields).
    return resumed_config(a, RUN_FLAGS, a.resume, resume_config(a.resume), config=a.config)


def cmd_run(a: argparse.Namespace) -> int:
    cfg = _load_run_config(a)
    llm_flags: tuple[str, ...] = ()
    if a.resume is None:  # a resumed run's flags equal its own: checked when it started
        check_sources_named(a, cfg)
        llm_flags = given_llm_flags(a)
    run = run_ray if cfg.backend == "ray" else run_local
    return run(cfg, resume=a.resume, retry_errors=a.retry_errors, llm_flags=llm_flags)


def run_local(cfg: RunConfig, resume: Path | None = None, retry_errors: bool = False,
              llm_flags: tuple[str, ...] = ()) -> int:
    """Run on this machine; returns the exit code (0 finished, 130 interrupted, 1 too many errors)."""
    from ..run import ReadReport, prepare_run
    from .console import err, out, progress_bar, summary_table
    from .outcome import drive, finished_code, llm_run_code, say_plain

    prep = prepare_run(cfg, resume=resume, retry_errors=retry_errors, llm_flags=llm_flags)
    for line in (prep.repaired or ReadReport()).repair_notes(prep.run_dir, prep.recorder.retried):
        say_plain(f"note: {line}")
    todo = None if prep.total is None else prep.total - len(prep.done)  # None: a remote simulator's choice
    if resume is not None:
        say_plain(f"resuming {prep.run_dir}: {len(prep.done)} recorded, {todo} to go")
    progress = progress_bar(cfg.progress)
    stats = drive(prep, progress, todo, f"simloop run --resume {prep.run_dir}")
    if isinstance(stats, int):
        return stats
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
    if stats.halted and not stats.interrupted:  # scenarios left unstarted: the run did not do its work
        say_plain(f"stopped starting dialogues: {stats.halted}; fix the cause, then run the rest with: "
                  f"simloop run --resume {prep.run_dir} --retry-errors")
        code = code or 1
    if code == 0:
        code = llm_run_code(prep.run_dir, say_plain)
    print(prep.run_dir)
    return code


def run_ray(cfg: RunConfig, resume: Path | None = None, retry_errors: bool = False,
            llm_flags: tuple[str, ...] = ()) -> int:
    """Run over Ray (the driver runs and records; this prints what a local run prints);
    returns the exit code (0 finished, 130 interrupted, 1 failed or too many errors)."""
    from ..distributed import run_ray as drive
    from .console import err, out, progress_bar, summary_table
    from .outcome import finished_code, llm_run_code, say_plain

    done = drive(cfg, resume=resume, retry_errors=retry_errors, llm_flags=llm_flags,
                 progress=progress_bar(cfg.progress), notice=lambda line: err.print(line, style="yellow", markup=False))
    if done.stats is not None:
        out.print(summary_table(done.stats, done.run_dir))
    if done.status != "finished":
        why = f"gave up after {done.gave_up}" if done.gave_up else "interrupted"
        err.print(f"[yellow]{why}[/]: {done.recorded} dialogues recorded; "
                  f"resume with: simloop run --resume {done.run_dir}", soft_wrap=True)  # one line to copy
    code = {"finished": 0, "interrupted": 130}.get(done.status, 1)
    if code == 0:
        code = finished_code(done.run_dir, cfg.max_error_share, say_plain)
    if code == 0:
        code = llm_run_code(done.run_dir, say_plain)
    print(done.run_dir)
    return code
