"""Does a one-shot search's supernet score predict an architecture's stand-alone accuracy?

Reads the architectures a finished ``one-shot-evolution`` / ``one-shot-random`` run scored
(its ``events.jsonl``), takes ``--archs`` of them spread evenly over the score ranking (the
best always included), trains each from scratch with the run's own ``retrain`` settings
(one seed), and prints per architecture the supernet score, the stand-alone validation
accuracy and how many of its connections are ``zero`` / ``identity``, then Spearman's rho
(scipy) between the two accuracies. Validation only: nothing here reads the test split's score.

Usage (from the repository root)::

    ATTNAS_DATA=../shared/data python docs/results/autoattend_text/score_vs_standalone.py RUN_DIR --archs 8
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from scipy.stats import spearmanr

from attnas.config import load_config
from attnas.core.arch import Arch
from attnas.data.root import resolve_data_root
from attnas.runs.build import build_space, build_task, pick_device
from attnas.runs.rng import seed_everything
from attnas.training.train import fit
from benchmarks._common import supernet_scored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--archs", type=int, default=8, help="architectures to train")
    parser.add_argument("--set", action="append", default=[], help="override of the run's config (e.g. retrain.epochs=8)")
    args = parser.parse_args()
    config = load_config(str(args.run_dir / "config.yaml"), args.set)
    space = build_space(config)
    task = build_task(config, resolve_data_root(None), pick_device("cpu"))
    ranked = sorted(supernet_scored(args.run_dir, ("evolution", "random")), key=lambda p: -p["score"])
    n = min(args.archs, len(ranked))
    picks = [ranked[round(i * (len(ranked) - 1) / max(1, n - 1))] for i in range(n)]
    scores, vals = [], []
    for p in picks:
        arch = Arch(space.name, p["arch"])
        ops = [c["op"] for layer in p["arch"]["layers"] for c in layer["inputs"]]
        t0 = time.perf_counter()
        seed_everything(config.seed + 1)
        res = fit(space.build(arch, task), task, config.retrain, seed=config.seed, score_test=False)
        scores.append(p["score"])
        vals.append(res.val)
        print(f"supernet {p['score']:.4f}  stand-alone val {res.val:.4f} (best epoch {res.best_epoch})  "
              f"zero {ops.count('zero')}/{len(ops)} identity {ops.count('identity')}/{len(ops)}  "
              f"{time.perf_counter() - t0:.0f} s  {space.describe(arch)}", flush=True)
    rho, p = spearmanr(scores, vals)
    print(f"Spearman rho(supernet score, stand-alone val) = {rho:.3f} (p = {p:.3f}, n = {n})")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
