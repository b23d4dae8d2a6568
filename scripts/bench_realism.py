"""Realism — do the offline simulator's utterances read like real iKAT users?

The measurement is ``simloop.validity`` (voice.py: the statistics; speaking.py: the runs
and the criteria), which ``simloop validate`` prints as a validity card with bootstrap
intervals; this section runs it on the offline simulator and writes the figures and details
of ``bench/results.json``.

A demo run (offline simulator + ``bm25_extractive`` over ``personas/``, run in-process by
the runner ``simloop run`` uses; the full bench runs every persona x topic twice, ``--repeat 2``, so the
figures also see variation across seeds) is compared with every user ``utterance`` of the
real topic files ``2023_train_topics.json``, ``2023_test_topics.json`` and
``2024_test_topics.json``.  One function computes every statistic on both sides.

The utterances of a demo dialogue are everything its user says: the turns' ``user.utterance``
and the closing line (``stop.utterance``, or in transcripts made before the closing line
moved there, the ``farewell``/``give_up`` turn).  The real topic files record the user's
closing thanks as ordinary turns, so counting it keeps the comparison like for like.

Statistics (``tokens`` = lower-cased ``[a-z0-9]+('[a-z]+)?`` matches unless said otherwise):

* ``words_per_utterance`` — mean number of whitespace-separated words per utterance.
  Target: within ±30% of the real mean.
* ``distinct2`` — distinct word bigrams / all word bigrams (bigrams within an utterance, of
  its tokens).  The ratio falls as a set grows, so both sides are measured at one size:
  the mean over 20 seeded random samples of 200 utterances (fewer if the set is smaller).
  Target ≥ 0.55 (the real files give 0.66-0.70 each, whole).
* ``verbatim_rubric_share`` — among utterances that carry a question to answer (demo: turns
  with a ``rubric_id``; real: every turn, whose ``resolved_utterance`` is the self-contained
  question), the share whose tokens contain the question's tokens as one contiguous run,
  i.e. repeat it word for word.  Target ≤ 0.20.
* ``backreference_share`` — share of utterances that lead with a back-reference: one of
  it, that, this, they, those among the first four letter-only tokens (``[a-z]+``, so
  "That's" gives "that" and "s"; "OK, and is it ..." counts, a pronoun deep in a long
  question does not; four is the lead length that gives the real users' 0.17).
  Target ≥ 0.10.  A reaction such as "That's nice." counts too (it does refer back), so the
  details also give ``backreference_request_share``: the same test on the request alone,
  the last sentence with a "?" (else the last sentence); real 0.11.
* ``non_question_share`` — share of utterances with no "?" at all (statements, feedback,
  thanks).  Real 0.27.  Target 0.10-0.40.
* ``top_utterance_share`` — occurrences of the most frequent utterance (compared by its
  tokens) / all utterances.  Target ≤ 0.01.

Also reported (details): the demo's satisfied share (all dialogues and the first repeat,
which is the default demo), and per-file real values.  Skips with one line when the iKAT
data folder is missing (set ``SIMLOOP_IKAT_DATA`` to point at it).

The voice on real iKAT personas: each topic file is converted with ``simloop
personas from-ikat`` and the offline simulator runs ``bm25_extractive`` over the personas
(each persona once; with ``--quick`` the first
``IKAT_QUICK_LIMIT`` dialogues), compared with the real users of the same file.  Figures
``voice_ikat23_*`` (the 2023 test topics) and ``voice_ikat24_*`` (the 2024 topics), with the
targets of the demo: words per utterance within ±30% of that file's real mean, distinct-2
≥ 0.55, and word-for-word rubric questions ≤ 0.25 (the rubric question of such a persona
is the resolved utterance, which the real 2023 test users typed word for word 22% of the
time).  The voice was tuned on the personas of ``2023_train_topics.json`` (reported in the
details as ``ikat23_train``, with no figure) and never on the two report files.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_common import ROOT, ikat_dir, info

REAL_FILES = ("2023/2023_train_topics.json", "2023/2023_test_topics.json", "2024/2024_test_topics.json")
IKAT_QUICK_LIMIT = 6


def statistics(utts: list[tuple[str, str | None]]) -> dict[str, Any]:
    """Every realism statistic of a set of utterances (``simloop.validity``'s, for the tests)."""
    from simloop.validity import voice_statistics

    return voice_statistics(utts)


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from bench_grader import figures_of

    from simloop.config import load_config
    from simloop.validity import measure_voice

    folder = ikat_dir(REAL_FILES)
    if folder is None:
        info("realism: skipped (no iKAT topic files; set SIMLOOP_IKAT_DATA to the folder of 2023/ and 2024/)")
        return {}, {"skipped": "iKAT topic files not found"}
    repeat, limit = (1, 12) if quick else (2, None)
    with tempfile.TemporaryDirectory(prefix="simloop-realism-") as tmp:
        found = await measure_voice(load_config(None, {}), folder, Path(tmp), personas=ROOT / "personas",
                                    repeat=repeat, limit=limit, ikat_limit=IKAT_QUICK_LIMIT if quick else None,
                                    details=not quick, info=lambda line: info(f"realism: {line}"))
    det = found.details
    demo, real = det["demo"], det["real"]
    for key in ("words_per_utterance", "distinct2", "verbatim_rubric_share", "backreference_share",
                "non_question_share", "top_utterance_share"):
        info(f"  {key}: demo {demo[key]}  real {real[key]}")
    sat_all, sat_first = det["satisfied"], det["satisfied_first_repeat"]
    info(f"  user_satisfied: {sat_first['user_satisfied']}/{sat_first['dialogues']} (first repeat), "
         f"{sat_all['user_satisfied']}/{sat_all['dialogues']} (all)")
    return figures_of(found.criteria), det


if __name__ == "__main__":  # python scripts/bench_realism.py RUN_DIR: the statistics of an existing run
    sys.path.insert(0, str(ROOT))
    from simloop.validity import real_utterances, run_utterances

    found = ikat_dir(REAL_FILES)
    per_dialogue, _ = run_utterances(Path(sys.argv[1]), ROOT / "personas")
    shown = {"demo": statistics([u for d in per_dialogue for u in d])}
    if found:
        shown["real"] = statistics(real_utterances(found))
    print(json.dumps(shown, indent=1))
