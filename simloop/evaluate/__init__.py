"""Evaluation of run directories: statistics, PTKB and passage provenance metrics, the
LLM judge, summary/scores files and the HTML report (``simloop eval`` / ``report``).

Nothing is imported here, so ``import simloop.evaluate.stats`` stays light (no
matplotlib, no ir_measures) and importing the package has no side effects.
"""
