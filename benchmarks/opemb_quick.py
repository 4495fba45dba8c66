"""The quick paper-004 ENAS run: train a small DVAE-EMB for two epochs and measure everything.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/opemb_quick.py [--data-dir DIR] [--out DIR] [--threads N]
        [--model DVAE-EMB] [--epochs 2] [--hidden 64]

Prints the metrics as JSON (``recon_accuracy``, ``validity``, ``uniqueness``, ``rmse``,
``pearson_r`` as fractions; ``rmse`` in standardised units as the paper's Table 2), the
wall time and the load average. It is meant to finish in under 5 minutes on two CPU
cores and reach ``pearson_r >= 0.5`` on the test split.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from attnas.graphvae.bo import BOSettings  # noqa: E402
from attnas.graphvae.experiment import QUICK, run_enas_experiment  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default=None, help="folder for metrics.json and history.json")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: fastest on a shared 2-core machine)")
    ap.add_argument("--model", default=QUICK.model)
    ap.add_argument("--epochs", type=int, default=QUICK.train.epochs)
    ap.add_argument("--hidden", type=int, default=QUICK.hidden)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bo-iterations", type=int, default=0, help="also run latent BO (Sec. 4.3) for this many rounds")
    ap.add_argument("--bo-batch", type=int, default=10, help="points per BO round")
    ap.add_argument("--bo-attempts", type=int, default=50, help="decodings per BO point (paper: 500)")
    ap.add_argument("--tsne-points", type=int, default=0, help="t-SNE figure of this many training latents (needs --out)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    settings = replace(
        QUICK,
        model=args.model,
        hidden=args.hidden,
        train=replace(QUICK.train, epochs=args.epochs, seed=args.seed),
        seed=args.seed,
        tsne_points=args.tsne_points,
        bo=None
        if args.bo_iterations == 0
        else BOSettings(
            iterations=args.bo_iterations,
            batch_size=args.bo_batch,
            decode_attempts=args.bo_attempts,
            num_restarts=4,
            raw_samples=256,
            gp=QUICK.gp,
        ),
    )
    t = time.perf_counter()
    load_before = os.getloadavg()
    metrics = run_enas_experiment(args.data_dir, settings, args.out)
    metrics.pop("settings")
    metrics["wall_seconds"] = time.perf_counter() - t
    metrics["threads"] = args.threads
    metrics["loadavg_before"] = load_before
    metrics["loadavg_after"] = os.getloadavg()
    print(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    main()
