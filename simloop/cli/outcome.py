"""How a run ended, as an exit code and a few lines (DESIGN §12), for local and Ray runs alike.

Exit 1 when more than ``max_error_share`` of the run's dialogues (all of them, over every
resume: the counts in ``run.json``), or every one of them, ended in an error, naming the commonest error and how
to retry; 0 otherwise.  An interrupted run is 130 whatever its errors.  Exit 1 as well when
a dialogue line could not be written (a full disk): the run is resumable, and says how.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..run import INFRASTRUCTURE, ReadReport, read_manifest, read_transcripts

if TYPE_CHECKING:
    from ..run import Recorder

__all__ = ["finished_code", "say_plain", "write_failed"]


def say_plain(line: str) -> None:
    """One unwrapped line on stderr: commands in it must stay copy-pastable."""
    print(line, file=sys.stderr, flush=True)


def _commonest(run_dir: Path) -> tuple[str, int, bool]:
    """(commonest error "source: Type: message", its count, any infrastructure error?)."""
    kinds: Counter[str] = Counter()
    infra = False
    for t in read_transcripts(run_dir, ReadReport()):
        if t.error is not None:
            first = (t.error.message.splitlines() or [""])[0][:160]
            kinds[f"{t.error.source or 'unknown'}: {t.error.type}: {first}"] += 1
            infra = infra or t.error.source in INFRASTRUCTURE
    (kind, n), = kinds.most_common(1) or [("none", 0)]
    return kind, n, infra


def finished_code(run_dir: Path, max_error_share: float, say: Callable[[str], None]) -> int:
    """0, or 1 (with what went wrong said through ``say``) for a run that is not interrupted."""
    counts = read_manifest(run_dir).counts
    dialogues, errors = counts.get("dialogues", 0), counts.get("errors", 0)
    every = dialogues > 0 and errors == dialogues  # 1 even at --max-error-share 1: nothing came out
    if dialogues == 0 or (errors / dialogues <= max_error_share and not every):
        return 0
    kind, n, infra = _commonest(run_dir)
    share = "every one" if every else f"more than {max_error_share:.0%}"
    say(f"{errors} of {dialogues} dialogues ended in an error ({share}); commonest ({n}x): {kind}")
    if infra:
        say(f"fix the cause, then retry them with: simloop run --resume {run_dir} --retry-errors")
    else:
        say(f"the errors come from the plugins, not the infrastructure; see: simloop show {run_dir}")
    return 1


def write_failed(recorder: Recorder, resume: str) -> int:
    """A dialogue line that could not be written stopped the run (``recorder.write_error``):
    one line with the file, the OS's reason, what is kept and ``resume``, the command that
    finishes the run; exit 1 (the input was fine).  The run directory stays the last line
    of stdout, as after any run."""
    exc = recorder.write_error
    if exc is None:
        raise ValueError("write_failed needs a recorder whose write failed")
    state = ("run.json could not be updated either (it still says running)" if recorder.manifest_error
             else "run.json says interrupted")
    say_plain(f"simloop: cannot write {exc.filename}: {exc.strerror or exc}; {recorder.written} dialogues are "
              f"recorded, {state}; make room, then finish it with: {resume}")
    print(recorder.dir.path)
    return 1
