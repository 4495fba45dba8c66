"""Would more labelled nodes for selection make a search pick better? An upper bound.

The searches of Table 5 pick among the supernet's candidates by their accuracy on the 500
validation nodes, and the candidates at the top are closer than that can resolve
(``supernet_selection_noise.py``). A less noisy selection signal (for instance K held-out
folds of the training nodes, each scored by a supernet trained without its fold) adds at
most the 140 training labels. This study asks what any number of extra selection labels
could buy, without training anything: for each finished one-shot run, ``--samples``
prior samples are scored with the supernet's weights (evaluation mode), keeping which
validation and test nodes each one classifies correctly. The test nodes are split at
random into a held-out half ``H``, which only measures, and an extra half ``E``; the
selection set is the validation nodes plus the first ``m`` nodes of ``E`` (``--extra``).
For random search with budget N (the best-by-selection-accuracy of N random samples, ties
to the earlier sample; mean over ``--draws`` subsets), it reports the held-out accuracy of
the pick, beside the mean over the N samples and the best of them on ``H`` (the oracle),
averaged over ``--splits`` random splits and over the runs; and Kendall's tau between the
selection score and ``H`` over the 100 samples with the best selection score.

``m = 140`` is the K-fold proposal's addition with the supernet trained on every training
label (so an upper bound for it); ``m = 500`` doubles the selection labels.

Usage::

    python -m docs.results.autoattend_graph.selection_label_budget runs/t5/cora-s*/search --out runs/label-budget
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

BUDGETS = (100, 1000)


def correct_nodes(run_dir: str, samples: int, sample_seed: int) -> dict:
    """Which validation and test nodes each prior sample classifies correctly (supernet weights)."""
    import torch

    from benchmarks._common import open_search, prior_samples

    found = open_search(run_dir)
    graph = found.task.dataset.graph
    batch = next(iter(found.task.batches("val")))
    val, test = graph.val_mask, graph.test_mask
    rows_val, rows_test = [], []
    with torch.no_grad():
        for arch in prior_samples(found.space, samples, sample_seed):
            right = found.supernet(batch, arch).argmax(-1) == graph.y
            rows_val.append(right[val].numpy())
            rows_test.append(right[test].numpy())
    return {"val": np.stack(rows_val), "test": np.stack(rows_test)}


def cached_correct_nodes(run_dir: str, samples: int, sample_seed: int, out: Path) -> dict:
    """:func:`correct_nodes`, kept in ``out`` as ``<run>-<samples>-<seed>.npz`` (scoring is the slow part)."""
    name = str(Path(run_dir).resolve()).strip("/").replace("/", "_")
    path = out / f"{name}-{samples}-{sample_seed}.npz"
    if not path.exists():
        arrays = correct_nodes(run_dir, samples, sample_seed)
        tmp = path.with_suffix(".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(path)
    with np.load(path) as f:
        return {"val": f["val"], "test": f["test"]}


def study(correct: dict, extra: list[int], splits: int, draws: int, seed: int) -> dict:
    """Held-out accuracy of random search's pick for each number of extra selection labels.

    Returns:
        ``{m: {N: {"pick", "mean", "oracle"}, "tau_top": float}}``, each a mean over the splits.
    """
    from scipy.stats import kendalltau

    val, test = correct["val"].astype(np.float64), correct["test"].astype(np.float64)
    n, n_test = test.shape
    rng = np.random.default_rng(seed)
    out: dict = {m: {b: {"pick": [], "mean": [], "oracle": []} for b in BUDGETS if b <= n} | {"tau_top": []}
                 for m in extra}
    for _ in range(splits):
        order = rng.permutation(n_test)
        held, spare = order[: n_test // 2], order[n_test // 2:]
        held_acc = test[:, held].mean(1)
        subsets = {b: [np.sort(rng.choice(n, b, replace=False)) for _ in range(draws if b < n else 1)]
                   for b in BUDGETS if b <= n}
        # the subsets' mean and best on the held-out half do not depend on the selection labels
        mean = {b: float(np.mean([held_acc[s].mean() for s in draws_b])) for b, draws_b in subsets.items()}
        oracle = {b: float(np.mean([held_acc[s].max() for s in draws_b])) for b, draws_b in subsets.items()}
        for m in extra:
            chosen = np.concatenate([val, test[:, spare[:m]]], axis=1).mean(1)
            for b, draws_b in subsets.items():
                picks = [s[np.argmax(chosen[s])] for s in draws_b]  # argmax: the first of ties
                out[m][b]["pick"].append(float(held_acc[picks].mean()))
                out[m][b]["mean"].append(mean[b])
                out[m][b]["oracle"].append(oracle[b])
            top = np.argsort(-chosen, kind="stable")[:100]
            out[m]["tau_top"].append(float(kendalltau(chosen[top], held_acc[top])[0]))
    return {m: {k: (statistics.mean(v) if k == "tau_top" else {q: statistics.mean(x) for q, x in v.items()})
                for k, v in row.items()} for m, row in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="finished one-shot run directories on a transductive node task")
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--sample-seed", type=int, default=12345)
    p.add_argument("--extra", type=int, nargs="+", default=[0, 140, 250, 500],
                   help="extra selection labels taken from the test nodes (at most half of them)")
    p.add_argument("--splits", type=int, default=20, help="random halvings of the test nodes")
    p.add_argument("--draws", type=int, default=200, help="random subsets per budget below --samples")
    p.add_argument("--out", type=Path, required=True, help="folder: the scored nodes (.npz) and results.jsonl")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, run in enumerate(args.runs):
        correct = cached_correct_nodes(run, args.samples, args.sample_seed, args.out)
        if max(args.extra) > correct["test"].shape[1] // 2:
            p.error(f"--extra {max(args.extra)}: at most half of the {correct['test'].shape[1]} test nodes")
        result = study(correct, args.extra, args.splits, args.draws, seed=i)
        rows.append(result)
        with open(args.out / "results.jsonl", "a") as f:
            f.write(json.dumps({"run": run, "samples": args.samples, "sample_seed": args.sample_seed,
                                "splits": args.splits, "draws": args.draws, "result": result}) + "\n")
        print(f"{run}: scored", flush=True)
    print(f"\nheld-out test accuracy [%] (half of the test nodes), mean over {len(rows)} runs and "
          f"{args.splits} splits; random search's pick by validation + m extra labels")
    budgets = [b for b in BUDGETS if b <= args.samples]
    print("| extra labels m | " + " | ".join(f"N = {b}: pick | mean | oracle" for b in budgets) + " | tau, top 100 |")
    print("|---|" + "---|---|---|" * len(budgets) + "---|")
    for m in args.extra:
        cells = []
        for b in budgets:
            cells += [f"{100 * statistics.mean(r[m][b][q] for r in rows):.2f}" for q in ("pick", "mean", "oracle")]
        print(f"| {m} | " + " | ".join(cells) + f" | {statistics.mean(r[m]['tau_top'] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
