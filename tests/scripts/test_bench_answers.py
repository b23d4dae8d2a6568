"""The hand-labelled off-topic sentences of demo answers (bench/labels/offtopic_sentences.jsonl)
and the focus measure scripts/bench_answers.py reports on them (issue 34)."""

from __future__ import annotations

import asyncio

from simloop.fakes.seams import HashEmbedder
from tests.helpers.cli import bench_script


def test_the_labelled_off_topic_set_loads_and_the_measure_computes():
    with bench_script("bench_answers") as bench:
        labels = bench.load_labels()
        assert len(labels) >= 300 and {x.label for x in labels} == {"on", "off"}
        assert all(x.reason.strip() for x in labels)
        # a sentence read in two answers to one question has one label (the figures look it up so)
        seen: dict[tuple[str, str, str], str] = {}
        for x in labels:
            assert seen.setdefault((x.topic, x.question, x.sentence), x.label) == x.label, x
        # the three padded answers are in it, their padding labelled off
        off = {x.sentence[:40] for x in labels if x.label == "off"}
        assert any(s.startswith("The lane's long and narrow shape") for s in off)
        assert any(s.startswith("The ICC Men's Cricket World Cup") for s in off)
        assert any(s.startswith("By her husband Óðr") for s in off)
        items = [(x.question, x.sentence, None) for x in labels[:20]]
        support = asyncio.run(bench.sentence_support(items, HashEmbedder()))
        assert len(support) == 20 and all(-1.0 <= s <= 1.0001 for s in support)
        assert 0.0 < bench.off_cut() < 1.0


def test_the_off_topic_figures_leave_out_the_no_answer_line_and_questions_asked_back():
    from simloop.parts import NO_ANSWER

    with bench_script("bench_answers") as bench:
        lead = "Given that you fish for pike, here is what I found."
        assert bench.judged_sentences(f"{lead} {NO_ANSWER}") == ([lead], 1)
        assert bench.judged_sentences(NO_ANSWER) == ([], 1)
        answer = "Angling is fishing with a hook. Would you like to know more about rods?"
        assert bench.judged_sentences(answer) == (["Angling is fishing with a hook."], 0)
