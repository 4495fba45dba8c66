"""Do two sets of supernet weights rank the same architectures alike?

The same prior samples (``--sample-seed``) are scored by several sets of weights of one
recipe: the kept supernet checkpoints of one run (``--checkpoints``: e.g. epochs 1,750 and
2,000 of 2,000, the same training 250 epochs apart) or the final supernets of runs that
differ only in their seed. For each pair of scorers it reports the agreement of their
validation scores over all samples (Pearson r, Kendall's tau) and how the best-by-validation
sample of one scorer tests under the other: a pick whose test accuracy holds only under the
weights that picked it was chosen for those weights, not for its architecture.

Run as ``python -m docs.results.autoattend_graph.supernet_score_stability RUN... [--checkpoints] --out F.jsonl``
(rows already in ``--out`` are reused). Scoring 1,000 CiteSeer samples takes about 3 minutes
per set of weights on one CPU thread.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from benchmarks._common import best_by_validation


def score_weights(run_dir: str, checkpoint: str | None, samples: int, sample_seed: int) -> dict:
    """Validation and test accuracy of the prior samples under ``run_dir``'s supernet, with the
    weights of ``checkpoint`` (a file of its ``checkpoints/``; ``None``: the finished supernet)."""
    import torch

    from attnas.runs.checkpoint_files import load_checkpoint_file
    from benchmarks._common import one_forward_per_batch, open_search, prior_samples

    found = open_search(run_dir)
    space, task, supernet = found.space, found.task, found.supernet
    if checkpoint is not None:
        supernet.load_state_dict(load_checkpoint_file(Path(run_dir) / "checkpoints" / checkpoint)["state"]["model"])
        supernet.eval()
    val, test = [], []
    with torch.no_grad():
        for arch in prior_samples(space, samples, sample_seed):
            forward = one_forward_per_batch(supernet, arch)
            val.append(task.evaluate(forward, "val", batch_size=10**9))
            test.append(task.evaluate(forward, "test", batch_size=10**9))
    return {"run": str(run_dir), "checkpoint": checkpoint, "sample_seed": sample_seed, "val": val, "test": test}


def compare(a: dict, b: dict) -> dict:
    """Agreement of two scorers' validation scores, and each one's pick tested under both."""
    from scipy.stats import kendalltau, pearsonr

    pa, pb = best_by_validation(a["val"]), best_by_validation(b["val"])
    return {"r": float(pearsonr(a["val"], b["val"])[0]), "tau": float(kendalltau(a["val"], b["val"])[0]),
            # a pick tested under the weights that picked it, and under the other weights
            "own": (a["test"][pa] + b["test"][pb]) / 2, "other": (b["test"][pa] + a["test"][pb]) / 2}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="finished one-shot run directories of one recipe")
    p.add_argument("--checkpoints", action="store_true",
                   help="score every kept supernet checkpoint of each run (default: the finished supernet)")
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--sample-seed", type=int, default=12345)
    p.add_argument("--out", type=Path, required=True, help="JSON lines, one per set of weights (appended)")
    args = p.parse_args()
    done = {}
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            r = json.loads(line)
            if len(r["val"]) == args.samples and r["sample_seed"] == args.sample_seed:
                done[(r["run"], r["checkpoint"])] = r
    groups = []
    for run in args.runs:
        names = sorted(f.name for f in (Path(run) / "checkpoints").glob("supernet-*.ckpt")) if args.checkpoints else [None]
        rows = []
        for name in names:
            row = done.get((str(run), name))
            if row is None:
                row = score_weights(run, name, args.samples, args.sample_seed)
                with args.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
            print(f"{run} {name or 'finished'}: best val {100 * max(row['val']):.2f}, its test "
                  f"{100 * row['test'][best_by_validation(row['val'])]:.2f}", flush=True)
            rows.append(row)
        groups.append(rows)
    # snapshots are compared within a run; final supernets across runs
    pairs = [c for rows in groups for c in itertools.combinations(rows, 2)] if args.checkpoints else \
        list(itertools.combinations([rows[0] for rows in groups], 2))
    if not pairs:
        raise SystemExit("need two sets of weights: two runs, or --checkpoints with two kept checkpoints")
    rows = [compare(a, b) for a, b in pairs]
    mean = lambda key: statistics.mean(r[key] for r in rows)  # noqa: E731
    print(f"\n{len(rows)} pair(s) of {'snapshots of one run' if args.checkpoints else 'supernets of different seeds'}, "
          f"{args.samples} samples: validation agreement r {mean('r'):.2f}, Kendall's tau {mean('tau'):.2f}; "
          f"test of each one's pick under its own weights {100 * mean('own'):.2f}, "
          f"under the other's {100 * mean('other'):.2f}")


if __name__ == "__main__":
    main()
