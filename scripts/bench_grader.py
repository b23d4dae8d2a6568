"""Section ``grader`` — validity of the offline embedding grader on real iKAT answers.

The measurement is ``simloop.validity`` (``simloop validate`` prints the same figures as a
validity card, with bootstrap intervals); this section runs it on the offline simulator's
grader and writes the figures and details of ``bench/results.json``.

Labelled sets come from the iKAT topic files, read at run time (nothing is copied).  For
each turn with a human response, the question is the turn's resolved utterance and the
candidates are:

* ``true``        the human response;
* ``other_topic`` the response of a turn of another topic (another base topic in 2023,
                  where "9-1" and "9-2" share one);
* ``other_turn``  the response of another turn of the same conversation;
* ``restated``    the question restated with filler (``fakes.restate``);
* ``padded``      the human response with two sentences of other topics' responses inserted;
* ``clarify``     a clarifying question (``fakes.adversaries.clarifying_question``).

Turns whose human response only asks the user something (iKAT's assistant clarifying
rather than answering) are left out: the grader must fail a clarifying question, so they
are not positives; their count is reported.  Templates and draws are seeded (``SEED``).

The grader's parameters were chosen on ``2023_train_topics.json`` only; the figures are
measured on the pooled report sets (2023 test + 2024 test: 550 turns, 496 after the exclusion),
with each set also reported alone in the details.  Grading is without ``reference`` (the
human answer graded against itself would be trivial); the ``reference_mode`` details show
how the reference mode behaves, with the human response as the reference.

Evidence (``simloop/validity/evidence.py``): the human answer against its negation, its names
swapped and neighbour padding, graded *with* a reference, in two modes: ``issue`` (gold
response + passages: the answer is in its own reference; the headline figures) and
``honest`` (the answer is not in its reference; reported as ``*_honest`` figures and in the
details, as are the held-out generators).  ``earlier``: another answer of the same
conversation's earlier turns, graded knowing the earlier questions.  End to end, the
genuine ``bm25_extractive`` answers negated (``Negated``) must not satisfy the demo users.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_common import ROOT, figure, ikat_dir, info, range_figure

SETS = ("2023/2023_train_topics.json", "2023/2023_test_topics.json", "2024/2024_test_topics.json")


def figures_of(criteria: list[Any]) -> dict[str, Any]:
    """The bench's figures (``{"value", "target", "ok"}``) of validity criteria."""
    out = {}
    for c in criteria:
        if c.direction == "within":
            out[c.name] = range_figure(c.value, *c.threshold)
        else:
            out[c.name] = figure(c.value, c.threshold, better="higher" if c.direction == "higher" else "lower")
    return out


async def run(quick: bool, out_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    from simloop.config import load_config
    from simloop.search import open_embedder
    from simloop.simulators import EmbeddingGrader
    from simloop.validity import measure_adversaries, measure_grader

    data = ikat_dir(SETS)
    if data is None:
        reason = "iKAT topic files not found (set SIMLOOP_IKAT_DATA or put them in ../shared/data/ikat)"
        info(f"grader: skipped: {reason}")
        return {}, {"skipped": reason}
    embedder = await open_embedder()
    try:
        found = await measure_grader(EmbeddingGrader(embedder=embedder), data, embedder, quick=quick, details=True,
                                     info=info)
    finally:
        await embedder.aclose()
    personas = ROOT / "personas"
    topics: list[str] = []
    if quick:  # each persona's first topic
        from simloop.inputs import load_personas

        topics = [p.topics[0].id for p in load_personas(personas)]
    with tempfile.TemporaryDirectory(prefix="simloop-bench-") as tmp:
        adv = await measure_adversaries(load_config(None, {"concurrency": 16}), Path(tmp), personas=personas,
                                        topics=topics, info=lambda line: info(f"grader: e2e {line}"))
    details = {**found.details, "e2e": adv.details}
    return figures_of(found.criteria + adv.criteria), details


if __name__ == "__main__":  # scripts/bench_grader.py [--quick]: this section alone, printed
    sys.path.insert(0, str(ROOT))
    from simloop.search import prepare_environment

    prepare_environment()
    figs, det = asyncio.run(run("--quick" in sys.argv, ROOT / "bench"))
    print(json.dumps({"figures": figs, "details": det}, indent=1))
