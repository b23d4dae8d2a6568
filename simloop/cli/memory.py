"""`simloop memory`: flags, progress bar, the result table, the run directory.

The work is in ``simloop.memorytest``: ``run`` (the runs), ``probes`` (scripts, the
scripted user, the LLM probe judge), ``facts`` (the fact catalogue and rules) and
``score``.  Imports are deferred to the handler so that building the CLI parser stays cheap.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import BadInputError
from ..loop import run as run_loop
from .args import parse_params
from .flags import RUN_FLAGS, add_flags, check_params_named, config_from_flags

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress
    from rich.table import Table

    from ..memorytest import MemoryResults, MemoryTest
    from ..run import Event

__all__ = ["add_commands", "cmd_memory"]

_DEFAULT_STRATEGIES = "full,summary,window,adaptive"
# The run-config flags `simloop memory` offers; the rest of its flags configure the test.
MEMORY_FLAGS = {dest: RUN_FLAGS[dest] for dest in (
    "personas", "persona", "base_url", "model", "rpm", "cache", "index", "concurrency", "timeout", "seed", "out",
    "run_id")}


T = TypeVar("T", str, int)


def _csv(text: str | None, flag: str, kind: type[T]) -> list[T] | None:
    """A comma-separated flag value, parsed here (not by argparse) so that a bad value is
    one error line and exit 2, like every other bad input."""
    if text is None:
        return None
    try:
        return [kind(x.strip()) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInputError(f"{flag} {text!r}: expected a comma-separated list of {kind.__name__}s") from None


def _params(pairs: list[str] | None) -> dict[str, Any]:
    return parse_params(pairs, "--assistant-param")


def _progress(test: MemoryTest, enabled: bool) -> tuple[Progress, Callable[[str, Event], None]]:
    """A turn-level bar over every strategy (dialogues are long; a dialogue bar would stall)."""
    from .console import progress_bar

    progress = progress_bar(enabled, counts="turns")
    task = progress.add_task(test.cfg.strategies[0], total=test.total_turns)
    planned = {p.dialogue_id: p.probe_turn for s in test.strategies for _, p in s.plans}

    def on_event(strategy: str, ev: Event) -> None:
        if ev.kind == "turn":
            progress.update(task, advance=1, description=strategy)
        elif ev.kind == "ended" and ev.transcript is not None:  # a dialogue cut short: skip its missing turns
            progress.update(task, advance=max(0, planned.get(ev.dialogue_id, 0) - len(ev.transcript.turns)))

    return progress, on_event


def _query_table(memory: MemoryResults) -> Table:
    """Where the fact was still in the probe's rewritten query: offline, the mechanism
    behind recall (an extractive answer can only use what retrieval was asked for)."""
    from rich.table import Table

    from ..evaluate import fmt

    dists = [str(d) for d in memory.distances]
    t = Table(title="fact kept in the probe's rewritten query", title_justify="left")
    for col in ("strategy", "probes per distance", *(f"kept @ {d}" for d in dists)):
        t.add_column(col)
    for name, s in memory.strategies.items():
        per = sorted(set(s.probes_by_distance.values()))
        t.add_row(name, "/".join(map(str, per)), *(fmt(s.query_recall_by_distance.get(d)) for d in dists))
    return t


def cmd_memory(a: argparse.Namespace) -> int:
    from ..evaluate import rich_memory
    from ..memorytest import MemoryTest, parse_config
    from .console import err, live, out

    check_params_named("assistant", bool(a.assistant_param), a.assistant is not None)
    cfg = parse_config({
        "strategies": _csv(a.strategies, "--strategies", str), "distances": _csv(a.distances, "--distances", int),
        "reveal_turn": a.reveal_turn, "facts": _csv(a.facts, "--facts", str),
        "facts_per_persona": a.facts_per_persona, "assistant": a.assistant,
        "assistant_params": _params(a.assistant_param), "memory_param": a.memory_param, "judge": a.judge,
    })
    test = MemoryTest(cfg, config_from_flags(a, MEMORY_FLAGS))
    if test.offline_summary:
        err.print("[yellow]note:[/] no LLM configured (--base-url/--model): the summary strategy uses the "
                  "offline extractive summariser")
    progress, on_event = _progress(test, a.progress is not False)
    with live(progress):
        memory = run_loop(test.run(on_event))
    if memory.strategies:  # none when the first strategy was interrupted
        out.print(rich_memory(test.run_id, memory))
    if any(p.rewritten_query for p in memory.probes):
        out.print(_query_table(memory))
    if memory.status == "interrupted":
        left_out = ", ".join(s.name for s in test.strategies if not s.finished)
        err.print(f"[yellow]interrupted[/]: memory.json covers the strategies that finished "
                  f"({', '.join(memory.strategies) or 'none'}); left out: {left_out}", soft_wrap=True)
    code = 130 if memory.status == "interrupted" else _llm_code(test.run_dir, memory)
    print(test.run_dir)
    return code


def _llm_code(run_dir: Path, memory: MemoryResults) -> int:
    """1 when every LLM call failed: the dialogues' (an LLM assistant, the summaries) and,
    with --judge, the probe judge's; memory.json then holds fallbacks' scores, not the model's."""
    from .outcome import LLMCalls, llm_calls, llm_failed_code, say_plain

    calls = llm_calls(run_dir) if run_dir.joinpath("dialogues.jsonl").exists() else LLMCalls()
    if calls.calls and not calls.all_failed:
        return 0
    for probe in memory.probes:
        if probe.scored_by == "judge" or probe.judge_error is not None:
            calls.add(probe.judge_error)
    return llm_failed_code(calls, "run simloop memory again", say_plain)


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="long-horizon memory stress test: probe recall vs distance per strategy")
    p.add_argument("--strategies",
                   help=f"memory strategies (default {_DEFAULT_STRATEGIES})")
    p.add_argument("--distances", help="turns between fact and probe (default 5,10,20,40)")
    p.add_argument("--reveal-turn", type=int, help="the turn that reveals the fact (default 2)")
    p.add_argument("--facts", help="only these fact ids (default: the whole catalogue)")
    p.add_argument("--facts-per-persona", type=int, help="facts probed per persona, one dialogue each (default 1)")
    add_flags(p, ["assistant", "assistant_param"])  # the assistant under test (default bm25_extractive)
    p.add_argument("--memory-param", metavar="NAME",
                   help="the assistant parameter that takes the strategy (default memory)")
    p.add_argument("--judge", action="store_true", help="score probes with the LLM judge instead of the rules")
    add_flags(p, [*MEMORY_FLAGS, "progress"])
    p.set_defaults(func=cmd_memory)
