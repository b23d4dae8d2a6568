"""The public Python API (DESIGN §13): run, arun, read_transcripts, evaluate.

    import simloop
    run = simloop.run("run.toml", concurrency=32)        # blocking
    run = await simloop.arun(config)                      # inside a running event loop (Jupyter)
    for t in simloop.read_transcripts(run.dir): ...
    summary = simloop.evaluate(run.dir, ptkb_qrels=...)   # what `simloop eval` does

The same library calls as the CLI, with the same validation and errors (``BadInputError``
before anything is written, ``SimloopError`` otherwise).  Imports are deferred to the
calls: ``import simloop`` loads this module, and must stay cheap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

from .loop import run as run_loop

if TYPE_CHECKING:
    from .config import RunConfig
    from .evaluate import RunSummary
    from .run import RunStats
    from .schema import RunManifest

__all__ = ["Run", "run", "arun", "evaluate"]

T = TypeVar("T")
ConfigLike = Union["RunConfig", Mapping[str, Any], str, Path, None]


@dataclass(frozen=True)
class Run:
    """A run that ended (finished or interrupted): its directory, its ``run.json`` and
    what the engine counted.  ``simloop.read_transcripts(run.dir)`` gives its dialogues."""

    dir: Path
    manifest: RunManifest
    stats: RunStats


def _config(config: ConfigLike, overrides: Mapping[str, Any]) -> RunConfig:
    """A RunConfig from a config object, a mapping, a TOML path or nothing (the demo), with
    keyword overrides on top (a dict value merges into its section: ``retrieval={"k": 20}``)."""
    from .config import RunConfig, apply_overrides, load_config, validate_config

    if isinstance(config, RunConfig):
        return apply_overrides(config, overrides, "overrides") if overrides else config
    if isinstance(config, Mapping):
        return apply_overrides(validate_config(config, "config"), overrides, "overrides")
    return load_config(Path(config) if config is not None else None, overrides)


async def arun(config: ConfigLike = None, /, *, resume: str | Path | None = None, retry_errors: bool = False,
               **overrides: Any) -> Run:
    """Run dialogues and record them; await it inside a running event loop (Jupyter, servers).

    ``config`` is a ``RunConfig``, a mapping, a TOML file or None (the offline demo);
    ``overrides`` are RunConfig fields.  ``resume`` finishes an interrupted run directory
    with the config it started with (only ``concurrency`` may change); with ``retry_errors``
    the dialogues that ended in an infrastructure error (llm, retrieval, engine) run again.
    """
    from .run import execute, prepare_run, read_manifest, resume_config
    from .search import prepare_environment

    prepare_environment()  # before any LLM client of this run exists (see search/jvm.py)
    if resume is not None:
        speed = {k: v for k, v in overrides.items() if k == "concurrency"}
        if config is not None or len(speed) != len(overrides):
            raise TypeError("resume= takes only concurrency=: a resumed run keeps the config it started with")
        cfg = _config(resume_config(Path(resume)), speed)
    else:
        cfg = _config(config, overrides)
    # Validation, plugin construction and the run directory touch the disk: off the loop.
    prep = await asyncio.to_thread(prepare_run, cfg, Path(resume) if resume is not None else None,
                                   retry_errors=retry_errors)
    stats = await execute(prep)
    return Run(prep.run_dir, read_manifest(prep.run_dir), stats)


def run(config: ConfigLike = None, /, *, resume: str | Path | None = None, retry_errors: bool = False,
        **overrides: Any) -> Run:
    """``arun`` for scripts: blocks until the run ends.  Called where an event loop is
    already running, it runs the dialogues on a loop of its own in a helper thread."""
    return _blocking(lambda: run_loop(arun(config, resume=resume, retry_errors=retry_errors, **overrides)))


def evaluate(run_dir: str | Path, *, ptkb_qrels: str | Path | None = None, qrels: str | Path | None = None,
             judge: bool = False, judge_base_url: str | None = None, judge_model: str | None = None,
             judge_concurrency: int = 8) -> RunSummary:
    """Score a run and write ``scores.jsonl`` and ``summary.json`` into it, exactly as
    ``simloop eval`` does; returns the summary."""
    from .evaluate import EvalOptions, check_options, evaluate_run, write_evaluation

    opts = EvalOptions(qrels=_path(qrels), ptkb_qrels=_path(ptkb_qrels), judge=judge, judge_base_url=judge_base_url,
                       judge_model=judge_model, judge_concurrency=judge_concurrency)
    check_options(opts)
    ev = _blocking(lambda: evaluate_run(Path(run_dir), opts))
    write_evaluation(Path(run_dir), ev)
    return ev.summary


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


def _blocking(work: Callable[[], T]) -> T:
    """``work()`` (which runs an event loop of its own) here, or in a helper thread when
    this thread already runs a loop (asyncio allows one loop per thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="simloop-api") as pool:
        return pool.submit(work).result()
