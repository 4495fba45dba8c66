"""What the cells of a bench say: summaries, anytime curves and paired tests against random search.

For each strategy, dataset and budget the test performance of the picks over the seeds
is summarised (mean, 95 % confidence interval of the mean, Student's t) and compared with
random search's picks of the same seeds by a paired t-test
(:func:`attnas.comparison.stats.paired_verdict`) and Wilcoxon's signed-rank test.
*Pooled* compares, per seed, the mean over the datasets other than the negative control
(``proteins``, whose validation and test disagree among the best architectures). The
anytime curve of a strategy on a dataset is the mean and 95 % interval of the incumbent's
test performance after each query, from its largest budget's searches. The *inflation*
is what a search rewarded with the test column gains: the best test performance among
random search's queries minus the test performance of its pick on validation. Cells
with fronts (two or more objectives) are also compared on the hypervolume ratio of their
fronts (``fronts``: paired t-test and Wilcoxon against random search of the same seeds).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from scipy import stats

from attnas.comparison.stats import paired_verdict, summarise

BASELINE = "table-random"
CONTROL = "proteins"


def curve_band(curves: list[list[float]]) -> dict:
    """Mean and 95 % interval (Student's t) of per-seed curves of equal length, per query."""
    a = np.asarray(curves)
    n = a.shape[0]
    mean = a.mean(axis=0)
    half = stats.t.ppf(0.975, n - 1) * a.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros_like(mean)
    return {"mean": mean.tolist(), "low": (mean - half).tolist(), "high": (mean + half).tolist()}


def wilcoxon_p(a: list[float], b: list[float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of paired scores (1 when every pair ties)."""
    d = np.asarray(a) - np.asarray(b)
    if not np.any(d != 0):
        return 1.0
    return float(stats.wilcoxon(d).pvalue)


def compare(a: list[float], b: list[float], name_a: str, name_b: str) -> dict:
    """A paired verdict on test with the Wilcoxon p-value beside the t-test's."""
    v = paired_verdict(a, b, name_a, name_b)
    return {**v, "wilcoxon_p": wilcoxon_p(a, b)}


def summarise_cells(cells: list[dict], baseline: str = BASELINE, control: str = CONTROL) -> dict:
    """Summaries, paired tests, pooled tests, curves and the test-reward inflation of a bench.

    Args:
        cells: Cells of :func:`attnas.bench.runner.run_cells`.
        baseline: The label of random search.
        control: The dataset left out of the pooled tests.
    """
    by = {(c["dataset"], c["strategy"], c["budget"]): c for c in cells}
    datasets = list(dict.fromkeys(c["dataset"] for c in cells))
    strategies = list(dict.fromkeys(c["strategy"] for c in cells))
    budgets = sorted({c["budget"] for c in cells})
    rows, paired, curves, inflation, fronts = [], [], {}, [], []
    for (dataset, strategy, budget), c in by.items():
        rows.append({"dataset": dataset, "strategy": strategy, "budget": budget, "test": summarise(c["test"]),
                     "val": summarise(c["val"]), "seconds": c["seconds"]})
        base = by.get((dataset, baseline, budget))
        if strategy != baseline and base is not None:
            v = compare(c["test"], base["test"], strategy, baseline)
            paired.append({"dataset": dataset, "strategy": strategy, "budget": budget, **v,
                           "val_diff_mean": float(np.mean(np.subtract(c["val"], base["val"])))})
        if "hv" in c:
            row = {"dataset": dataset, "strategy": strategy, "budget": budget, "hv": summarise(c["hv"]),
                   "front_test": summarise(c["front_test"]), "true_front_size": c["true_front_size"]}
            if strategy != baseline and base is not None and "hv" in base:
                v = compare(c["hv"], base["hv"], strategy, baseline)
                row.update(hv_diff_mean=v["diff_mean"], hv_p=v["p_value"], hv_wilcoxon_p=v["wilcoxon_p"],
                           hv_verdict=v["verdict"])
            fronts.append(row)
        if strategy == baseline:
            gain = np.subtract(c["test_by_test"], c["test"])
            inflation.append({"dataset": dataset, "budget": budget, "by_val": float(np.mean(c["test"])),
                              "by_test": float(np.mean(c["test_by_test"])), "inflation": summarise(gain.tolist())})
    for dataset in datasets:
        for strategy in strategies:
            top = max((b for b in budgets if (dataset, strategy, b) in by), default=None)
            if top is not None:
                curves[f"{dataset}/{strategy}"] = {"budget": top, **curve_band(by[(dataset, strategy, top)]["curves"])}
    pooled = []
    pooled_sets = [d for d in datasets if d != control]
    for strategy in strategies:
        for budget in budgets:
            have = [d for d in pooled_sets if (d, strategy, budget) in by and (d, baseline, budget) in by]
            if strategy == baseline or not have:
                continue
            a = np.mean([by[(d, strategy, budget)]["test"] for d in have], axis=0).tolist()
            b = np.mean([by[(d, baseline, budget)]["test"] for d in have], axis=0).tolist()
            va = np.mean([by[(d, strategy, budget)]["val"] for d in have], axis=0)
            vb = np.mean([by[(d, baseline, budget)]["val"] for d in have], axis=0)
            verdicts = defaultdict(int)
            for p in paired:
                if p["strategy"] == strategy and p["budget"] == budget and p["dataset"] in have:
                    verdicts[p["verdict"]] += 1
            pooled.append({"strategy": strategy, "budget": budget, "datasets": have, **compare(a, b, strategy, baseline),
                           "val_diff_mean": float(np.mean(va - vb)), "per_dataset": dict(verdicts)})
    return {"datasets": datasets, "strategies": strategies, "budgets": budgets, "baseline": baseline,
            "control": control, "rows": rows, "paired": paired, "pooled": pooled, "curves": curves,
            "inflation": inflation, "fronts": fronts}
