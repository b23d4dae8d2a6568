"""The validity subpackage: ``simloop validate``'s measurement and card."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from .answers import LabelledSentence, judged_sentences, load_labels, off_cut, score_run, sentence_support
    from .card import Criterion, SimulatorConfig, ValidityCard, criterion, read_card, store_card, write_card
    from .evidence import EvCase, EvTurn, build_evidence, earlier_cases, earlier_questions, load_turns, passage_pool
    from .grading import EVIDENCE, GRADER_TARGETS, measure_grader
    from .labelled import base_topic, only_asks
    from .measure import LLM_SAMPLE, find_data, simulator_config, validate
    from .speaking import E2E, measure_adversaries, measure_voice, sample_topics
    from .stats import auc, bootstrap_ci, pass_rate
    from .voice import REAL_FILES, real_utterances, run_utterances, voice_statistics
else:
    from ..lazy import lazy_face as _lazy_face

    __getattr__, __dir__ = _lazy_face(__name__, {
        "card": ("Criterion", "SimulatorConfig", "ValidityCard", "criterion", "read_card", "store_card", "write_card",),
        "measure": ("LLM_SAMPLE", "find_data", "validate", "simulator_config",),
        "stats": ("auc", "bootstrap_ci", "pass_rate",),
        "grading": ("measure_grader", "GRADER_TARGETS", "EVIDENCE",),
        "speaking": ("measure_voice", "measure_adversaries", "E2E", "sample_topics",),
        "evidence": ("EvTurn", "EvCase", "load_turns", "passage_pool", "earlier_cases", "earlier_questions",
                     "build_evidence",),
        "voice": ("real_utterances", "run_utterances", "voice_statistics", "REAL_FILES",),
        "labelled": ("only_asks", "base_topic",),
        "answers": ("LabelledSentence", "load_labels", "sentence_support", "judged_sentences", "off_cut", "score_run",),
    })

__all__ = [
    "Criterion", "E2E", "EVIDENCE", "EvCase", "EvTurn", "GRADER_TARGETS", "LLM_SAMPLE", "LabelledSentence",
    "REAL_FILES", "SimulatorConfig", "ValidityCard", "auc", "base_topic", "bootstrap_ci", "build_evidence",
    "criterion", "earlier_cases", "earlier_questions", "find_data", "judged_sentences", "load_labels", "load_turns",
    "measure_adversaries", "measure_grader", "measure_voice", "off_cut", "only_asks", "pass_rate", "passage_pool",
    "read_card", "real_utterances", "run_utterances", "sample_topics", "score_run", "sentence_support",
    "simulator_config", "store_card", "validate", "voice_statistics", "write_card",
]
