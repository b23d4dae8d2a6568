"""`simloop validate [CONFIG.toml] [--simulator NAME] [--base-url URL] [--model NAME] [--sample N] [--out FILE]`
: the validity card of a simulator configuration.

Prints the card (criterion, value, 95% interval, n, threshold, verdict) and a closing line
per role, writes ``validity.json`` (or FILE) and keeps a copy under the configuration's
digest in the cache, where ``simloop run`` finds it.  Exit 0 whenever it measured, whatever
the verdicts; 2 for bad input (no iKAT data, a bad flag), one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import RunConfig
from ..errors import BadInputError
from ..loop import run as run_loop
from .flags import add_flags, config_from_flags

if TYPE_CHECKING:
    from rich.table import Table

    from ..validity import Criterion, ValidityCard

__all__ = ["add_commands", "cmd_validate", "card_table"]

VALIDATE_FLAGS = {"simulator": "simulator.name", "simulator_param": "simulator.params",
                  "personas": "scenarios.personas_dir", "base_url": "llm.*.base_url", "model": "llm.*.model",
                  "rpm": "llm.default.rpm", "cache": "llm.cache",
                  "concurrency": "concurrency", "max_turns": "max_turns", "timeout": "dialogue_timeout_s"}
_STYLE = {"pass": "green", "fail": "red", "not measured": "yellow", "info": "dim"}


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="measure whether a simulator configuration can be trusted (validity card)")
    p.add_argument("config", nargs="?", type=Path, help="a run config TOML file (its simulator and llm sections)")
    add_flags(p, VALIDATE_FLAGS)
    p.add_argument("--sample", type=int, metavar="N",
                   help="at most N items per criterion, drawn with a fixed seed (default: every item for a simulator "
                        "without an LLM; 2 for one that calls an LLM, which takes many minutes on a small local model)")
    p.add_argument("--out", default="validity.json", metavar="FILE", help="where to write the card (validity.json)")
    p.add_argument("--data", type=Path, metavar="DIR",
                   help="the iKAT data folder (default $SIMLOOP_IKAT_DATA, else shared/data/ikat beside this folder "
                        "or a parent)")
    p.set_defaults(func=cmd_validate)


def cmd_validate(a: argparse.Namespace) -> int:
    from ..validity import LLM_SAMPLE, find_data, store_card, validate
    from .console import err, out

    if a.sample is not None and a.sample < 1:
        raise BadInputError(f"--sample {a.sample}: give a number of items of at least 1")
    if not str(a.out).strip():
        raise BadInputError("--out '': an empty path; give a file for the card")
    target = Path(a.out)
    if target.is_dir():
        raise BadInputError(f"--out {target}: a folder; give a file for the card (e.g. {target / 'validity.json'})")
    cfg = config_from_flags(a, VALIDATE_FLAGS, config=a.config)
    data = find_data(a.data)
    personas = Path(cfg.scenarios.personas_dir)
    if not personas.is_dir():
        raise BadInputError(f"{personas}: no personas folder; give one with --personas DIR")
    sample = a.sample
    if sample is None and _calls_llm(cfg):
        sample = LLM_SAMPLE
        err.print(f"an LLM simulator: measuring a sample of {sample} per criterion (--sample N to change)")
    card = run_loop(validate(cfg, data, personas=personas, sample=sample,
                             info=lambda line: err.print(line, style="dim", markup=False, emoji=False)))
    card, cached = store_card(card, target)
    out.print(card_table(card), width=max(out.width, 132))  # piped output is 80 wide: the table needs more
    for note in card.notes:
        out.print(f"note: {note}", markup=False, emoji=False)
    out.print(card.summary.line, markup=False, emoji=False)
    out.print(f"card: {target} (and {cached}, where `simloop run` finds it)", markup=False)
    return 0


def _calls_llm(cfg: RunConfig) -> bool:
    """Whether the configured simulator calls an LLM (built once, cheaply: no model is loaded)."""
    from ..run import Context, llm_roles, load_plugin

    return bool(llm_roles(load_plugin("simulator", cfg.simulator.name, cfg.simulator.params, Context(cfg))))


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _threshold(c: Criterion) -> str:
    t, d = c.threshold, c.direction
    if t is None:
        return "-"
    if isinstance(t, tuple):
        return f"{_num(t[0])}..{_num(t[1])}"
    return f"{'≥' if d == 'higher' else '≤'} {_num(t)}"


def card_table(card: ValidityCard) -> Table:
    """The card as a table: criterion, value, 95% CI, n, threshold, verdict."""
    from rich.table import Table

    sim = card.simulator
    models = ", ".join(f"{r}={v['model']}@{v['base_url']}" for r, v in sim.llm.items())
    title = f"validity of simulator {sim.name} ({sim.digest}){' ' + models if models else ''}"
    t = Table(title=title, title_justify="left")
    for col, kw in (("criterion", {"no_wrap": True}), ("value", {"justify": "right"}), ("95% CI", {}),
                    ("n", {"justify": "right"}), ("threshold", {}), ("verdict", {})):
        t.add_column(col, **kw)
    for c in card.criteria:
        ci = f"{_num(c.ci[0])}..{_num(c.ci[1])}" if c.ci else "-"
        t.add_row(c.name, _num(c.value), ci, f"{c.n} {c.unit}", _threshold(c),
                  f"[{_STYLE[c.verdict]}]{c.verdict}[/]")
    return t
