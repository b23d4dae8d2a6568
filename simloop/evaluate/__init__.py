"""Evaluation of run directories: statistics, PTKB and passage provenance metrics, the
LLM judge, summary/scores files and the HTML report (``simloop eval`` / ``report``).

Nothing is imported here, so ``import simloop.evaluate.stats`` stays light (no
matplotlib, no ir_measures) and importing the package has no side effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .export import FORMATS, export_run
    from .export_job import RunTag
    from .export_select import ExportFilter
    from .formats import DialogueScores, RunSummary
    from .outliers import rich_outliers
    from .provenance import ptkb_scores, read_ptkb_qrels, turn_key
    from .report import load_views, scenario_warning, validity_line, write_report
    from .summary import EvalOptions, check_options, evaluate_run, write_evaluation
    from .tables import fmt, rich_compare, rich_memory, rich_reference, rich_summary
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "export": ("FORMATS", "export_run",),
        "export_job": ("RunTag",),
        "export_select": ("ExportFilter",),
        "formats": ("DialogueScores", "RunSummary",),
        "provenance": ("ptkb_scores", "read_ptkb_qrels", "turn_key",),
        "report": ("load_views", "scenario_warning", "validity_line", "write_report",),
        "summary": ("EvalOptions", "check_options", "evaluate_run", "write_evaluation",),
        "tables": ("fmt", "rich_compare", "rich_memory", "rich_reference", "rich_summary",),
        "outliers": ("rich_outliers",),
    })

__all__ = [
    "DialogueScores", "EvalOptions", "ExportFilter", "FORMATS", "RunSummary", "RunTag", "check_options",
    "evaluate_run", "export_run", "fmt", "load_views", "ptkb_scores", "read_ptkb_qrels", "rich_compare",
    "rich_memory", "rich_outliers", "rich_reference", "rich_summary", "scenario_warning", "turn_key",
    "validity_line", "write_evaluation", "write_report",
]
