"""Seconds per training epoch of the graph VAEs on ENAS (batch 32), extrapolated.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_dvae_epoch.py [--threads 2] [--batches 30]
        [--repeats 3] [--models D-VAE DVAE-EMB GCN GCN-EMB] [--hidden 501] [--reference-batches 2]

For every model (paper sizes: hidden 501, latent 56) it times ``--batches`` training
steps (forward, backward, Adam) on batches of 32 ENAS training graphs after two warm-up
steps, ``--repeats`` times, and reports the median seconds per step times the 535 steps
of an epoch over the 17,118 training graphs: an extrapolation from a fixed fraction of
the epoch, stated as such. In the same run it times, for D-VAE, the decoder without the
distinct-state deduplication (``dedup=False``) and the straightforward per-graph
reference (one graph, vertex and candidate edge at a time, as D-VAE's public code
computes the loss; ``tests/graphvae/reference_dvae.py``) on ``--reference-batches``
batches, and prints the ratios. The load average is printed beside every figure: the
machine is shared, so only ratios measured in one run are comparable.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "graphvae"))

import torch  # noqa: E402

from attnas.data.enas import load_enas6  # noqa: E402
from attnas.graphvae.vae import GraphVAE, paper_model  # noqa: E402

BATCH = 32


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _steps(model, batches, step_fn) -> list[float]:
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    times = []
    for b in batches:
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_fn(model, b)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t)
    return times


def _batched_loss(model, b):
    return model.loss(b)["loss"]


def _reference_loss(model, b):
    from reference_dvae import encode_one, log_likelihood_one

    total = 0.0
    for i in range(len(b)):
        types, adj, n = b.types[i].tolist(), b.adj[i].tolist(), int(b.n_nodes[i])
        mu, logvar = encode_one(model, types, adj, n)
        z = model.reparameterize(mu, logvar)
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        total = total - log_likelihood_one(model, z, types, adj, n) + model.config.beta * kld
    return total


def time_model(name, data, args, dedup=True, step_fn=_batched_loss, n_batches=None) -> tuple[float, str]:
    torch.manual_seed(0)
    model = GraphVAE(paper_model(name, hidden=args.hidden), data.num_types, data.max_nodes)
    model.decoder.dedup = dedup
    model.train()
    n_batches = args.batches if n_batches is None else n_batches
    gen = torch.Generator().manual_seed(0)
    per_step = []
    for _ in range(args.repeats):
        batches = [b for _, (b, _y) in zip(range(n_batches + 2), data.batches(BATCH, shuffle=True, generator=gen))]
        times = _steps(model, batches, step_fn)[2:]  # two warm-up steps
        per_step.append(statistics.median(times))
    return statistics.median(per_step), _load()


def main() -> None:
    ap = argparse.ArgumentParser(description="seconds per graph-VAE training epoch on ENAS")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=30, help="timed steps per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=501)
    ap.add_argument("--models", nargs="+", default=["D-VAE", "DVAE-EMB", "GCN", "GCN-EMB"])
    ap.add_argument("--reference-batches", type=int, default=2, help="0 skips the per-graph reference")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = load_enas6(args.data_dir).train
    steps = math.ceil(len(data) / BATCH)
    print(f"# torch {torch.__version__}, threads={torch.get_num_threads()}, batch={BATCH}, hidden={args.hidden}, "
          f"{steps} steps/epoch; epoch seconds are median step time x {steps} "
          f"(median of {args.repeats} repeats of {args.batches} steps)")
    print(f"# start {_load()}")
    results = {}
    for name in args.models:
        sec, load = time_model(name, data, args)
        results[name] = sec
        print(f"{name:9s} {sec * 1000:8.1f} ms/step  {sec * steps:7.1f} s/epoch (extrapolated)   [{load}]", flush=True)
    if "D-VAE" in args.models:
        sec, load = time_model("D-VAE", data, args, dedup=False)
        print(f"{'D-VAE dense':9s} {sec * 1000:8.1f} ms/step  {sec * steps:7.1f} s/epoch (extrapolated)   [{load}]"
              f"  dedup speed-up x{sec / results['D-VAE']:.2f}", flush=True)
        if args.reference_batches > 0:
            ref_args = argparse.Namespace(**{**vars(args), "repeats": 1})
            sec, load = time_model("D-VAE", data, ref_args, step_fn=_reference_loss, n_batches=args.reference_batches)
            print(f"{'D-VAE per-graph reference':26s} {sec * 1000:9.1f} ms/step  {sec * steps:8.1f} s/epoch (extrapolated)"
                  f"   [{load}]  batched speed-up x{sec / results['D-VAE']:.1f}", flush=True)
    if "GCN" in results and "D-VAE" in results:
        print(f"# GCN / D-VAE time ratio: {results['GCN'] / results['D-VAE']:.2f}")


if __name__ == "__main__":
    main()
