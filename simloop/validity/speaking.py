"""Voice and adversary criteria: dialogues of the configured simulator, measured.

Voice: the simulator talks to the fixed offline assistant over the demo personas and over
``personas from-ikat`` personas of the 2023 test and 2024 test topic files; its utterances
are compared with the real iKAT users (voice.py; the ``from-ikat`` sets against the real
users of that same file).  Adversaries: it talks to the project's adversarial assistants
(``fakes.adversaries``: a parrot, an off-topic answerer, an assistant that only asks, the
genuine answers negated) and to ``bm25_extractive``; the share of dialogues that end
``user_satisfied`` is the figure.  Intervals are bootstrapped over dialogues.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..config import RunConfig
from .card import Criterion, Direction, criterion
from .dialogues import run_dialogues
from .stats import RESAMPLES, bootstrap_ci
from .voice import IKAT_SETS, REAL_FILES, Utterance, real_utterances, run_utterances, satisfied, statistic, statistics

__all__ = ["E2E", "VOICE_TARGETS", "IKAT_VERBATIM_TARGET", "Findings", "measure_voice", "measure_adversaries",
           "sample_topics"]

# (assistant, figure, target, direction, meaning)
E2E: list[tuple[str, str, float, Direction, str]] = [
    ("simloop.fakes.adversaries:Parrot", "grader_e2e_parrot_satisfied", 0.05, "lower",
     "dialogues a parrot (repeats the question) satisfies"),
    ("simloop.fakes.adversaries:OffTopic", "grader_e2e_offtopic_satisfied", 0.05, "lower",
     "dialogues an off-topic answerer satisfies"),
    ("simloop.fakes.adversaries:Asker", "grader_e2e_asker_satisfied", 0.05, "lower",
     "dialogues an assistant that only asks back satisfies"),
    ("bm25_extractive", "grader_e2e_bm25_extractive_satisfied", 0.50, "higher",
     "dialogues the genuine extractive assistant satisfies"),
    ("simloop.fakes.adversaries:Negated", "grader_e2e_negated_satisfied", 0.10, "lower",
     "dialogues the genuine answers negated satisfy"),
]
# statistic -> (threshold, direction, meaning); "within" ±30% of the real mean is filled in per set
VOICE_TARGETS: dict[str, tuple[Any, Direction, str]] = {
    "words_per_utterance": (None, "within", "words per utterance, within ±30% of the real users' mean"),
    "distinct2": (0.55, "higher", "distinct word bigrams at 200 utterances (real 0.66-0.70)"),
    "verbatim_rubric_share": (0.20, "lower", "utterances that repeat their rubric question word for word"),
    "backreference_share": (0.10, "higher", "utterances that lead with it/that/this/they/those (real 0.17)"),
    "non_question_share": ((0.10, 0.40), "within", "utterances with no question mark (real 0.27)"),
    "top_utterance_share": (0.01, "lower", "share of the most frequent utterance"),
}
IKAT_STATS = ("words_per_utterance", "distinct2", "verbatim_rubric_share")
IKAT_VERBATIM_TARGET = 0.25


@dataclass
class Findings:
    criteria: list[Criterion]
    details: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def sample_topics(personas: Path, n: int, seed: int = 11) -> list[str]:
    """A seeded sample of ``n`` topic ids of a personas folder, the same for every configuration."""
    from ..inputs import load_personas

    ids = sorted({t.id for p in load_personas(personas) for t in p.topics})
    return sorted(random.Random(f"{seed}|topics").sample(ids, min(n, len(ids))))


# Statistics a repeated dialogue distorts (a copy adds no new bigram, and repeats its top
# utterance): their bootstrap draws count each drawn dialogue once.
_ONCE = frozenset({"distinct2", "distinct2_whole", "top_utterance_share"})


def _pooled_statistic(name: str, dialogues: list[list[Utterance]]) -> float | None:
    if name in _ONCE:
        dialogues = list({id(d): d for d in dialogues}.values())
    return statistic(name, [u for d in dialogues for u in d])


def _voice_criteria(prefix: str, per_dialogue: list[list[Utterance]], real_mean: float, names: Sequence[str],
                    verbatim: float, resamples: int) -> list[Criterion]:
    pooled = [u for d in per_dialogue for u in d]
    out = []
    for stat in names:
        threshold, direction, meaning = VOICE_TARGETS[stat]
        if stat == "words_per_utterance":
            threshold = (round(0.7 * real_mean, 3), round(1.3 * real_mean, 3))
        if stat == "verbatim_rubric_share":
            threshold = verbatim
        ci = bootstrap_ci(per_dialogue, partial(_pooled_statistic, stat), resamples=resamples,
                          seed=f"{prefix}_{stat}")
        out.append(criterion(f"{prefix}_{stat}", "voice", statistic(stat, pooled), ci, len(per_dialogue),
                             "dialogues", threshold, direction, meaning))
    return out


async def measure_voice(cfg: RunConfig, data: Path, tmp: Path, *, personas: Path, repeat: int = 1,
                        limit: int | None = None, topics: Sequence[str] = (), ikat_limit: int | None = None,
                        ikat_sample: int | None = None, details: bool = False, resamples: int = RESAMPLES,
                        info: Callable[[str], None] = lambda _: None) -> Findings:
    """The voice criteria: the demo personas (``topics``/``repeat``/``limit`` select the
    dialogues) and the ``from-ikat`` personas of the report files (``ikat_sample`` topics
    drawn, or the first ``ikat_limit``; ``details``: the 2023 train personas too, no figure)."""
    from ..inputs import personas_from_ikat, write_personas

    real_all = real_utterances(data)
    real = statistics(real_all)
    run_dir = await run_dialogues(cfg, tmp, "voice", personas=personas, topic_ids=topics, repeat=repeat, limit=limit)
    demo_per, dialogues = run_utterances(run_dir, personas)
    demo = statistics([u for d in demo_per for u in d])
    criteria = _voice_criteria("voice", demo_per, real["words_per_utterance"], list(VOICE_TARGETS), 0.20, resamples)
    info(f"voice: {len(dialogues)} demo dialogues, {demo['utterances']} utterances vs {real['utterances']} real")
    ikat: dict[str, Any] = {}
    files = [data / f for f in REAL_FILES]
    for name, (prefix, topic_file) in IKAT_SETS.items():
        if prefix is None and not details:
            continue  # the tuning set is for the bench's record
        folder = tmp / f"personas-{name}"
        write_personas(personas_from_ikat(data / topic_file), folder, source=Path(topic_file).name)
        chosen = sample_topics(folder, ikat_sample) if ikat_sample else []
        ikat_run = await run_dialogues(cfg, tmp, name, personas=folder, topic_ids=chosen, limit=ikat_limit)
        per, dias = run_utterances(ikat_run, folder)
        file_real = statistics(real_utterances(data, (topic_file,)))
        sim = statistics([u for d in per for u in d])
        ikat[name] = {"topics": topic_file, "simulated": sim, "real": file_real, "satisfied": satisfied(dias),
                      "limit": ikat_limit, "sample": ikat_sample}
        info(f"voice {name}: {len(dias)} dialogues, {sim['utterances']} utterances vs {file_real['utterances']} real")
        if prefix is not None:
            criteria += _voice_criteria(prefix, per, file_real["words_per_utterance"], IKAT_STATS,
                                        IKAT_VERBATIM_TARGET, resamples)
    det = {"demo": demo, "real": real,
           "real_per_file": {f: statistics(real_utterances(data, (f,))) for f in REAL_FILES},
           "satisfied": satisfied(dialogues), "satisfied_first_repeat": satisfied(dialogues, repeat=0),
           "repeat": repeat, "limit": limit, "topics": list(topics), "ikat": ikat}
    return Findings(criteria, det, files)


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags)


async def measure_adversaries(cfg: RunConfig, tmp: Path, *, personas: Path, topics: Sequence[str] = (),
                              concurrency: int | None = None, resamples: int = RESAMPLES,
                              info: Callable[[str], None] = lambda _: None) -> Findings:
    """The satisfied share of each adversary (and of the genuine assistant) over the
    personas' topics (``topics``: only these), each once."""
    from ..run import read_transcripts

    criteria, det = [], {}
    for assistant, name, target, direction, meaning in E2E:
        run_dir = await run_dialogues(cfg, tmp, name, personas=personas, assistant=assistant, topic_ids=topics,
                                      concurrency=concurrency)
        transcripts = list(read_transcripts(run_dir))
        reasons = [tr.stop.reason for tr in transcripts]
        grades = [t.user.grade for tr in transcripts for t in tr.turns if t.user.grade is not None]
        sat = [r == "user_satisfied" for r in reasons]
        value = round(sum(sat) / len(sat), 4) if sat else None
        ci = bootstrap_ci(sat, _share, resamples=resamples, seed=name)
        criteria.append(criterion(name, "adversaries", value, ci, len(sat), "dialogues", target, direction, meaning))
        det[assistant] = {"dialogues": len(transcripts),
                          "stop_reasons": {r: reasons.count(r) for r in sorted(set(reasons))}, "satisfied": value,
                          "turns": len(grades),
                          "turn_pass_rate": round(sum(g > 3.0 for g in grades) / len(grades), 4) if grades else None}
        info(f"adversaries: {assistant}: {det[assistant]}")
    return Findings(criteria, det)
