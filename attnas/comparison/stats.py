"""The statistics of ``attnas compare``: per-row summaries and a paired verdict.

Every row of a comparison is trained with the same seeds (seed ``k`` of every row uses the
same random seed), so two rows are compared on their per-seed differences ``d_k = a_k - b_k``
with a paired t-test (:func:`scipy.stats.ttest_rel`, two-sided). Scores are the task's
metric, higher is better; a *point* is 0.01 of a metric in [0, 1] (one percentage point).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from scipy import stats

#: Significance level of the verdicts.
ALPHA = 0.05
#: Power with which :func:`seeds_to_detect` detects a difference.
POWER = 0.8
#: The fewest paired seeds a verdict is given for. With two, a paired t-test has one degree
#: of freedom: its 95 % interval is 12.7 standard errors wide on each side, so "worse" or
#: "better" from two seeds says next to nothing; below this only the means are printed.
MIN_VERDICT_SEEDS = 3
#: The difference whose detection power :func:`paired_verdict` states, in points.
POWER_EFFECT_POINTS = 0.5


def point_of(scores: Sequence[float]) -> float:
    """One point of the metric: 0.01 when every score lies in [0, 1] (accuracies), else 1."""
    return 0.01 if all(0.0 <= s <= 1.0 for s in scores) else 1.0


def summarise(scores: Sequence[float]) -> dict:
    """Mean, sample standard deviation and the 95 % confidence interval of the mean (Student's t).

    Returns:
        ``{"n", "mean", "std", "ci95": [low, high]}``; with one score the std is 0 and the
        interval is the score itself.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("no scores to summarise")
    mean = statistics.fmean(scores)
    std = statistics.stdev(scores) if n > 1 else 0.0
    half = stats.t.ppf(0.975, n - 1) * std / math.sqrt(n) if n > 1 else 0.0
    return {"n": n, "mean": mean, "std": std, "ci95": [mean - half, mean + half]}


def seeds_to_detect(diff_std: float, effect: float, alpha: float = ALPHA, power: float = POWER,
                    limit: int = 1000) -> int | None:
    """The fewest paired seeds with which a paired t-test detects a difference of ``effect``.

    Uses the normal-approximation sample size with Student's t quantiles,
    ``n >= ((t_{1-alpha/2, n-1} + t_{power, n-1}) * diff_std / effect)^2``.

    Returns:
        The number of seeds (at least 2), 2 when the differences do not vary, or ``None``
        when more than ``limit`` seeds would be needed.
    """
    if diff_std <= 0:
        return 2
    for n in range(2, limit + 1):
        t = stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(power, n - 1)
        if n >= (t * diff_std / effect) ** 2:
            return n
    return None


def power_of(n: int, diff_std: float, effect: float, alpha: float = ALPHA) -> float:
    """Power of a two-sided paired t-test with ``n`` pairs to detect a mean difference ``effect``.

    The noncentral t distribution with ``n - 1`` degrees of freedom and noncentrality
    ``effect * sqrt(n) / diff_std`` (the exact power of the test when the differences are
    normal with standard deviation ``diff_std``).

    Returns:
        The probability of ``p < alpha``; 1.0 when the differences do not vary, NaN for ``n < 2``.
    """
    if n < 2:
        return float("nan")
    if diff_std <= 0:
        return 1.0
    df, nc = n - 1, effect * math.sqrt(n) / diff_std
    t = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(t, df, nc) + stats.nct.cdf(-t, df, nc))


def paired_verdict(a: Sequence[float], b: Sequence[float], name_a: str, name_b: str,
                   unit: str = "seeds") -> dict:
    """Is ``a`` better than ``b``? A paired t-test on seed-matched scores and its verdict in words.

    Below :data:`MIN_VERDICT_SEEDS` pairs no verdict is given: the sentence states the mean
    difference and how many seeds a verdict needs.

    Args:
        a: Scores of row ``a``, one per seed.
        b: Scores of row ``b`` for the same seeds, in the same order.
        name_a: Row name of ``a`` (for the sentence).
        name_b: Row name of ``b``.
        unit: What a pair is, for the sentence (``seeds``, ``search seeds``).

    Returns:
        ``{"a", "b", "n", "diff_mean", "diff_std", "p_value", "verdict", "sentence",
        "seeds_for_1_point", "power_half_point"}`` where ``verdict`` is ``better``, ``worse``,
        ``not distinguishable`` or ``no verdict`` (too few pairs), ``seeds_for_1_point`` is
        how many pairs would detect a one-point difference at the observed spread of the
        differences, and ``power_half_point`` the power these pairs have to detect a
        :data:`POWER_EFFECT_POINTS`-point difference at that spread.

    Raises:
        ValueError: When the two rows have different numbers of scores.
    """
    if len(a) != len(b):
        raise ValueError(f"paired rows need the same seeds: {name_a} has {len(a)} scores, {name_b} {len(b)}")
    n = len(a)
    diffs = [x - y for x, y in zip(a, b)]
    point = point_of([*a, *b])
    mean = statistics.fmean(diffs)
    std = statistics.stdev(diffs) if n > 1 else 0.0
    if n < 2:
        p = float("nan")
    elif std == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
    else:
        p = float(stats.ttest_rel(a, b).pvalue)
    needed = seeds_to_detect(std, point) if n > 1 else None
    power = power_of(n, std, POWER_EFFECT_POINTS * point)
    units = "points" if point == 0.01 else "units"
    delta = f"{mean / point:+.2f} {units}"
    if n < MIN_VERDICT_SEEDS:
        verdict = "no verdict"
        sentence = (f"{name_a} vs {name_b}: {delta} with {n} {unit}; no verdict: a verdict needs at least "
                    f"{MIN_VERDICT_SEEDS} {unit}")
    elif p < ALPHA:
        verdict = "better" if mean > 0 else "worse"
        sentence = f"{name_a} is {verdict} than {name_b}: {delta} (paired t-test p = {p:.3g}, {n} {unit})"
    else:
        verdict = "not distinguishable"
        sentence = f"{name_a} and {name_b} are not distinguishable at {n} {unit}: {delta} (p = {p:.3g})"
        if needed is None or needed > n:
            more = f"about {needed}" if needed else "more than 1000"
            sentence += f"; {more} {unit} would detect a 1-point difference at this spread"
    return {"a": name_a, "b": name_b, "n": n, "diff_mean": mean, "diff_std": std, "p_value": p,
            "verdict": verdict, "sentence": sentence, "seeds_for_1_point": needed, "power_half_point": power}
