"""The verdict logic of attnas compare on synthetic scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attnas.comparison.stats import paired_verdict, point_of, power_of, seeds_to_detect, summarise


def test_summary_has_the_t_interval_of_the_mean():
    scores = [0.80, 0.82, 0.81, 0.83, 0.79]
    s = summarise(scores)
    half = stats.t.ppf(0.975, 4) * np.std(scores, ddof=1) / np.sqrt(5)
    assert s["n"] == 5 and s["mean"] == pytest.approx(0.81)
    assert s["ci95"] == pytest.approx([0.81 - half, 0.81 + half])
    assert summarise([0.5]) == {"n": 1, "mean": 0.5, "std": 0.0, "ci95": [0.5, 0.5]}


def test_a_clear_paired_gain_is_better_and_a_loss_is_worse():
    rng = np.random.default_rng(0)
    base = rng.normal(0.80, 0.01, size=10)
    gain = base + 0.02 + rng.normal(0, 0.002, size=10)
    v = paired_verdict(list(gain), list(base), "search", "gat")
    assert v["verdict"] == "better" and v["p_value"] < 0.001
    assert v["p_value"] == pytest.approx(stats.ttest_rel(gain, base).pvalue)
    assert v["diff_mean"] == pytest.approx(float(np.mean(gain - base)))
    assert "search is better than gat" in v["sentence"]
    assert paired_verdict(list(base), list(gain), "search", "gat")["verdict"] == "worse"


def test_pairing_finds_a_gain_that_unpaired_spread_hides():
    # seed-to-seed spread of 3 points, a constant 0.5-point gain: paired it is clear
    base = [0.78, 0.81, 0.84, 0.79, 0.83]
    gain = [b + 0.005 for b in base]
    assert paired_verdict(gain, base, "a", "b")["verdict"] == "better"
    assert stats.ttest_ind(gain, base).pvalue > 0.5


def test_noise_is_not_distinguishable_and_says_how_many_seeds_would_do():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.8, 0.01, size=3), rng.normal(0.8, 0.01, size=3)
    v = paired_verdict(list(a), list(b), "search", "random")
    assert v["verdict"] == "not distinguishable" and v["p_value"] >= 0.05
    assert "not distinguishable at 3 seeds" in v["sentence"]
    assert v["seeds_for_1_point"] is not None and v["seeds_for_1_point"] > 3
    assert f"about {v['seeds_for_1_point']} seeds" in v["sentence"]


def test_fewer_than_three_seeds_get_no_verdict_but_their_means():
    v = paired_verdict([0.9], [0.8], "a", "b")
    assert v["verdict"] == "no verdict" and np.isnan(v["p_value"]) and "at least 3 seeds" in v["sentence"]
    # two seeds whose t-test would call it "worse" (p < 0.05) still get no verdict
    two = paired_verdict([0.70, 0.80], [0.80, 0.905], "search", "gat", unit="search seeds")
    assert two["p_value"] < 0.05 and two["verdict"] == "no verdict"
    assert two["sentence"] == "search vs gat: -10.25 points with 2 search seeds; no verdict: a verdict needs at least 3 search seeds"


def test_identical_rows_are_level_and_a_constant_shift_is_better():
    same = paired_verdict([0.8, 0.7, 0.75], [0.8, 0.7, 0.75], "a", "b")
    assert same["verdict"] == "not distinguishable" and same["p_value"] == 1.0
    shifted = paired_verdict([0.81, 0.71, 0.76], [0.8, 0.7, 0.75], "a", "b")
    assert shifted["verdict"] == "better" and shifted["p_value"] == 0.0 and shifted["power_half_point"] == 1.0


def test_the_stated_power_matches_a_simulation():
    rng = np.random.default_rng(0)
    for n, sd in [(5, 0.005), (20, 0.008)]:
        hits = np.mean([stats.ttest_rel(rng.normal(0.005, sd, size=n), np.zeros(n)).pvalue < 0.05
                        for _ in range(3000)])
        assert power_of(n, sd, 0.005) == pytest.approx(hits, abs=0.03)
    assert np.isnan(power_of(1, 0.01, 0.005))


def test_rows_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="same seeds"):
        paired_verdict([0.8, 0.7], [0.8], "a", "b")


def test_seeds_needed_grow_with_the_spread_and_match_a_power_simulation():
    assert seeds_to_detect(0.0, 0.01) == 2
    small, large = seeds_to_detect(0.005, 0.01), seeds_to_detect(0.015, 0.01)
    assert small < large
    # at the returned n a paired t-test detects a 1-point gain in about 80 % of simulated trials
    rng = np.random.default_rng(0)
    hits = sum(stats.ttest_rel(rng.normal(0.01, 0.015, size=large), np.zeros(large)).pvalue < 0.05
               for _ in range(2000))
    assert 0.75 < hits / 2000 < 0.9
    assert seeds_to_detect(1.0, 0.01) is None


def test_a_point_is_a_percentage_point_for_fractions():
    assert point_of([0.1, 0.9]) == 0.01 and point_of([3.0, 0.5]) == 1.0
