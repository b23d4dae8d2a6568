"""How a run ended, as an exit code and a few lines, for local and Ray runs alike.

Exit 1 when more than ``max_error_share`` of the run's dialogues (all of them, over every
resume: the counts in ``run.json``), or every one of them, ended in an error, naming the commonest error and how
to retry; 0 otherwise.  An interrupted run is 130 whatever its errors.  Exit 1 as well when
a dialogue line could not be written (a full disk): the run is resumable, and says how.

Exit 1 too when every LLM call a command made failed (``LLMCalls``), even where no
dialogue ended in an error (a memory strategy that fell back to its extractive summary,
an assistant part that fell back to its offline twin): nothing a model should have
written was written, so the output measures the fallbacks, not the model.  One line
names the commonest error and how to retry.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..run import INFRASTRUCTURE, ReadReport, read_manifest, read_transcripts
from ..schema import Stage

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..run import PreparedRun, Recorder, RunStats

__all__ = ["drive", "finished_code", "say_plain", "write_failed", "LLMCalls", "llm_calls", "llm_failed_code",
           "llm_run_code", "what_to_check"]


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


@dataclass
class LLMCalls:
    """How many LLM calls a command made and how many failed, with the errors counted."""

    calls: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)

    def add(self, error: str | None) -> None:
        self.calls += 1
        if error is not None:
            self.failed += 1
            self.errors[(error.splitlines() or [""])[0][:200]] += 1

    def add_stages(self, stages: Iterable[Stage]) -> None:
        for stage in stages:
            if stage.is_llm_call():
                self.add(stage.error)

    @property
    def all_failed(self) -> bool:
        return self.calls > 0 and self.failed == self.calls


def llm_calls(run_dir: Path) -> LLMCalls:
    """The LLM calls of a run's dialogues (every stage that asked a model, those of a
    failed step included); reading stops at the first call that succeeded, which is all
    ``llm_failed_code`` needs to know."""
    calls = LLMCalls()
    for t in read_transcripts(run_dir, ReadReport(), log_problems=False):
        calls.add_stages(t.all_stages())
        if calls.failed < calls.calls:
            break
    return calls


# Errors of a model that answered, but not in the form asked: the endpoint is fine.
_MODEL_ERRORS = ("StructuredOutputError", "InvalidOutputError", "EmptyCompletionError")


def what_to_check(kind: str, endpoint: str) -> str:
    """The advice for the commonest error ``kind``: the model's answers when it answered
    badly (a small model often does), else the endpoint (``endpoint``: its flags)."""
    if kind.startswith(_MODEL_ERRORS):
        return "the server answered, but the model's answers did not fit what was asked: try a stronger model"
    return f"check the endpoint ({endpoint}, the API key variable)"


def llm_failed_code(calls: LLMCalls, retry: str, say: Callable[[str], None], *, what: str = "LLM",
                    flags: str = "--base-url/--model") -> int:
    """1, with one line naming the commonest error and ``retry`` (how to try again), when
    every one of ``calls`` failed; else 0.  ``what`` names the calls ("LLM", "judge") and
    ``flags`` the options that point at their endpoint."""
    if not calls.all_failed:
        return 0
    (kind, n), = calls.errors.most_common(1)
    prefix = "" if what == "LLM" else f"{what}: "
    say(f"{prefix}every one of the {calls.calls} {what} calls failed; commonest ({n}x): {kind}; "
        f"{what_to_check(kind, flags)}, then {retry}")
    return 1


def llm_run_code(run_dir: Path, say: Callable[[str], None], command: str = "simloop run") -> int:
    """``llm_failed_code`` for a run directory: the retry is a resume when some dialogues
    ended in an error (``--retry-errors`` re-runs those), else the command again."""
    errors = read_manifest(run_dir).counts.get("errors", 0)
    retry = (f"retry with: simloop run --resume {run_dir} --retry-errors" if errors and command == "simloop run"
             else f"run {command} again")
    return llm_failed_code(llm_calls(run_dir), retry, say)


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


def drive(prep: PreparedRun, progress: Progress, total: int | None, resume: str) -> RunStats | int:
    """Run a prepared run's dialogues under ``progress`` (a disabled bar shows nothing): its stats, or
    ``write_failed``'s exit code when a write of the run's own files failed (``resume`` is the
    command that finishes it).  Any other OSError is not the run's: it propagates."""
    from ..loop import run as run_loop
    from ..run import execute
    from .console import live, run_events

    try:
        with live(progress):
            return run_loop(execute(prep, events=run_events(progress, total)))
    except OSError:
        if prep.recorder.write_error is None:  # not the run's own files: main() says it
            raise
        return write_failed(prep.recorder, resume)
