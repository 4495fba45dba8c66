"""The hybrid search against random search of docs/results/mqar.md, per search seed.

Usage (from the repository root)::

    python -m docs.results.mqar.hybrid_search [--final-training] COMPARE_FOLDER [COMPARE_FOLDER ...]

A ``COMPARE_FOLDER`` is the folder of ``attnas compare hybrid-mqar-hard-evolution
--search-seeds K --baselines softmax`` (one ``search-seed-<s>/`` per search seed, each with
the rows ``search`` (``evolution-trained``), ``random`` (``random-trained`` with as many
trained hybrids) and ``softmax``, and its ``compare.json``). Prints Markdown, one line per
search seed and row: the pick (the best validation accuracy among its trained hybrids), that
validation accuracy, which trained hybrid was the first at >= 95 % validation accuracy, the
pick's test accuracy once retrained (the compare's row; test only reported), and the pick's
latency as a fraction of softmax's. Two fractions: the one the search
admitted it with (softmax timed beside it, ``relative`` of its event), and one from timing
every pick and softmax again here, all in one process in interleaved rounds
(:func:`docs.results.mqar.hybrid_front.time_together`). Then, over the search seeds of
every folder given (a search seed finished in each; several folders: searches of other seeds
run side by side, ``--set seed=S``), the mean ± standard deviation of each row's test and
validation accuracy and the paired differences with their paired t-test p-values.

``--final-training``: the test and validation accuracy of each row's own final training
(its run's ``metrics.json``: the pick, or softmax, trained once with the recipe's ``retrain``
settings and the run's seed, the search seed), for comparisons stopped after their rows ran
and before their retraining seeds; every search seed whose three rows finished is read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from attnas.config import load_config
from docs.results.mqar.hybrid_front import layers, time_together, trained

#: Validation accuracy counted as solving the task (>= 95 % of softmax's 100 %).
SOLVED = 0.95
ROWS = ("search", "random")


def row_summary(folder: Path, depth: int) -> dict:
    """One search row's pick, its validation accuracy, admitted latency fraction and first solving candidate."""
    events = trained(folder)
    best = max(events, key=lambda e: e["val_accuracy"])  # first of ties, as the strategies pick
    first = next((i + 1 for i, e in enumerate(events) if e["val_accuracy"] >= SOLVED), None)
    return {"pick": layers(best["arch"], depth), "val": best["val_accuracy"], "first": first,
            "admitted": best["relative"]["latency_ms"], "trained": len(events)}


def paired(lines: list, key: str) -> None:
    """Mean ± std of ``key`` per row over the search seeds, and the paired differences."""
    import numpy as np
    from scipy.stats import ttest_rel

    values = {name: np.array([rows[name][key] for _, rows, _ in lines]) * 100 for name in ROWS}
    if key in ("test", "final_val"):
        values["softmax"] = np.array([soft[key] for _, _, soft in lines]) * 100
    parts = [f"{name} {v.mean():.1f} ± {v.std(ddof=1):.1f}" for name, v in values.items()]
    for a, b in (("search", "random"), ("search", "softmax"), ("random", "softmax")):
        if a in values and b in values:
            d = values[a] - values[b]
            p = ttest_rel(values[a], values[b]).pvalue if d.any() else 1.0
            parts.append(f"{a} − {b} {d.mean():+.1f} (p = {p:.2f})")
    print(f"{key} over {len(lines)} search seeds: " + "; ".join(parts))


def accuracies(d: Path, final_training: bool) -> dict[str, dict[str, float]]:
    """Each row's ``test`` and ``final_val`` accuracy: the compare's retraining (mean over its
    seeds) or, with ``final_training``, the row's own final training."""
    if final_training:
        metrics = {name: json.loads((d / name / "metrics.json").read_text()) for name in (*ROWS, "softmax")}
        return {name: {"test": m["test_accuracy"], "final_val": m["val_accuracy"]} for name, m in metrics.items()}
    rows = json.loads((d / "compare.json").read_text())["rows"]
    return {r["name"]: {"test": r["test"]["mean"], "final_val": r.get("val", {}).get("mean", float("nan"))}
            for r in rows}


def main(folders: list[str], final_training: bool = False) -> None:
    torch.set_num_threads(1)
    done = ("search/metrics.json", "random/metrics.json", "softmax/metrics.json") if final_training else ("compare.json",)
    seed_dirs = sorted((d for top in folders for d in Path(top).glob("search-seed-*")
                        if all((d / f).exists() for f in done)), key=lambda p: int(p.name.rsplit("-", 1)[1]))
    config = load_config(str(seed_dirs[0] / "search" / "config.yaml"))
    depth = config.space.options.depth
    lines = []
    for d in seed_dirs:
        acc = accuracies(d, final_training)
        lines.append((d.name.rsplit("-", 1)[1], {name: {**row_summary(d / name, depth), **acc[name]}
                                                 for name in ROWS}, acc["softmax"]))
    soft = ("softmax",) * depth
    latency = time_together(config, list({soft, *(r["pick"] for _, rows, _ in lines for r in rows.values())}))
    print("| search seed | row | pick | validation [%] | first >= 95 % validation | test [%] | "
          "softmax test [%] | latency / softmax's (admitted) | (timed together) |\n|---|---|---|---|---|---|---|---|---|")
    for seed, rows, soft_test in lines:
        for name, r in rows.items():
            first = f"candidate {r['first']} of {r['trained']}" if r["first"] else f"none of {r['trained']}"
            print(f"| {seed} | {name} | {' / '.join(f'`{m}`' for m in r['pick'])} | {100 * r['val']:.1f} | {first} | "
                  f"{100 * r['test']:.1f} | {100 * soft_test['test']:.1f} | {r['admitted']:.2f} | "
                  f"{latency[r['pick']] / latency[soft]:.2f} |")
    print(f"\nsoftmax timed together: {latency[soft]:.1f} ms at {config.strategy.options.costs.task.get('seq_len')} "
          "tokens")
    if len(lines) > 1:
        for key in ("test", "final_val", "val"):  # val: the best candidate's, what the search selected on
            paired(lines, key)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--final-training"]
    if not args:
        raise SystemExit(__doc__)
    main(args, final_training="--final-training" in sys.argv[1:])
