"""Seconds per training epoch of the graph VAEs on ENAS (batch 32), extrapolated.

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_dvae_epoch.py [--threads 2] [--steps 10] [--flops]
        [--repeats 3] [--models D-VAE DVAE-EMB GCN GCN-EMB] [--hidden 501] [--reference-steps 1]

Every model is built at the paper's sizes (hidden 501, latent 56). Training steps
(forward, backward, Adam) on batches of 32 ENAS training graphs are timed round-robin:
each round runs one step of every variant in turn, so all variants see the same machine
load, and the ratios between them are measured in one run. After two warm-up rounds,
``--steps`` rounds are timed per repeat; per variant the median over repeats of the median
step time, times the 535 steps of an epoch over the 17,118 training graphs, is reported:
an extrapolation from a fixed fraction of the epoch, stated as such.

Variants: the four paper models; D-VAE without the decoder's distinct-state
deduplication (``D-VAE dense``); and, with ``--reference-steps``, D-VAE's loss computed
one graph, vertex and candidate edge at a time as D-VAE's public code does
(``tests/graphvae/reference_dvae.py``), timed on its own (it is 10-100 times slower).

Wall time and process CPU time are both printed. On a shared machine the wall time
grows with the other processes' load (printed beside every figure); with one thread the
CPU time is close to what the step costs on an idle core.
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


class Variant:
    def __init__(self, label, model_name, data, hidden, dedup=True, loss=_batched_loss):
        torch.manual_seed(0)
        self.label = label
        self.model = GraphVAE(paper_model(model_name, hidden=hidden), data.num_types, data.max_nodes)
        self.model.decoder.dedup = dedup
        self.model.train()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-4, fused=True)  # as attnas.graphvae.train
        self.loss = loss
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def step(self, batch, record: bool) -> None:
        w, c = time.perf_counter(), time.process_time()
        self.opt.zero_grad(set_to_none=True)
        self.loss(self.model, batch).backward()
        self.opt.step()
        if record:
            self.wall.append(time.perf_counter() - w)
            self.cpu.append(time.process_time() - c)


def run_round_robin(variants, data, steps, repeats, seed=0):
    gen = torch.Generator().manual_seed(seed)
    walls = {v.label: [] for v in variants}
    cpus = {v.label: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            v.wall, v.cpu = [], []
        batches = [b for _, (b, _y) in zip(range(steps + 2), data.batches(BATCH, shuffle=True, generator=gen))]
        for i, b in enumerate(batches):
            for v in variants:
                v.step(b, record=i >= 2)
        for v in variants:
            walls[v.label].append(statistics.median(v.wall))
            cpus[v.label].append(statistics.median(v.cpu))
    return {k: statistics.median(x) for k, x in walls.items()}, {k: statistics.median(x) for k, x in cpus.items()}


def _matmul_gflops(hidden: int, seconds: float = 2.0) -> float:
    """CPU-time GFLOP/s of ``(32, hidden) @ (hidden, 3 * hidden)`` (a GRU gate product at batch 32)."""
    a, w = torch.randn(BATCH, hidden), torch.randn(hidden, 3 * hidden)
    n, t = 0, time.process_time()
    while time.process_time() - t < seconds:
        a @ w
        n += 1
    return n * 2 * BATCH * hidden * 3 * hidden / (time.process_time() - t) / 1e9


def report_flops(variants, data, hidden, per_epoch, cpu) -> None:
    """Floating-point operations per training step, and the epoch time at the matmul rate."""
    from torch.utils.flop_counter import FlopCounterMode

    batch = next(iter(data.batches(BATCH, shuffle=False)))[0]
    peak = _matmul_gflops(hidden)
    print(f"# plain matmul {BATCH}x{hidden}x{3 * hidden}: {peak:.1f} GFLOP/s (cpu time, 1 step = fwd+bwd)   [{_load()}]")
    for v in variants:
        counter = FlopCounterMode(display=False)
        with counter:
            v.loss(v.model, batch).backward()
        v.model.zero_grad(set_to_none=True)
        gflop = counter.get_total_flops() / 1e9
        floor = gflop / peak * per_epoch
        print(f"{v.label:12s} {gflop:6.2f} GFLOP/step; at the matmul rate {floor:6.1f} s/epoch on one core; "
              f"measured cpu {cpu[v.label] * per_epoch:6.1f} s/epoch = {floor / (cpu[v.label] * per_epoch):.0%} of that rate")


def main() -> None:
    ap = argparse.ArgumentParser(description="seconds per graph-VAE training epoch on ENAS")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed round-robin rounds per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=501)
    ap.add_argument("--models", nargs="+", default=["D-VAE", "DVAE-EMB", "GCN", "GCN-EMB"])
    ap.add_argument("--no-dense", action="store_true", help="skip the D-VAE variant without deduplication")
    ap.add_argument("--reference-steps", type=int, default=1, help="steps of the per-graph reference (0: skip)")
    ap.add_argument("--flops", action="store_true",
                    help="also count each step's floating-point operations and time a plain matrix product of the "
                         "GRU's shape: the matmul-bound floor of an epoch on this machine, measured in the same run")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = load_enas6(args.data_dir).train
    per_epoch = math.ceil(len(data) / BATCH)
    print(
        f"# torch {torch.__version__}, threads={torch.get_num_threads()}, batch={BATCH}, hidden={args.hidden}; "
        f"s/epoch = median step time x {per_epoch} steps (extrapolated from {args.repeats} repeats x "
        f"{args.steps} round-robin steps)"
    )
    print(f"# start {_load()}")
    variants = [Variant(m, m, data, args.hidden) for m in args.models]
    if "D-VAE" in args.models and not args.no_dense:
        variants.append(Variant("D-VAE dense", "D-VAE", data, args.hidden, dedup=False))
    wall, cpu = run_round_robin(variants, data, args.steps, args.repeats)
    load = _load()
    base = wall.get("D-VAE")
    for v in variants:
        ratio = f"  x{wall[v.label] / base:.2f} of D-VAE" if base else ""
        print(
            f"{v.label:12s} wall {wall[v.label] * 1000:7.1f} ms/step = {wall[v.label] * per_epoch:6.1f} s/epoch   "
            f"cpu {cpu[v.label] * 1000:7.1f} ms/step = {cpu[v.label] * per_epoch:6.1f} s/epoch{ratio}   [{load}]"
        )
    if args.flops:
        report_flops(variants, data, args.hidden, per_epoch, cpu)
    if "D-VAE" in args.models and args.reference_steps > 0:
        ref = Variant("per-graph", "D-VAE", data, args.hidden, loss=_reference_loss)
        main_v = Variant("D-VAE", "D-VAE", data, args.hidden)
        w2, c2 = run_round_robin([main_v, ref], data, args.reference_steps, 1, seed=1)
        print(
            f"{'per-graph reference':20s} wall {w2['per-graph']:.2f} s/step = {w2['per-graph'] * per_epoch:7.0f} s/epoch, "
            f"cpu {c2['per-graph'] * per_epoch:7.0f} s/epoch; batched D-VAE is x{w2['per-graph'] / w2['D-VAE']:.1f} faster "
            f"(wall, same rounds)   [{_load()}]"
        )


if __name__ == "__main__":
    main()
