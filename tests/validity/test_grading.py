"""Grader criteria on the real iKAT files with graders at the seam: one that knows the
human answers separates perfectly and passes; a random one fails; ``--sample`` caps the
turns; the card's path (the simulator plugin's grader) gives the bench's figures."""

from __future__ import annotations

import random

import pytest

from simloop.config import RunConfig
from simloop.fakes.seams import HashEmbedder
from simloop.run import Context, load_plugin
from simloop.simulators import EmbeddingGrader
from simloop.validity.grading import measure_grader, sample_turns
from simloop.validity.labelled import REPORT, SETS, build_cases
from tests.helpers.data import ikat_file

SAMPLE = 8


class KnowsTheAnswers:
    """Grades 5 exactly the human answer of a question, 0 anything else."""

    def __init__(self, data):
        self.answers = {c.question: c.response for name in REPORT for c in build_cases(data / SETS[name])[0]
                        if c.kind == "true"}

    async def grade(self, question, response, context=None):
        return (5.0 if self.answers.get(question.question) == response else 0.0), []


class Coin:
    async def grade(self, question, response, context=None):
        return random.Random(f"{question.id}|{response}").uniform(0, 5), []


@pytest.fixture(scope="module")
def data():
    return ikat_file("2023", "2023_test_topics.json").parents[1]


def _by(found):
    return {c.name: c for c in found.criteria}


async def test_a_grader_that_separates_perfectly_passes_and_a_random_one_fails(data):
    keep = sample_turns(data, SAMPLE)
    perfect = _by(await measure_grader(KnowsTheAnswers(data), data, HashEmbedder(), keep=keep, resamples=200))
    coin = _by(await measure_grader(Coin(), data, HashEmbedder(), keep=keep, resamples=200))
    for name in ("grader_auc_true_vs_restated", "grader_auc_true_vs_other_topic", "grader_auc_true_vs_negated"):
        assert perfect[name].value == 1.0 and perfect[name].verdict == "pass", perfect[name]
        assert perfect[name].ci == (1.0, 1.0)
    assert perfect["grader_true_pass_rate"].value == 1.0
    assert coin["grader_auc_true_vs_restated"].verdict == "fail"
    assert coin["grader_auc_true_vs_other_topic"].verdict == "fail"
    assert perfect["grader_auc_true_vs_earlier"].verdict == "not measured"  # needs explain(): the embedding grader's


async def test_sample_caps_the_turns_of_every_grader_criterion(data):
    keep = sample_turns(data, SAMPLE)
    found = await measure_grader(KnowsTheAnswers(data), data, HashEmbedder(), keep=keep, resamples=50)
    measured = [c for c in found.criteria if c.value is not None]
    assert measured and all(c.n <= SAMPLE for c in measured), [(c.name, c.n) for c in measured]
    assert _by(found)["grader_true_pass_rate"].n == SAMPLE
    assert sample_turns(data, SAMPLE)("2023_test", ["x"]) == set()  # same draw whatever the caller


async def test_the_card_grades_with_the_offline_simulators_grader_as_the_bench_does(data):
    """``simloop validate`` builds the grader as the offline simulator does; the bench makes
    ``EmbeddingGrader(embedder=...)`` itself: the same figures on the same turns."""
    embedder = HashEmbedder()
    keep = sample_turns(data, 5)
    cfg = RunConfig()
    sim = load_plugin("simulator", "offline", {}, Context(cfg, overrides={"embedder": embedder}))
    card = await measure_grader(sim.grader, data, embedder, keep=keep, resamples=20)
    bench = await measure_grader(EmbeddingGrader(embedder=embedder), data, embedder, keep=keep, resamples=20)
    assert [(c.name, c.value) for c in card.criteria] == [(c.name, c.value) for c in bench.criteria]
