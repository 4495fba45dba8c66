"""Chatzianastasis et al.'s (2021) Table 2 with three sparse GPs on the same latents: SVGP, FITC and SGPR.

Issue 23 asks for the variational GP used by default to be compared with a FITC-style sparse
GP (D-VAE's Theano model is FITC) on the same latent means, so that a gap to the paper's
RMSE / Pearson's r is not blamed on the wrong part. For each method of
:class:`~attnas.graphvae.gp.SparseGPConfig` (``svgp``, ``fitc``, ``sgpr``) the GP is fitted
on the training latents and scored on the test split (RMSE in standardised units, Pearson's
r), ``--repeats`` times (seeds differ in the inducing subset and, for SVGP, the minibatches).

The VAE comes from ``docs/results/opemb/bo_vs_random.py``'s cache file (``--vae``) or a
graph-vae run's ``vae.pt`` (``--run``). Usage::

    ATTNAS_DATA=/work/shared/data PYTHONPATH=. python -m docs.results.opemb.gp_compare --threads 1 \
        --vae /tmp/opemb_bo_vae_d64e3.pt --inducing 500 --repeats 3 [--train-points N] [--methods svgp fitc sgpr]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from attnas.graphvae.gp import SparseGPConfig, gp_prediction
from attnas.graphvae.vae import GraphVAE
from attnas.runs.checkpoint_files import load_checkpoint_file


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--vae", default=None, help="cache file of bo_vs_random.py")
    ap.add_argument("--run", default=None, help="a graph-vae run directory (its vae.pt)")
    ap.add_argument("--methods", nargs="+", default=["svgp", "fitc", "sgpr"], choices=["svgp", "fitc", "sgpr"])
    ap.add_argument("--inducing", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--maxiter", type=int, default=200, help="L-BFGS-B iterations of fitc / sgpr")
    ap.add_argument("--epochs", type=int, default=100, help="SVGP epochs")
    ap.add_argument("--train-points", type=int, default=None, help="use only the first N training latents")
    args = ap.parse_args(argv)
    from attnas.runs.build import use_kernels

    use_kernels()  # the kernels of attnas.kernels on, as in runs (none with ATTNAS_NO_KERNELS=1)
    torch.set_num_threads(args.threads)
    os.environ.setdefault("ATTNAS_PROGRESS", "0")
    from attnas.data.enas import load_enas6

    ck = load_checkpoint_file(Path(args.run) / "vae.pt" if args.run else args.vae)
    model = GraphVAE.from_arguments(ck["model_args"])
    model.load_state_dict(ck["model"])
    model.eval()
    data = load_enas6()
    train, test = data.train, data.test
    if args.train_points:
        train = train.subset(range(args.train_points))
    z_train, z_test = model.latent_means(train.graphs), model.latent_means(test.graphs)
    print(f"VAE {ck.get('spec', ck['model_args']['config'])}; {len(train)} training / {len(test)} test latents; "
          f"{args.inducing} inducing points; load {'%.2f %.2f %.2f' % os.getloadavg()}", flush=True)
    print("| sparse GP | RMSE (mean ± std) | Pearson's r (mean ± std) | seconds per fit |")
    print("|---|---|---|---|")
    for method in args.methods:
        rmses, rs, secs = [], [], []
        for i in range(args.repeats):
            s = SparseGPConfig(inducing=args.inducing, method=method, seed=i, maxiter=args.maxiter, epochs=args.epochs)
            t = time.time()
            rmse, r = gp_prediction(z_train, train.y, z_test, test.y, s)
            secs.append(time.time() - t)
            rmses.append(rmse)
            rs.append(r)
        sd = (lambda v: statistics.stdev(v) if len(v) > 1 else 0.0)
        print(f"| {method} | {statistics.mean(rmses):.4f} ± {sd(rmses):.4f} | {statistics.mean(rs):.4f} ± {sd(rs):.4f} | "
              f"{statistics.mean(secs):.0f} |", flush=True)
    print(f"load {'%.2f %.2f %.2f' % os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
