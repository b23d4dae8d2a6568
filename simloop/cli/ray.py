"""`simloop run --backend ray`: the Ray backend (distributed/) with the CLI's bar and summary.

The driver runs and records; this prints what a local run prints: progress on stderr,
the summary table, and the run directory on the last line of stdout.
"""

from __future__ import annotations

from pathlib import Path

from ..config import RunConfig
from .console import err, out, progress_bar, summary_table

__all__ = ["run_ray"]


def run_ray(cfg: RunConfig, resume: Path | None = None, retry_errors: bool = False,
            llm_flags: tuple[str, ...] = ()) -> int:
    """Run over Ray; returns the exit code (0 finished, 130 interrupted, 1 failed or too many errors)."""
    from ..distributed import run_ray as drive
    from .outcome import finished_code, say_plain

    done = drive(cfg, resume=resume, retry_errors=retry_errors, llm_flags=llm_flags, progress=progress_bar(cfg.progress),
                 notice=lambda line: err.print(line, style="yellow", markup=False))
    if done.stats is not None:
        out.print(summary_table(done.stats, done.run_dir))
    if done.status != "finished":
        why = f"gave up after {done.gave_up}" if done.gave_up else "interrupted"
        err.print(f"[yellow]{why}[/]: {done.recorded} dialogues recorded; "
                  f"resume with: simloop run --resume {done.run_dir}", soft_wrap=True)  # one line to copy
    code = {"finished": 0, "interrupted": 130}.get(done.status, 1)
    if code == 0:
        code = finished_code(done.run_dir, cfg.max_error_share, say_plain)
    print(done.run_dir)
    return code
