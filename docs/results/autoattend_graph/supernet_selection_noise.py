"""Can a search beat random search under this supernet? Where validation stops predicting test.

For each finished one-shot run, ``--samples`` architectures drawn from the space's prior
(the same ones for every run: ``--sample-seed``) are scored with the supernet's weights in
evaluation mode, on the validation and the test split (``$ATTNAS_STUDY_DEVICE`` picks the
device, CPU by default). From these scores:

- **rank agreement**: Kendall's tau between validation and test accuracy over all samples,
  and over the ``--top`` samples with the best validation accuracy (the region a search
  works in: when tau is near 0 there, a higher validation score picks no better test score);
- **budget curve**: the validation and test accuracy of the best-by-validation sample among
  N random samples (N = 10 ... ``--samples``; mean over ``--draws`` random subsets; ties
  go to the earlier sample), i.e. what random search with budget N finds;
- both for each reading of the validation split as one score (``SCORES``): its accuracy,
  its cross-entropy loss (continuous, so no ties), and accuracy with ties broken by the loss;
- **the search's own best**: the best validation score among the candidates the run itself
  evaluated (its population), to set beside random search's at the same budget;
- with ``--pairs``, **two supernets instead of one**: for every pair of the runs, the sample
  with the best mean validation accuracy of the two, and its mean test accuracy under the
  two (a final model fine-tuned from either), beside the best-by-validation sample of one
  supernet;
- with ``--agreement`` (transductive node tasks), **the candidates' consensus instead of the
  500 validation labels**: the ensemble of the ``--top`` best-by-validation samples (mean
  of their class probabilities) and its test accuracy beside the best single sample's;
  each sample's agreement with the ensemble's labels on the unlabelled nodes (neither
  train, validation nor test), and the test accuracy of the sample picked by agreement,
  and by validation accuracy plus agreement, beside the pick by validation accuracy.

One JSON line per run goes to ``--out`` (with every sample's scores); a summary is printed.

Usage::

    python -m docs.results.autoattend_graph.supernet_selection_noise runs/aa-cora-s0 runs/aa-cora-s1 --out runs/noise.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
from pathlib import Path

BUDGETS = (10, 30, 100, 300, 1000, 3000, 10000)


def score_samples(run_dir: str, samples: int, sample_seed: int) -> dict:
    """Validation and test accuracy (supernet weights) of the prior samples, and the run's best."""
    import torch

    from benchmarks._common import one_forward_per_batch, open_search, prior_samples

    found = open_search(run_dir)
    space, task, supernet = found.space, found.task, found.supernet
    archs = prior_samples(space, samples, sample_seed)
    val, test, val_loss = [], [], []
    with torch.no_grad():
        for arch in archs:
            forward = one_forward_per_batch(supernet, arch)
            val.append(task.evaluate(forward, "val", batch_size=10**9))
            test.append(task.evaluate(forward, "test", batch_size=10**9))
            losses = [(task.loss(forward(b), b).item(), len(b.y) if b.mask is None else int(b.mask.sum()))
                      for b in task.batches("val", batch_size=10**9)]
            val_loss.append(sum(l * n for l, n in losses) / sum(n for _, n in losses))
    return {"run": str(run_dir), "val": val, "test": test, "val_loss": val_loss, "sample_seed": sample_seed,
            "search_best_val": max(p["score"] for p in found.population),
            "search_evaluated": len(found.population)}


def agreement(run_dir: str, samples: int, sample_seed: int, val: list[float], top: int) -> dict:
    """The ensemble of the ``top`` best-by-validation samples and each sample's agreement with
    its labels on the unlabelled nodes (``--agreement``; a transductive node task)."""
    import torch

    from benchmarks._common import open_search, prior_samples

    found = open_search(run_dir)
    space, task, supernet = found.space, found.task, found.supernet
    graph = task.dataset.graph
    unlabelled = ~(graph.train_mask | graph.val_mask | graph.test_mask)
    batch = next(iter(task.batches("val")))
    with torch.no_grad():
        probs = torch.stack([torch.softmax(supernet(batch, arch), -1) for arch in prior_samples(space, samples, sample_seed)])
    best = sorted(range(samples), key=lambda i: -val[i])[:top]
    labels = probs[best].mean(0).argmax(-1)
    y, test = graph.y, graph.test_mask
    return {"ensemble_test": float((labels[test] == y[test]).float().mean()),
            "unlabelled": int(unlabelled.sum()),
            "agree": (probs.argmax(-1)[:, unlabelled] == labels[unlabelled]).float().mean(1).tolist()}


def summarise(row: dict, top: int, draws: int) -> dict:
    """Rank agreement and the random-search budget curve of one run's scores, for each way of
    reading the validation split (``SCORES``: accuracy; cross-entropy; accuracy with ties broken
    by the lower loss)."""
    from scipy.stats import kendalltau

    test, n = row["test"], len(row["test"])
    out = {"search_best_val": row["search_best_val"], "search_evaluated": row["search_evaluated"]}
    for name, key in SCORES.items():
        score = [key(row, i) for i in range(n)]
        best = sorted(range(n), key=lambda i: score[i], reverse=True)[:top]
        curve = {}
        rng = random.Random(0)
        for budget in (b for b in BUDGETS if b <= n):
            picks = []
            for _ in range(draws if budget < n else 1):
                subset = sorted(rng.sample(range(n), budget))
                picks.append(max(subset, key=lambda i: (score[i], -i)))
            curve[budget] = {"val": statistics.mean(row["val"][i] for i in picks),
                             "test": statistics.mean(test[i] for i in picks)}
        out[name] = {"tau_all": float(kendalltau(score, test)[0]),
                     "tau_top": float(kendalltau([score[i] for i in best], [test[i] for i in best])[0]),
                     "curve": curve}
    return out


# how a sample's validation result is read as one score (higher is better)
SCORES = {
    "accuracy": lambda row, i: row["val"][i],
    "loss": lambda row, i: -row["val_loss"][i],
    # accuracy moves in steps of one node (1/500 on Planetoid); a loss scaled by 1e-6 only orders ties
    "accuracy, ties by loss": lambda row, i: row["val"][i] - 1e-6 * row["val_loss"][i],
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished one-shot run directories")
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--sample-seed", type=int, default=12345)
    p.add_argument("--top", type=int, default=100)
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--pairs", action="store_true", help="also score every pair of runs together")
    p.add_argument("--agreement", action="store_true",
                   help="also select by agreement with the top samples' ensemble on the unlabelled nodes")
    p.add_argument("--out", type=Path, required=True, help="JSON lines, one per run (appended)")
    args = p.parse_args()
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            r = json.loads(line)
            if len(r["val"]) == args.samples and "val_loss" in r and (not args.agreement or "agree" in r):
                done[r["run"]] = r
    summaries, rows = [], []
    for run in args.runs:
        row = done.get(str(run))
        if row is None:
            row = score_samples(run, args.samples, args.sample_seed)
            if args.agreement:
                row.update(agreement(run, args.samples, args.sample_seed, row["val"], args.top))
            with args.out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
        rows.append(row)
        s = summarise(row, args.top, args.draws)
        summaries.append(s)
        acc = s["accuracy"]
        print(f"{run}: tau(val, test) all {acc['tau_all']:.3f}, top {args.top} {acc['tau_top']:.3f}; "
              f"best val of the search's {s['search_evaluated']} {100 * s['search_best_val']:.2f}, "
              f"of {args.samples} random {100 * acc['curve'][max(acc['curve'])]['val']:.2f}", flush=True)
    print(f"\nmean over {len(summaries)} runs; best val of the search "
          f"{100 * statistics.mean(s['search_best_val'] for s in summaries):.2f}")
    budgets = list(summaries[0]["accuracy"]["curve"])
    print("| validation read as | tau all | tau top " + str(args.top) + " | "
          + " | ".join(f"test % of the best of {b}" for b in budgets) + " |")
    print("|---" * (3 + len(budgets)) + "|")
    for name in SCORES:
        mean = lambda f: statistics.mean(f(s[name]) for s in summaries)  # noqa: E731
        print(f"| {name} | {mean(lambda r: r['tau_all']):.3f} | {mean(lambda r: r['tau_top']):.3f} | "
              + " | ".join(f"{100 * mean(lambda r: r['curve'][b]['test']):.2f}" for b in budgets) + " |")
    if args.pairs:
        single = [best_test(r["val"], [r["test"]]) for r in rows]
        pairs = [best_test([a + b for a, b in zip(r["val"], q["val"])], [r["test"], q["test"]])
                 for r, q in itertools.combinations(rows, 2)]
        print(f"\ntest [%] of the best-by-validation sample: one supernet {100 * statistics.mean(single):.2f} "
              f"(mean of {len(single)}), two supernets' mean validation {100 * statistics.mean(pairs):.2f} "
              f"(mean of {len(pairs)} pairs)")
    if args.agreement:
        by_val = [best_test(r["val"], [r["test"]]) for r in rows]
        by_agree = [best_test(r["agree"], [r["test"]]) for r in rows]
        by_both = [best_test([v + a for v, a in zip(r["val"], r["agree"])], [r["test"]]) for r in rows]
        print(f"\nensemble of the top {args.top} by validation: test {100 * statistics.mean(r['ensemble_test'] for r in rows):.2f} "
              f"(the best-by-validation sample: {100 * statistics.mean(by_val):.2f}); the sample picked by agreement with "
              f"it on the {rows[0]['unlabelled']} unlabelled nodes: test {100 * statistics.mean(by_agree):.2f}, "
              f"by validation + agreement {100 * statistics.mean(by_both):.2f} (means over {len(rows)} runs)")


def best_test(val: list[float], tests: list[list[float]]) -> float:
    """Mean test accuracy (over ``tests``) of the sample with the best ``val`` (ties: the earlier)."""
    from benchmarks._common import best_by_validation

    i = best_by_validation(val)
    return statistics.mean(t[i] for t in tests)


if __name__ == "__main__":
    main()
