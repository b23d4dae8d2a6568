"""The validity card: its model round-trips, verdicts follow thresholds, the summary says
what to use instead, the bootstrap interval behaves."""

from __future__ import annotations

import random

from simloop.validity.card import (
    SimulatorConfig,
    ValidityCard,
    criterion,
    read_card,
    store_card,
    summarise,
    write_card,
)
from simloop.validity.stats import auc, bootstrap_ci, pass_rate


def _sim(**params) -> SimulatorConfig:
    return SimulatorConfig(name="llm", params=params, llm={"simulator": {"model": "m", "base_url": "http://127.0.0.1:1/v1"}},
                           digest="0123456789abcdef")


def _card(criteria, **params) -> ValidityCard:
    sim = _sim(**params)
    return ValidityCard(simulator=sim, sample=7, seed=11, resamples=1000, criteria=criteria,
                        summary=summarise(criteria, sim, 7))


def test_verdicts_follow_threshold_and_direction():
    assert criterion("a", "grader", 0.91, None, 5, "turns", 0.90, "higher", "m").verdict == "pass"
    assert criterion("a", "grader", 0.89, None, 5, "turns", 0.90, "higher", "m").verdict == "fail"
    assert criterion("b", "adversaries", 0.05, None, 5, "dialogues", 0.05, "lower", "m").verdict == "pass"
    assert criterion("b", "adversaries", 0.06, None, 5, "dialogues", 0.05, "lower", "m").verdict == "fail"
    assert criterion("c", "voice", 0.45, None, 5, "dialogues", (0.1, 0.4), "within", "m").verdict == "fail"
    assert criterion("c", "voice", 0.25, None, 5, "dialogues", (0.1, 0.4), "within", "m").verdict == "pass"
    assert criterion("d", "grader", None, None, 0, "turns", 0.9, "higher", "m").verdict == "not measured"
    assert criterion("e", "grader", 0.3, None, 5, "turns", None, None, "m").verdict == "info"


def test_the_card_round_trips(tmp_path):
    crit = [criterion("grader_auc_true_vs_restated", "grader", 0.97, (0.95, 0.99), 40, "turns", 0.9, "higher",
                      "human answer above restated"),
            criterion("voice_non_question_share", "voice", 0.25, (0.2, 0.3), 12, "dialogues", (0.1, 0.4), "within",
                      "no question mark")]
    card = _card(crit, grader="llm", voice="llm")
    path = write_card(card, tmp_path / "sub" / "validity.json")
    assert read_card(path) == card
    assert '"schema": "simloop.validity/1"' in path.read_text()
    assert not [p for p in path.parent.iterdir() if p.name != "validity.json"]  # no temporary file left


def test_summary_says_the_llm_grader_is_not_valid_and_what_to_use_instead():
    crit = [criterion("grader_auc_true_vs_restated", "grader", 0.55, (0.4, 0.7), 12, "turns", 0.9, "higher", "m"),
            criterion("voice_distinct2", "voice", 0.7, (0.6, 0.8), 12, "dialogues", 0.55, "higher", "m")]
    s = summarise(crit, _sim(grader="llm", voice="llm"), 12)
    assert (s.grader, s.voice, s.failing) == ("not valid", "valid", ["grader_auc_true_vs_restated"])
    assert "--simulator-param grader=embedding" in s.line and "sample of 12" in s.line


def test_a_card_is_stored_under_its_digest_where_run_finds_it(tmp_path):
    from simloop.run import find_validity

    card = _card([criterion("x", "grader", 1.0, None, 3, "turns", 0.9, "higher", "m")])
    written, cached = store_card(card, tmp_path / "validity.json", cache_dir=tmp_path / "cache")
    assert cached == tmp_path / "cache" / "validity" / "0123456789abcdef.json"
    found = find_validity("0123456789abcdef", cache_dir=tmp_path / "cache")
    assert found is not None and found.grader == "valid" and found.path == str(cached)
    assert find_validity("ffffffffffffffff", cache_dir=tmp_path / "cache") is None


def test_auc_is_the_pairwise_definition_with_ties_half():
    rng = random.Random(3)
    pos = [rng.choice([0, 1, 2, 3, 4, 5]) + 0.0 for _ in range(40)]
    neg = [rng.choice([0, 1, 2, 3]) + 0.0 for _ in range(30)]
    pairwise = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))
    assert auc(pos, neg) == round(pairwise, 4)
    assert auc([5.0], [1.0]) == 1.0 and auc([1.0], [5.0]) == 0.0 and auc([], [1.0]) is None


def test_bootstrap_interval_holds_the_estimate_and_shrinks_with_n():
    rng = random.Random(5)
    small = [rng.uniform(0, 5) for _ in range(30)]
    large = [rng.uniform(0, 5) for _ in range(600)]
    widths = []
    for grades in (small, large):
        ci = bootstrap_ci(grades, pass_rate, resamples=500)
        assert ci is not None
        assert ci[0] <= pass_rate(grades) <= ci[1]
        widths.append(ci[1] - ci[0])
    assert widths[1] < widths[0] / 2  # 20 times the data: about a quarter of the width
    assert bootstrap_ci(small, pass_rate, resamples=200) == bootstrap_ci(small, pass_rate, resamples=200)  # seeded
    assert bootstrap_ci([], pass_rate) is None


def test_the_card_prints_a_row_per_criterion_with_its_interval_and_verdict():
    from rich.console import Console

    from simloop.cli.validate import card_table

    crit = [criterion("grader_auc_true_vs_restated", "grader", 0.55, (0.41, 0.7), 12, "turns", 0.9, "higher", "m"),
            criterion("voice_non_question_share", "voice", 0.25, (0.2, 0.3), 12, "dialogues", (0.1, 0.4), "within",
                      "m")]
    console = Console(record=True, width=160)
    console.print(card_table(_card(crit, grader="llm")))
    text = console.export_text()
    assert "grader_auc_true_vs_restated" in text and "0.41..0.7" in text and "≥ 0.9" in text and "fail" in text
    assert "0.1..0.4" in text and "pass" in text and "12 dialogues" in text


def test_distinct2_interval_holds_its_estimate_although_draws_repeat_dialogues():
    from simloop.validity.speaking import _pooled_statistic
    from simloop.validity.voice import statistic

    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    dialogues = [[(" ".join(rng.choice(words) for _ in range(8)) + "?", None) for _ in range(6)] for _ in range(40)]
    value = statistic("distinct2", [u for d in dialogues for u in d])
    ci = bootstrap_ci(dialogues, lambda s: _pooled_statistic("distinct2", s), resamples=200)
    assert ci is not None and ci[0] <= value + 0.02 and value - 0.05 <= ci[1], (value, ci)
